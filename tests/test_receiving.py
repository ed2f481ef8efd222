"""A remote run's files arriving: each byte appended once, even when uploads race or the server
is killed between appending a chunk of log and noting it (telemetry/receiving.py)."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict

import pytest

from telemetry import receiving, services
from telemetry.masking import Masker
from telemetry.receiving import LogRecord

pytest_plugins = ["tests.personas"]

NONE = Masker(())


@pytest.fixture
def run(home, alice):
    return services.run_open(
        user=alice,
        org="acme",
        command=["train"],
        layout_source="",
        layout_origin="",
        host="gpu-7",
        pid=1,
    )


def left_by_a_killed_server(run, *, received: int, chunk: bytes, appended: bytes) -> None:
    """What an upload killed mid-way leaves: the record says the chunk is being appended at the
    log's end, and the log holds `appended` of it there (nothing, part, or all)."""
    at = run.log_path.stat().st_size
    record = LogRecord(received)
    record.pending = {
        "at": at,
        "length": len(chunk),
        "digest": hashlib.sha256(chunk).hexdigest(),
        "next": asdict(LogRecord(received + len(chunk))),
    }
    receiving.folder(run).mkdir(exist_ok=True)
    (receiving.folder(run) / "log.json").write_text(json.dumps(asdict(record)))
    with open(run.log_path, "ab") as log:
        log.write(appended)


@pytest.mark.parametrize("appended", [b"", b"second li", b"second line\n"])
def test_a_log_chunk_sent_again_after_the_server_was_killed_lands_once(run, appended):
    receiving.receive(run, "log", 0, b"first line\n", NONE)
    left_by_a_killed_server(run, received=11, chunk=b"second line\n", appended=appended)

    after, took = receiving.receive(run, "log", 11, b"second line\nthird line\n", NONE)

    assert after == 34 and took == (11 if appended == b"second line\n" else 23)
    assert run.log_path.read_bytes() == b"first line\nsecond line\nthird line\n"
    assert receiving.offsets(run) == {"telemetry": 0, "log": 34}


def test_a_note_the_ingester_adds_between_uploads_stays_out_of_them(run):
    receiving.receive(run, "log", 0, b"one\n", NONE)
    services.log_append(run, "telemetry: dropped a line that is not JSON\n")
    receiving.receive(run, "log", 0, b"one\ntwo\n", NONE)

    assert run.log_path.read_bytes() == (b"one\ntelemetry: dropped a line that is not JSON\ntwo\n")
    assert receiving.offsets(run)["log"] == 8


def test_uploads_racing_for_one_run_never_interleave(run):
    """Eight uploaders send the same 200 lines in chunks of different sizes, from wherever the
    server says it has got to: every byte once, in order."""
    data = b"".join(json.dumps({"step": i, "loss": 1 / i}).encode() + b"\n" for i in range(1, 201))

    def uploader(size: int) -> None:
        at = 0
        while at < len(data):
            try:
                at, _ = receiving.receive(run, "telemetry", at, data[at : at + size], NONE)
            except receiving.Behind as e:
                at = e.offset

    threads = [threading.Thread(target=uploader, args=(size,)) for size in (7, 64, 100, 333) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert run.telemetry_path.read_bytes() == data


def test_the_log_is_complete_only_with_every_byte_the_client_says_it_has(run):
    receiving.receive(run, "log", 0, b"abc", NONE)

    with pytest.raises(receiving.Behind) as behind:
        receiving.complete(run, telemetry=0, log=5, masker=NONE)
    assert (behind.value.kind, behind.value.offset) == ("log", 3)
    receiving.complete(run, telemetry=0, log=3, masker=NONE)
