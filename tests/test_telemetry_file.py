"""A run's telemetry file as people really treat it: rotated (copytruncate, or renamed and made
anew), truncated, replaced by a directory, a FIFO or a link out of the run's folder. No line is
lost silently, none is stored twice, and a path that cannot be read is said once and counted."""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from django.db import connection

from telemetry import queries, services
from telemetry.models import Drop, Run
from tests.conftest import ROOT, wait_for
from tests.test_lost_runs import ended_while_locked

pytest_plugins = ["tests.personas"]


def steps(run: Run) -> list[int]:
    return [data["step"] for _, data in queries.points(run.pk)]


def write(path, first: int, count: int) -> None:
    with open(path, "a") as f:
        for step in range(first, first + count):
            f.write(json.dumps({"step": step, "loss": 1 / step}) + "\n")


def log_lines(run: Run, start: str) -> list[str]:
    return [line for line in run.log_path.read_text().splitlines() if line.startswith(start)]


def test_after_copytruncate_every_line_is_read_once_the_copys_rest_first(make_run):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 100)
    telemetry.ingest()
    write(path, 101, 10)  # written, not read yet, when logrotate copies and truncates
    shutil.copy(path, path.with_name("telemetry.jsonl.1"))
    os.truncate(path, 0)
    write(path, 111, 60)

    telemetry.ingest()
    telemetry.ingest()  # and a pass more: the rotation is noted once

    assert steps(telemetry.run) == list(range(1, 171))
    assert log_lines(telemetry.run, "telemetry:") == [
        "telemetry: telemetry.jsonl was rotated; read the rest of the old one "
        "(telemetry.jsonl.1); now reading telemetry.jsonl from its start"
    ]
    assert not Drop.objects.filter(run=telemetry.run).exists()


def test_after_a_rename_and_a_new_file_every_line_is_read_once_the_old_files_rest_first(
    make_run,
):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 100)
    telemetry.ingest()
    write(path, 101, 10)
    path.rename(path.with_name("telemetry.jsonl.1"))
    write(path, 111, 60)

    telemetry.ingest()

    assert steps(telemetry.run) == list(range(1, 171))
    assert log_lines(telemetry.run, "telemetry:") == [
        "telemetry: telemetry.jsonl was rotated; read the rest of the old one "
        "(telemetry.jsonl.1); now reading telemetry.jsonl from its start"
    ]


def test_a_writer_still_appending_to_the_renamed_file_is_followed_until_the_new_one_fills(
    make_run,
):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    old = path.with_name("telemetry.jsonl.1")
    write(path, 1, 100)
    telemetry.ingest()
    path.rename(old)
    path.touch()  # logrotate's `create`: an empty new file, while the writer keeps its old one
    write(old, 101, 5)
    telemetry.ingest()
    write(old, 106, 5)  # the writer has not reopened yet
    telemetry.ingest()
    write(path, 111, 60)  # now it has

    telemetry.ingest()

    assert steps(telemetry.run) == list(range(1, 171))


def test_a_file_truncated_and_written_past_the_old_offset_is_told_by_its_first_bytes(make_run):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 10)
    telemetry.ingest()
    read = path.stat().st_size
    path.write_text("".join(json.dumps({"step": s, "loss": 0.5}) + "\n" for s in range(100, 140)))

    telemetry.ingest()

    assert steps(telemetry.run) == [*range(1, 11), *range(100, 140)]
    assert log_lines(telemetry.run, "telemetry:") == [
        "telemetry: telemetry.jsonl was truncated and written again; now reading telemetry.jsonl "
        f"from its start (lines the old one had past byte {read}, if any, were not read)"
    ]


def test_an_old_file_that_is_gone_is_said_and_the_new_one_read_from_its_start(make_run):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 100)
    telemetry.ingest()
    read = path.stat().st_size
    path.unlink()
    write(path, 101, 60)

    telemetry.ingest()
    telemetry.finish()

    assert steps(telemetry.run) == list(range(1, 161))
    assert telemetry.run.telemetry_closed
    # The new file may be given the old one's inode number: then only its size tells.
    [note] = log_lines(telemetry.run, "telemetry:")
    assert note.startswith("telemetry: telemetry.jsonl was ")
    assert note.endswith(
        "; now reading telemetry.jsonl from its start "
        f"(lines the old one had past byte {read:,}, if any, were not read)"
    )


