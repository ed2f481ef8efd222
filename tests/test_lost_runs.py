"""A run never stays "running" for ever: its supervisor holds a heartbeat, and a run whose
supervisor has gone ends as lost, its telemetry read to the end and closed; ending a run waits
out a locked database; a run that ended with no ingester says its telemetry is unread."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from telemetry import services
from telemetry.ingest import Ingester
from telemetry.models import Run
from tests.conftest import ROOT, wait_for
from tests.test_end_to_end import supervisor_of

# Writes two points, says so, writes two more once a file named go appears, then waits to be
# killed (its pid in a file, so the test can).
PACED = textwrap.dedent(
    """\
    import json, os, time
    open("pid", "w").write(str(os.getpid()))
    path = os.environ["DIVERGENT_TELEMETRY_PATH"]
    def write(*steps):
        with open(path, "a") as f:
            for step in steps:
                f.write(json.dumps({"step": step, "loss": 1 / step}) + "\\n")
    write(1, 2)
    print("wrote 2", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists("go") and time.monotonic() < deadline:
        time.sleep(0.05)
    write(3, 4)
    print("wrote 4", flush=True)
    time.sleep(60 if os.environ.get("STAY") else 0)
    """
)


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "paced.py").write_text(PACED)
    return folder


def popen(div, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "divergent", *args],
        env={**div.env, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_command(run: Run) -> None:
    """Whatever of the command a test left running, stopped."""
    try:
        os.kill(int((run.files_path / "pid").read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_a_detached_run_whose_supervisor_is_killed_ends_lost_and_followers_return(div, project):
    name = div("run", str(project), "--detach", "--", sys.executable, "paced.py", timeout=60)
    name = name.stdout.strip()
    run = wait_for(lambda: Run.objects.filter(points=2).first(), 30, "two points")
    supervisor = supervisor_of(name)
    log_follower = popen(div, "log", name, "-f")
    try:
        # Stopped first: two more lines, that its ingester is not there to read, then killed.
        os.kill(supervisor, signal.SIGSTOP)
        (run.files_path / "go").touch()
        wait_for(lambda: run.telemetry_path.read_text().count("\n") == 4, what="4 lines")
        os.kill(supervisor, signal.SIGKILL)

        started = time.monotonic()
        followed = div("telemetry", name, "loss", "-f", timeout=30)
        log_out, _ = log_follower.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        log_follower.kill()
        kill_command(run)

    assert followed.returncode == 0, followed.stderr
    assert followed.stdout == "step\tloss\n1\t1.0\n2\t0.5\n3\t0.3333333333333333\n4\t0.25\n"
    assert followed.stderr == (
        f"telemetry: {name} was lost: its supervisor went without recording how the command "
        "ended; what it wrote until then is all here\n"
    )
    assert took < 30
    run.refresh_from_db()
    assert (run.status, run.exit_code, run.telemetry_closed, run.points) == ("lost", None, True, 4)
    assert log_follower.returncode == 0
    assert f"div: {name} was lost: its supervisor (pid {supervisor} on " in log_out
    listed = div("telemetry").stdout.splitlines()
    assert listed[1].split()[:3] == [name, "lost", "4"]


def test_an_attached_div_run_killed_ends_lost_under_div_ingest(div, project):
    ingesting = popen(div, "ingest")
    launched = popen(div, "run", str(project), "--", sys.executable, "paced.py", STAY="1")
    try:
        wait_for(lambda: Run.objects.filter(points=2).exists(), 30, "two points")
        launched.kill()
        started = time.monotonic()
        wait_for(lambda: Run.objects.get().telemetry_closed, 30, "the run to be lost and closed")
        took = time.monotonic() - started
    finally:
        launched.kill()
        ingesting.send_signal(signal.SIGTERM)
        ingesting.communicate(timeout=30)
        kill_command(Run.objects.get())

    run = Run.objects.get()
    assert run.status == "lost"
    assert run.supervisor_pid == launched.pid
    assert run.ended is not None
    assert took < 30
    print(f"\nlost and closed {took:.1f} s after div run was killed")


# Writes a point every 0.1 s for 10 s, and nothing to its log; its pid in a file.
QUIET = textwrap.dedent(
    """\
    import json, os, time
    open("pid", "w").write(str(os.getpid()))
    path = os.environ["DIVERGENT_TELEMETRY_PATH"]
    for step in range(1, 101):
        with open(path, "a") as f:
            f.write(json.dumps({"step": step}) + "\\n")
        time.sleep(0.1)
    """
)


def running(pid: int) -> bool:
    """Whether a process is there and not a zombie (killed, waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def supervised(run_pk: int) -> Run:
    """The run once its supervisor has said who it is."""
    return wait_for(
        lambda: Run.objects.filter(pk=run_pk, supervisor_pid__isnull=False).first(),
        30,
        "the supervisor's first heartbeat",
    )


def writer_of(run: Run) -> int:
    return int(
        wait_for(
            lambda: (run.files_path / "pid").exists() and (run.files_path / "pid").read_text(),
            what="the pid",
        )
    )


def stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def test_a_pid_given_to_another_process_does_not_keep_a_lost_run_running(div, project):
    name = div("run", str(project), "--detach", "--", sys.executable, "paced.py").stdout.strip()
    run = wait_for(lambda: Run.objects.filter(points=2).first(), 30, "two points")
    run = supervised(run.pk)
    os.kill(run.supervisor_pid, signal.SIGKILL)
    # The supervisor's pid, given since to another process of this machine.
    other = subprocess.Popen(["sleep", "1000"])
    try:
        Run.objects.filter(pk=run.pk).update(
            supervisor_pid=other.pid, heartbeat=timezone.now() - timedelta(minutes=10)
        )
        followed = div("telemetry", name, "loss", "-f", timeout=20)
    finally:
        other.kill()
        other.wait()
        kill_command(run)

    assert followed.returncode == 0, followed.stderr
    assert followed.stderr == (
        f"telemetry: {name} was lost: its supervisor went without recording how the command "
        "ended; what it wrote until then is all here\n"
    )
    run.refresh_from_db()
    assert (run.status, run.telemetry_closed) == ("lost", True)


@pytest.fixture
def quiet(tmp_path) -> Path:
    folder = tmp_path / "quiet"
    folder.mkdir()
    (folder / "quiet.py").write_text(QUIET)
    return folder


def test_a_lost_runs_command_is_stopped_before_its_telemetry_is_closed(div, quiet):
    """Its writer a child of a shell: only its process group tells it is the run's."""
    launched = div(
        "run", str(quiet), "--detach", "--", "sh", "-c", f"{sys.executable} quiet.py; exit 0"
    )
    name = launched.stdout.strip()
    run = wait_for(lambda: Run.objects.filter(points__gte=5).first(), 30, "five points")
    run = supervised(run.pk)
    writer = writer_of(run)
    try:
        os.kill(run.supervisor_pid, signal.SIGKILL)
        followed = div("telemetry", name, "--json", "-f", timeout=30)
        still_running = running(writer)
    finally:
        stop(writer)

    assert followed.returncode == 0, followed.stderr
    assert not still_running, "the command went on writing after its run was lost and closed"
    run.refresh_from_db()
    written = run.telemetry_path.read_text().count("\n")
    assert written < 100
    assert (run.status, run.telemetry_closed, run.points) == ("lost", True, written)
    assert followed.stdout.count("\n") == written
    assert followed.stderr.endswith("what it wrote until then is all here\n")


def test_a_supervisor_killed_takes_its_command_with_it_with_no_one_else_looking(div, quiet):
    div("run", str(quiet), "--detach", "--", sys.executable, "quiet.py")
    run = supervised(wait_for(lambda: Run.objects.first(), what="the run").pk)
    writer = writer_of(run)
    try:
        os.kill(run.supervisor_pid, signal.SIGKILL)
        wait_for(lambda: not running(writer), 5, "the command to end with its supervisor")
    finally:
        stop(writer)


def hold_the_write_lock() -> subprocess.Popen:
    """Another process that holds SQLite's write lock from when it says "locked" until 4 s
    after it reads a line."""
    database = connection.settings_dict["NAME"]
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
            import sqlite3, sys, time
            db = sqlite3.connect({str(database)!r}, isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            sys.stdin.readline()
            time.sleep(4)
            db.execute("COMMIT")
            """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def ended_while_locked(launched: subprocess.Popen, run: Run) -> tuple[str, str]:
    """Let the run's command go (its file `go`) while another process holds SQLite's write
    lock, from then until 4 s after; launched's stdout and stderr once it has ended."""
    locker = hold_the_write_lock()
    try:
        assert locker.stdout.readline() == "locked\n"
        (run.files_path / "go").touch()
        locker.stdin.write("go\n")
        locker.stdin.flush()
        return launched.communicate(timeout=60)
    finally:
        locker.kill()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
def test_ending_a_run_waits_out_a_database_locked_past_its_timeout(div, project):
    """The command ends while another process holds SQLite's write lock for longer than a
    write waits (DIVERGENT_DB_TIMEOUT, 1 s here in place of 30 s): the run still ends
    succeeded, div run exits with the command's code, and says so in one line, not a traceback."""
    launched = popen(
        div, "run", str(project), "--", sys.executable, "paced.py", DIVERGENT_DB_TIMEOUT="1"
    )
    try:
        run = wait_for(lambda: Run.objects.filter(points=2).first(), 30, "two points")
        out, err = ended_while_locked(launched, run)  # the lock held over the run's end
    finally:
        launched.kill()

    assert launched.returncode == 0, err
    assert "Traceback" not in err
    assert f"div: cannot record how {run.name} ended yet (database is locked); trying again" in err
    run.refresh_from_db()
    assert (run.status, run.exit_code) == ("succeeded", 0)
    wait_for(lambda: Run.objects.get().telemetry_closed, 30, "the telemetry to close")
    assert Run.objects.get().points == 4


# Says a tick and writes a point every 0.5 s for 8 s.
TICKS = textwrap.dedent(
    """\
    import json, os, time
    for step in range(1, 17):
        print(f"tick {step}", flush=True)
        with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
            f.write(json.dumps({"step": step}) + "\\n")
        time.sleep(0.5)
    """
)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's pg_terminate_backend")
def test_a_database_that_drops_every_connection_mid_run_stops_neither_the_command_nor_its_log(
    div, project
):
    (project / "ticks.py").write_text(TICKS)
    launched = popen(div, "run", str(project), "--", sys.executable, "ticks.py")
    try:
        run = wait_for(lambda: Run.objects.first(), what="the run")
        wait_for(lambda: "tick 4\n" in run.log_path.read_text(), 30, "four ticks")
        # As a restarted or failed-over database does, before the log's secrets are read again.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert launched.returncode == 0, err
    # At most the ingester's one line that it waits (the first query to meet the dropped
    # connection may be any of a pass's), never a traceback.
    said = ("ingesting paused: the database refused (", f"ingesting {run.name} failed (")
    assert all(line.startswith(said) for line in err.splitlines()), err
    assert [line for line in out.splitlines() if line.startswith("tick")] == [
        f"tick {step}" for step in range(1, 17)
    ]
    run.refresh_from_db()
    assert (run.status, run.exit_code) == ("succeeded", 0)
    wait_for(lambda: Run.objects.get().telemetry_closed, 30, "the telemetry to close")
    assert Run.objects.get().points == 16


def test_a_run_of_another_machine_silent_past_30_s_is_lost_and_back_when_heard_again(
    home, transactional_db
):
    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    services.run_heartbeat(run_id=run.pk, host="gpu-7", pid=4242)
    run.telemetry_path.write_text(json.dumps({"step": 1}) + "\n")
    Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(seconds=20))
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    assert Run.objects.get().status == "running"  # 20 s of silence: not yet

    Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(seconds=31))
    ingester.reaped_at = -1e9
    while ingester.tail_once():
        pass
    run.refresh_from_db()
    assert (run.status, run.telemetry_closed, run.points) == ("lost", True, 1)

    services.run_heartbeat(run_id=run.pk, host="gpu-7", pid=4242)
    run.refresh_from_db()
    assert (run.status, run.ended, run.telemetry_closed) == ("running", None, False)
    connection.close()


def test_a_detached_run_whose_supervisor_never_started_is_lost_30_s_after_it_was_made(
    home, transactional_db
):
    made = services.run_create(org=services.org_get_or_create(), command=["train"])
    from telemetry import supervision

    assert supervision.reap_live() == []
    Run.objects.filter(pk=made.pk).update(created=timezone.now() - timedelta(seconds=31))

    assert [run.pk for run in supervision.reap_live()] == [made.pk]
    assert Run.objects.get().status == "lost"


def test_a_run_that_ended_with_no_ingester_says_its_telemetry_is_unread_until_read(div, client):
    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    run.telemetry_path.write_text("".join(json.dumps({"step": s}) + "\n" for s in (1, 2, 3)))
    services.run_finish(run=run, exit_code=0)
    user = services.user_create(username="alice", orgs=["default"])
    client.force_login(user)

    listed = div("telemetry")
    keys = div("telemetry", run.name)
    api = client.get(f"/api/runs/{run.name}/").json()

    assert listed.stdout.splitlines()[1].split()[:4] == [run.name, "succeeded", "0", "(unread)"]
    assert keys.stderr == (
        f"telemetry: {run.name} has ended but its telemetry is not all read yet; "
        "div serve or div ingest reads it\n"
    )
    assert (api["status"], api["points"], api["unread"]) == ("succeeded", 0, True)
    page = client.get(f"/runs/{run.name}/").content.decode()
    assert 'id="unread-banner" >' in page or 'id="unread-banner">' in page

    assert div("ingest", "--once").returncode == 0

    assert div("telemetry").stdout.splitlines()[1].split()[:3] == [run.name, "succeeded", "3"]
    assert client.get(f"/api/runs/{run.name}/").json()["unread"] is False
    assert div("telemetry", run.name).stderr == ""
    assert 'id="unread-banner" hidden' in client.get(f"/runs/{run.name}/").content.decode()
