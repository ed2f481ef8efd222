"""The rules of following a run's telemetry file (telemetry/tailing.py) and of telling a run's
supervisor gone (telemetry/supervision.py's `gone`): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from telemetry import tailing
from telemetry.supervision import LOST_AFTER, gone
from telemetry.tailing import Seen, Verdict, fingerprint, judge, rotation_note

HEAD = fingerprint(b'{"step": 1, "loss": 2.5}\n')


@pytest.mark.parametrize(
    "stored, seen, verdict",
    [
        (("8:1", HEAD, 25), Seen(inode="8:1", size=25, head=HEAD), Verdict.SAME),
        (("8:1", HEAD, 25), Seen(inode="8:1", size=90, head=HEAD), Verdict.SAME),
        (("8:1", HEAD, 25), Seen(inode="8:2", size=90, head=HEAD), Verdict.REPLACED),
        (("8:1", HEAD, 25), Seen(inode="8:1", size=10), Verdict.TRUNCATED),
        (("8:1", HEAD, 25), Seen(inode="8:1", size=90, head="other"), Verdict.REWRITTEN),
        (("8:1", HEAD, 25), Seen(), Verdict.REPLACED),  # renamed away, nothing new yet
        (("8:2", "", 0), Seen(), Verdict.REPLACED),  # a rotated file next, nothing at the path
        (("", "", 0), Seen(), Verdict.SAME),  # not written yet
        (("", "", 0), Seen(inode="8:1", size=25), Verdict.SAME),  # the first bytes
        (("", "", 25), Seen(inode="8:1", size=90), Verdict.SAME),  # read before marks were kept
        (("8:1", HEAD, 25), Seen(problem="is a directory"), Verdict.UNREADABLE),
    ],
)
def test_the_file_at_the_path_is_judged_against_the_one_the_offset_counts(stored, seen, verdict):
    inode, head, offset = stored
    assert judge(inode=inode, head=head, offset=offset, seen=seen) is verdict


def test_the_fingerprint_covers_the_first_bytes_read_up_to_256():
    assert tailing.head_length(25) == 25
    assert tailing.head_length(10_000) == 256
    assert fingerprint(b"") == ""
    assert fingerprint(b"a") != fingerprint(b"b")


def test_moving_on_to_a_new_file_is_one_line_saying_whether_the_old_ones_rest_was_read():
    assert rotation_note(
        Verdict.REPLACED, name="telemetry.jsonl", offset=6234, previous="telemetry.jsonl.1"
    ) == (
        "telemetry: telemetry.jsonl was rotated; read the rest of the old one "
        "(telemetry.jsonl.1); now reading telemetry.jsonl from its start\n"
    )
    assert rotation_note(Verdict.TRUNCATED, name="telemetry.jsonl", offset=6234, previous=None) == (
        "telemetry: telemetry.jsonl was truncated below byte 6,234; now reading telemetry.jsonl "
        "from its start (lines the old one had past byte 6,234, if any, were not read)\n"
    )

    assert rotation_note(
        Verdict.REPLACED,
        name="telemetry.jsonl",
        offset=6234,
        previous="telemetry.jsonl.3",
        following="telemetry.jsonl.1",
        compressed=["telemetry.jsonl.2.gz"],
    ) == (
        "telemetry: telemetry.jsonl was rotated; read the rest of the old one (telemetry.jsonl.3); "
        "telemetry.jsonl.2.gz is compressed and was not read; now reading telemetry.jsonl.1 from "
        "its start\n"
    )


def test_rotated_files_are_read_oldest_first_by_when_they_were_last_written():
    files = [
        tailing.Rotated("telemetry.jsonl.1", "8:3", 300),
        tailing.Rotated("telemetry.jsonl.3", "8:1", 100),
        tailing.Rotated("telemetry.jsonl-20261130", "8:4", 400),
        tailing.Rotated("telemetry.jsonl.2", "8:2", 100),  # in the same tick as .3: numbered
    ]

    everything = tailing.unread(files, than=tailing.written_after(0))
    after_the_third = tailing.unread(files, than=tailing.order("telemetry.jsonl.3", 100))
    after_a_gone_one = tailing.unread(files, than=tailing.written_after(100))

    assert [f.name for f in everything] == [
        "telemetry.jsonl.3",
        "telemetry.jsonl.2",
        "telemetry.jsonl.1",
        "telemetry.jsonl-20261130",
    ]
    assert [f.inode for f in after_the_third] == ["8:2", "8:3", "8:4"]
    assert [f.inode for f in after_a_gone_one] == ["8:3", "8:4"]
    assert tailing.is_rotated("telemetry.jsonl.1", of="telemetry.jsonl")
    assert not tailing.is_rotated("telemetry.jsonl", of="telemetry.jsonl")
    assert not tailing.is_rotated("log", of="telemetry.jsonl")
    assert tailing.Rotated("telemetry.jsonl.2.gz", "8:5", 1).compressed


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BOOTED = NOW - timedelta(days=3)


def alive_here(pids):
    """A process table of this machine ("here"): pid -> when it started; other hosts cannot
    be told."""

    def alive(host, pid, started):
        if host != "here":
            return None
        return pid in pids and started in (None, pids[pid])

    return alive


@pytest.mark.parametrize(
    "heartbeat, host, pid, created, is_gone",
    [
        (NOW - timedelta(seconds=2), "here", 7, NOW, False),
        (NOW - timedelta(seconds=2), "here", 8, NOW, True),  # its pid is not alive: at once
        # Alive but silent: waiting on a locked database to record how the run ended.
        (NOW - timedelta(minutes=10), "here", 7, NOW, False),
        # Its pid given again, to a process that started at another time.
        (NOW - timedelta(minutes=10), "here", 9, NOW, True),
        (BOOTED - timedelta(seconds=1), "here", 7, NOW, True),  # the machine restarted since
        (NOW - timedelta(seconds=20), "gpu-7", 7, NOW, False),
        (NOW - LOST_AFTER - timedelta(seconds=1), "gpu-7", 7, NOW, True),
        (None, "", None, NOW - timedelta(seconds=5), False),  # its supervisor is starting
        (None, "", None, NOW - LOST_AFTER - timedelta(seconds=1), True),  # and never did
    ],
)
def test_a_supervisor_is_gone_when_its_pid_is_or_else_when_its_heartbeat_is_silent(
    heartbeat, host, pid, created, is_gone
):
    assert (
        gone(
            heartbeat=heartbeat,
            host=host,
            pid=pid,
            started={7: 1200, 8: 1200, 9: 1200}.get(pid),
            created=created,
            now=NOW,
            alive=alive_here({7: 1200, 9: 98_765}),
            booted=BOOTED,
        )
        is is_gone
    )