def test_an_ingester_killed_before_a_rotation_resumes_in_the_old_file_then_reads_the_new(div, home):
    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    total = 150_000
    write(run.telemetry_path, 1, total)
    first = subprocess.Popen(
        [sys.executable, "-m", "divergent", "ingest"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stored = wait_for(lambda: Run.objects.get(pk=run.pk).points, what="a first batch")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert stored < total, "the ingester finished before it was killed: nothing was tested"
    run.telemetry_path.rename(run.telemetry_path.with_name("telemetry.jsonl.1"))
    write(run.telemetry_path, total + 1, 60)
    services.run_finish(run=run, exit_code=0)

    resumed = div("ingest", "--once")

    assert resumed.returncode == 0, resumed.stderr
    run.refresh_from_db()
    assert (run.points, run.telemetry_closed) == (total + 60, True)
    assert steps(run) == list(range(1, total + 61))


def rotate(path, *, copy: bool) -> None:
    """What logrotate does: .2 becomes .3, .1 becomes .2, then the file becomes .1 (renamed, and
    a new file made at the path; or with copytruncate, copied there and cut to nothing)."""
    rotated = sorted(path.parent.glob(path.name + ".*"), key=lambda p: -int(p.suffix[1:]))
    for old in rotated:
        old.rename(path.with_name(f"{path.name}.{int(old.suffix[1:]) + 1}"))
    if copy:
        shutil.copy(path, path.with_name(path.name + ".1"))
        os.truncate(path, 0)
    else:
        path.rename(path.with_name(path.name + ".1"))


def rotation_notes(*names: str) -> list[str]:
    """The log's note for each rotation, from the oldest file read to the newest."""
    return [
        f"telemetry: telemetry.jsonl was rotated; read the rest of the old one ({old}); "
        f"now reading {new} from its start"
        for old, new in itertools.pairwise(names)
    ]


@pytest.mark.parametrize("copy", [False, True], ids=["renamed", "copytruncate"])
def test_three_rotations_between_two_passes_read_every_rotated_file_oldest_first(make_run, copy):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 20)
    telemetry.ingest()
    write(path, 21, 20)  # none of what follows is read until the ingester looks again
    rotate(path, copy=copy)
    write(path, 41, 40)
    rotate(path, copy=copy)
    write(path, 81, 40)
    rotate(path, copy=copy)
    write(path, 121, 40)

    telemetry.ingest()
    telemetry.finish()

    assert steps(telemetry.run) == list(range(1, 161))
    assert log_lines(telemetry.run, "telemetry:") == rotation_notes(
        "telemetry.jsonl.3", "telemetry.jsonl.2", "telemetry.jsonl.1", "telemetry.jsonl"
    )
    assert not Drop.objects.filter(run=telemetry.run).exists()


@pytest.mark.parametrize(
    "copy, rotations",
    [(False, 1), (True, 1), (True, 3), (False, 3)],
    ids=["renamed", "copied", "copied 3 times", "renamed 3 times"],
)
def test_rotations_before_the_ingesters_first_look_are_read_oldest_first(make_run, copy, rotations):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    for rotation in range(rotations):
        write(path, 1 + 40 * rotation, 40)
        rotate(path, copy=copy)
    write(path, 1 + 40 * rotations, 40)

    telemetry.ingest()
    telemetry.finish()

    assert steps(telemetry.run) == list(range(1, 40 * rotations + 41))
    names = [f"telemetry.jsonl.{n}" for n in range(rotations, 0, -1)]
    assert log_lines(telemetry.run, "telemetry:") == rotation_notes(*names, "telemetry.jsonl")


GONE = (
    "telemetry: lost what was unread of a rotated telemetry file; keep rotated files beside it, "
    "uncompressed, until they are read"
)


def test_a_rotated_file_compressed_before_it_was_read_is_said_counted_and_the_next_read(
    make_run, div
):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 20)
    telemetry.ingest()
    rotate(path, copy=False)
    write(path, 21, 20)
    rotate(path, copy=False)
    compressed = path.with_name("telemetry.jsonl.1.gz")
    with open(path.with_name("telemetry.jsonl.1"), "rb") as raw, gzip.open(compressed, "wb") as gz:
        gz.write(raw.read())  # logrotate's compress, without delaycompress
    path.with_name("telemetry.jsonl.1").unlink()
    write(path, 41, 20)

    telemetry.ingest()
    telemetry.finish()

    assert steps(telemetry.run) == [*range(1, 21), *range(41, 61)]
    assert log_lines(telemetry.run, "telemetry:") == [
        "telemetry: telemetry.jsonl was rotated; read the rest of the old one "
        "(telemetry.jsonl.2); telemetry.jsonl.1.gz is compressed and was not read; now reading "
        "telemetry.jsonl from its start",
    ]
    assert div("telemetry", telemetry.run.name).stderr == GONE + "\n"


def test_a_rotated_file_deleted_before_its_rest_was_read_is_counted_and_the_newer_ones_read(
    make_run,
):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    write(path, 1, 20)
    telemetry.ingest()
    read = path.stat().st_size
    write(path, 21, 20)
    rotate(path, copy=False)
    write(path, 41, 20)
    rotate(path, copy=False)
    write(path, 61, 20)
    path.with_name("telemetry.jsonl.2").unlink()  # the one the offset counts bytes of

    telemetry.ingest()
    telemetry.finish()

    assert steps(telemetry.run) == [*range(1, 21), *range(41, 81)]
    assert log_lines(telemetry.run, "telemetry:") == [
        "telemetry: telemetry.jsonl was replaced by another file; now reading telemetry.jsonl.1 "
        f"from its start (lines the old one had past byte {read:,}, if any, were not read)",
        *rotation_notes("telemetry.jsonl.1", "telemetry.jsonl"),
    ]
    assert Drop.objects.get(run=telemetry.run).reason == "rotated_away"
    assert Drop.objects.get(run=telemetry.run).count == 1


# Writes 160 lines, one every 20 ms, rotating its file as logrotate does before lines 41, 81 and
# 121; after line 20 it waits for a file named go.
ROTATES = """\
import json, os, time
path = os.environ["DIVERGENT_TELEMETRY_PATH"]
def rotate():
    for n in (2, 1):
        if os.path.exists(f"{path}.{n}"):
            os.rename(f"{path}.{n}", f"{path}.{n + 1}")
    os.rename(path, path + ".1")
for step in range(1, 161):
    if step == 21:
        while not os.path.exists("go"):
            time.sleep(0.02)
    if step in (41, 81, 121):
        rotate()
    with open(path, "a") as f:
        f.write(json.dumps({"step": step}) + "\\n")
    time.sleep(0.02)
"""


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
def test_three_rotations_while_the_ingester_waits_on_a_locked_database_lose_no_line(div, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "rotates.py").write_text(ROTATES)
    launched = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--"]
        + [sys.executable, "rotates.py"],
        env={**div.env, "DIVERGENT_DB_TIMEOUT": "1"},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run = wait_for(lambda: Run.objects.filter(points=20).first(), 30, "20 points")
        # Held 4 s from the go: the 140 lines left and 3 rotations happen in 2.8.
        out, err = ended_while_locked(launched, run)
    finally:
        launched.kill()

    assert launched.returncode == 0, err
    assert "Traceback" not in err
    run.refresh_from_db()
    assert (run.points, run.telemetry_closed) == (160, True)
    assert steps(run) == list(range(1, 161))
    assert log_lines(run, "telemetry:") == rotation_notes(
        "telemetry.jsonl.3", "telemetry.jsonl.2", "telemetry.jsonl.1", "telemetry.jsonl"
    )
    assert div("telemetry", run.name).stderr == ""


# ---- a path that cannot be read ---------------------------------------------------------------

NOTICE = (
    "telemetry: could not read the telemetry file; "
    "make DIVERGENT_TELEMETRY_PATH a regular file in the run's folder"
)


def make_socket(path) -> socket.socket:
    here = os.getcwd()
    listener = socket.socket(socket.AF_UNIX)
    os.chdir(path.parent)  # a socket's path is limited to about 100 bytes
    try:
        listener.bind(path.name)
    finally:
        os.chdir(here)
    return listener


@pytest.mark.parametrize("kind", ["directory", "FIFO", "socket", "link out"])
def test_a_path_that_cannot_be_read_is_noted_once_counted_and_closed_when_the_run_ends(
    make_run, kind, tmp_path, caplog
):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    path.unlink()
    elsewhere = tmp_path / "elsewhere.jsonl"
    write(elsewhere, 1, 3)
    listener = None
    if kind == "directory":
        path.mkdir()
        problem = "is a directory"
    elif kind == "FIFO":
        os.mkfifo(path)
        problem = "is a FIFO"
    elif kind == "socket":
        listener = make_socket(path)
        problem = "is a socket"
    else:
        path.symlink_to(elsewhere)
        problem = f"is a link to {elsewhere}, outside the run's folder"

    try:
        with caplog.at_level(logging.INFO, logger="divergent"):
            for _ in range(5):
                telemetry.ingest()
            telemetry.finish()
    finally:
        if listener is not None:
            listener.close()

    run = telemetry.run
    assert run.telemetry_closed
    assert run.points == 0  # nothing from elsewhere
    assert log_lines(run, "telemetry:") == [
        f"telemetry: cannot read telemetry.jsonl: it {problem}; DIVERGENT_TELEMETRY_PATH must "
        "be a regular file in the run's folder"
    ]
    assert Drop.objects.get(run=run).reason == "unreadable"
    assert Drop.objects.get(run=run).count == 1
    assert caplog.records == [], "the ingester logged: " + caplog.text


def test_a_link_inside_the_runs_folder_is_followed(make_run):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    path.unlink()
    target = telemetry.run.files_path / "metrics.jsonl"
    write(target, 1, 3)
    path.symlink_to(target)

    telemetry.finish()

    assert steps(telemetry.run) == [1, 2, 3]


def test_a_path_that_becomes_readable_again_is_read_and_a_new_problem_noted_again(make_run):
    telemetry = make_run()
    path = telemetry.run.telemetry_path
    path.unlink()
    path.mkdir()
    telemetry.ingest()
    path.rmdir()
    write(path, 1, 3)
    telemetry.ingest()
    path.unlink()
    os.mkfifo(path)
    telemetry.ingest()
    telemetry.finish()

    assert steps(telemetry.run) == [1, 2, 3]
    assert [
        line.split(": it ")[1].split(";")[0] for line in log_lines(telemetry.run, "telemetry:")
    ] == [
        "is a directory",
        "is a FIFO",
    ]
    assert Drop.objects.get(run=telemetry.run).count == 2


# Root reads a file of mode 000: as root, the ingester runs without the capabilities to.
NOT_ROOT = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []


@pytest.mark.skipif(bool(NOT_ROOT) and not shutil.which("setpriv"), reason="no setpriv")
def test_a_file_without_read_permission_is_noted_and_counted(div, home):
    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    write(run.telemetry_path, 1, 3)
    run.telemetry_path.chmod(0)
    services.run_finish(run=run, exit_code=0)

    ingested = subprocess.run(
        [*NOT_ROOT, sys.executable, "-m", "divergent", "ingest", "--once"],
        env=div.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (ingested.returncode, ingested.stderr) == (0, "")
    run.refresh_from_db()
    assert (run.telemetry_closed, run.points) == (True, 0)
    assert log_lines(run, "telemetry:") == [
        "telemetry: cannot read telemetry.jsonl: it cannot be opened (permission denied); "
        "DIVERGENT_TELEMETRY_PATH must be a regular file in the run's folder"
    ]
    assert div("telemetry", run.name).stderr == NOTICE + "\n"


def test_a_run_that_makes_its_telemetry_path_a_directory_ends_and_div_telemetry_counts_it(
    div, tmp_path
):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(
        "import os\n"
        "path = os.environ['DIVERGENT_TELEMETRY_PATH']\n"
        "os.remove(path)\n"
        "os.mkdir(path)\n"
        "print('made a directory of it')\n"
    )

    launched = div("run", str(project), "--", sys.executable, "train.py", timeout=60)

    assert launched.returncode == 0, launched.stderr
    assert "Traceback" not in launched.stderr
    run = Run.objects.get()
    assert run.telemetry_closed
    assert div("telemetry", run.name).stderr == NOTICE + "\n"
    assert launched.stdout.count("telemetry: cannot read telemetry.jsonl: it is a directory") == 1
