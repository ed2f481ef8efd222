"""A remote run through faults: the server killed mid-run, down for the whole run, a token
revoked while the run goes on, the client killed mid-upload, the client silent for a while.
Every line is stored exactly once, and `div run` exits with its command's code."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import http.client
import json
import os
import pty
import re
import signal
import sqlite3
import sys
import threading

import pytest

from telemetry import processes, queries, services
from telemetry.models import Run
from tests.browser import Server, serve, stop
from tests.conftest import wait_for
from tests.elsewhere import Proxy
from tests.remote import (  # noqa: F401  (fixtures)
    PACED,
    Machine,
    closed,
    pid_of,
    project,
    remote,
    start,
    the_run,
)

RUN = ["--org", "acme", "--", sys.executable, "train.py"]
# After the paced lines, 400 lines of 5 kB: dropped as too long, and 2 MB to upload.
LONG = json.dumps({"step": 0, "pad": "x" * 5000})
WITH_LONG_LINES = PACED + (
    "with open(os.environ['DIVERGENT_TELEMETRY_PATH'], 'a') as f:\n"
    f"    f.write(({LONG!r} + '\\n') * 400)\n"
)


def steps_stored(run: Run) -> list[int]:
    return [data["step"] for _, data in queries.points(run.pk)]


def points(n: int):
    return lambda: Run.objects.filter(points__gte=n).first()


def kept_line(url: str, run: str) -> bytes:
    return (
        f"div: cannot reach the server at {url} (connection refused); check DIVERGENT_URL, and "
        f"that div serve runs there; {run} is kept here: div sync {run} uploads the rest\n"
    ).encode()


def go(gpu, run: Run) -> None:
    (gpu.folder(run.name) / "files" / "go").touch()


def test_the_server_killed_mid_run_and_restarted_stores_every_line_exactly_once(remote, tmp_path):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "60", "0.05", "wait")
    try:
        run = wait_for(points(2), 30, "two points")
        remote.kill()
        go(gpu, run)
        written = gpu.folder(run.name) / "telemetry.jsonl"
        wait_for(lambda: written.read_text().count("\n") >= 20, 30, "20 lines written")
        remote.restart()
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert (launched.returncode, err) == (0, b"")  # caught up: not a terminal, no progress
    run = closed(run.name)
    assert (run.status, run.exit_code, run.points) == ("succeeded", 0, 60)
    assert steps_stored(run) == list(range(1, 61))
    log = run.log_path.read_text()
    assert [log.count(f"line {step}\n") for step in range(1, 61)] == [1] * 60
    assert out.decode().splitlines()[-1] == "line 60"


def test_a_server_down_for_the_whole_run_gets_all_of_it_from_div_sync(remote, tmp_path):
    folder = project(tmp_path, WITH_LONG_LINES)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "20", "0.01", "wait")
    try:
        run = wait_for(points(2), 30, "two points")
        remote.kill()
        go(gpu, run)
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()
    assert (launched.returncode, err) == (0, kept_line(remote.url, run.name))
    assert out.decode().splitlines()[-1] == "line 20"

    remote.restart()
    main, terminal = pty.openpty()  # stderr a terminal: progress is shown
    try:
        synced = gpu.popen("sync", run.name, stderr=terminal)
        os.close(terminal)
        out, _ = synced.communicate(timeout=60)
        progress = os.read(main, 65536).decode()
    finally:
        os.close(main)
    assert (synced.returncode, out) == (0, b"")
    assert progress.startswith(f"\rdiv: {run.name}: ") and progress.endswith("/s\x1b[K\r\n")
    assert " of 2 MB sent, " in progress
    run = closed(run.name)
    assert (run.status, run.exit_code, run.points) == ("succeeded", 0, 20)
    assert steps_stored(run) == list(range(1, 21))
    assert gpu("sync").returncode == 0  # nothing left: nothing to do


def outlived(remote, gpu, folder, steps: int) -> Run:
    """A run whose server went away while it ran, and stayed away to its end: kept for div sync.
    The server stays down."""
    before = Run.objects.order_by("pk").values_list("pk", flat=True).last() or 0
    launched = gpu.popen("run", str(folder), *RUN, str(steps), "0.01", "wait")
    try:
        run = wait_for(lambda: Run.objects.filter(pk__gt=before, points__gte=2).first(), 30)
        remote.kill()
        go(gpu, run)
        _, err = launched.communicate(timeout=60)
    finally:
        launched.kill()
    assert err == kept_line(remote.url, run.name)
    return run


def kept_run(remote, gpu, folder, steps: int) -> Run:
    """A run kept for div sync (outlived), with its server started again."""
    run = outlived(remote, gpu, folder, steps)
    remote.restart()
    return run


def test_div_sync_sends_every_run_it_can_and_says_in_one_line_why_not_the_others(remote, tmp_path):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    runs = [kept_run(remote, gpu, folder, steps) for steps in (4, 5)]
    # The one div sync would reach first, by name or number, is no longer on the server.
    gone, kept = sorted(runs, key=lambda run: run.name)
    Run.objects.filter(pk=gone.pk).delete()

    synced = gpu("sync")

    assert (synced.returncode, synced.stderr) == (
        1,
        f"div: the server at {remote.url} has no {gone.name} of this token's user (deleted, or "
        "another server now answers there)\n",
    )
    kept = closed(kept.name)
    assert (kept.status, kept.exit_code) == ("succeeded", 0)
    assert len(steps_stored(kept)) in (4, 5)


def test_a_token_revoked_while_the_run_goes_on_keeps_the_run_for_div_sync(remote, tmp_path, div):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "10", "0.01", "wait")
    try:
        run = wait_for(points(2), 30, "two points")
        services.token_revoke(user=run.creator, name="token-1")
        go(gpu, run)
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert launched.returncode == 0
    assert err.decode() == (
        "div: the server does not know this token (revoked, or mistyped); make a new one with "
        "div token create on the server or on your account page, then div login; "
        f"{run.name} is kept here: div sync {run.name} uploads the rest\n"
    )
    refused = gpu("telemetry")
    assert (refused.returncode, refused.stderr.count("\n")) == (1, 1)
    assert refused.stderr.startswith("div: the server does not know this token")

    token = div("token", "create", "--user", "alice", "--name", "again").stdout.strip()
    synced = gpu("sync", DIVERGENT_TOKEN=token)
    assert (synced.returncode, synced.stderr) == (0, "")
    run = closed(run.name)
    assert (run.status, steps_stored(run)) == ("succeeded", list(range(1, 11)))


def test_a_client_killed_mid_upload_then_div_sync_sends_each_byte_once(remote, tmp_path):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "2000", "0.002")
    run = wait_for(points(100), 30, "100 points")
    launched.kill()  # SIGKILL, mid-upload; its command dies of the broken pipe
    launched.communicate(timeout=30)
    here = gpu.folder(run.name)
    command = pid_of(here)
    wait_for(lambda: not processes.alive_here(processes.this_host(), command), 30, "its end")
    written = (here / "telemetry.jsonl").read_text().count("\n")
    # As if it was killed between the server taking bytes and noting it had: all is sent
    # again, from the start and from inside a line, and the server keeps each byte once.
    state = json.loads((here / ".upload" / "state.json").read_text())
    state["sent"] = {"telemetry": 5, "log": 0}
    (here / ".upload" / "state.json").write_text(json.dumps(state))

    synced = gpu("sync")

    assert synced.returncode == 1
    assert synced.stderr == (
        f"div: {run.name}'s div run was stopped before its command ended: what it wrote is "
        "uploaded, and the server shows it as lost\n"
    )
    assert run.telemetry_path.read_bytes() == (here / "telemetry.jsonl").read_bytes()
    assert run.log_path.read_bytes() == (here / "log").read_bytes()
    wait_for(lambda: the_run(run.name).points == written, 30, f"{written} points")
    assert steps_stored(the_run(run.name)) == list(range(1, written + 1))
    again = gpu("sync")  # all it wrote is there, and it never ended: nothing more to do
    assert (again.returncode, again.stderr) == (0, "")


def test_a_silent_client_shows_as_lost_and_runs_again_once_heard_from(div, tmp_path):
    served = start(div, tmp_path, DIVERGENT_REMOTE_LOST_AFTER="2")
    folder = project(tmp_path, PACED)
    gpu, teammate = served.machine("alice"), served.machine("bob", name="laptop")
    launched = gpu.popen("run", str(folder), *RUN, "6", "0.01", "wait")
    try:
        run = wait_for(points(2), 30, "two points")
        launched.send_signal(signal.SIGSTOP)  # silent: no upload, no heartbeat
        wait_for(lambda: the_run(run.name).status == "lost", 30, "the run to be lost")
        listed = teammate("telemetry").stdout.splitlines()[1].split()
        assert listed[:3] == [run.name, "lost", "2"]
        launched.send_signal(signal.SIGCONT)
        wait_for(lambda: the_run(run.name).status == "running", 30, "the run to run again")
        assert teammate("telemetry").stdout.splitlines()[1].split()[:2] == [run.name, "running"]
        go(gpu, run)
        out, err = launched.communicate(timeout=60)
        assert (launched.returncode, err) == (0, b"")
        run = closed(run.name)
    finally:
        launched.send_signal(signal.SIGCONT)
        launched.kill()
        stop(served.server.process)

    assert (run.status, run.exit_code, steps_stored(run)) == ("succeeded", 0, list(range(1, 7)))
    lost = f"div: {run.name} was lost: its supervisor (pid {launched.pid} on "
    assert lost in run.log_path.read_text()


def test_a_detached_remote_run_is_uploaded_to_its_end_and_followed_from_another_machine(
    remote, tmp_path
):
    folder = project(tmp_path, PACED)
    gpu, laptop = remote.machine("alice"), remote.machine("bob", name="laptop")

    launched = gpu("run", str(folder), "--detach", *RUN, "10", "0.01", "wait")

    assert (launched.returncode, launched.stderr) == (0, "")
    name = launched.stdout.removesuffix("\n")
    assert launched.stdout == f"{Run.objects.get().name}\n"
    run = wait_for(points(2), 30, "two points")
    following = laptop.popen("telemetry", name, "loss", "-f")
    logging = laptop.popen("log", name, "-f")
    try:
        wait_for(lambda: following.stdout.readline() == b"step\tloss\n", 30, "the header")
        go(gpu, run)
        followed, said = following.communicate(timeout=60)
        log, _ = logging.communicate(timeout=60)
    finally:
        following.kill()
        logging.kill()

    run = closed(name)
    assert (run.status, run.exit_code, steps_stored(run)) == ("succeeded", 0, list(range(1, 11)))
    assert (following.returncode, said) == (0, b"")
    assert followed.decode().splitlines() == [f"{step}\t{1 / step}" for step in range(1, 11)]
    assert logging.returncode == 0 and log == run.log_path.read_bytes()
    assert log.decode().splitlines()[-1] == "line 10"


def test_ctrl_c_on_a_remote_div_run_stops_it_once_its_commands_end_is_sent(remote, tmp_path):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "5", "0.01", "wait")
    try:
        run = wait_for(points(2), 30, "two points")
        # To div run alone: its command, as one outside the terminal's group, goes on.
        launched.send_signal(signal.SIGINT)
        go(gpu, run)
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert (launched.returncode, err) == (130, b"\n")  # click's newline after a ^C, as locally
    run = closed(run.name)
    assert (run.status, run.exit_code, steps_stored(run)) == ("succeeded", 0, list(range(1, 6)))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_to_a_remote_div_run_stops_its_command_and_sends_how_it_ended(
    remote, tmp_path, signum
):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "5", "0.01", "wait")
    try:
        run = wait_for(points(2), 30, "two points")
        # To div run alone, as a scheduler stopping a job sends it: passed on, as locally.
        launched.send_signal(signum)
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert (launched.returncode, err) == (128 + signum, b"")
    run = closed(run.name)
    assert (run.status, run.exit_code) == ("failed", 128 + signum)
    assert steps_stored(run) == [1, 2]  # what it wrote before it was stopped, every line once


def test_uploads_to_a_server_of_another_home_are_refused_in_one_line_and_kept(remote, tmp_path):
    """Two homes on one database: the server that answers at the run's address now is not the
    one whose home holds the run's files. It says so, and div sync sends the rest to the one
    that does."""
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    launched = gpu.popen("run", str(folder), *RUN, "10", "0.01", "wait")
    other = {**remote.env, "DIVERGENT_HOME": str(tmp_path / "other-home")}
    (tmp_path / "other-home").mkdir()
    try:
        run = wait_for(points(2), 30, "two points")
        remote.kill()
        elsewhere = serve(other, tmp_path / "other.out", port=remote.server.port)
        go(gpu, run)
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()
    stop(elsewhere.process)

    assert launched.returncode == 0
    assert err.decode() == (
        f"div: {run.name}'s files are kept in another DIVERGENT_HOME than this server's: its "
        "uploads go to the div serve whose home holds them (every server that takes uploads "
        f"shares one home); {run.name} is kept here: div sync {run.name} uploads the rest\n"
    )
    assert "Traceback" not in elsewhere.said()
    remote.restart()
    synced = gpu("sync")
    assert (synced.returncode, synced.stderr) == (0, "")
    run = closed(run.name)
    assert (run.status, steps_stored(run)) == ("succeeded", list(range(1, 11)))


def another_server(div, tmp_path, next_run: int, port: int | None = None) -> tuple[Server, str]:
    """A div serve of its own database and home (on that port, if given), whose next run is
    run-<next_run>, and a token of alice's (in acme) there."""
    home = tmp_path / "server-c"
    home.mkdir()
    env = {**div.env, "DIVERGENT_HOME": str(home), "DATABASE_URL": f"sqlite:///{home}/db.sqlite3"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    server = Machine(home, env)
    assert server("user", "add", "alice", "--org", "acme").returncode == 0
    token = server("token", "create", "--user", "alice").stdout.strip()
    with sqlite3.connect(home / "db.sqlite3") as db:
        db.execute("DELETE FROM sqlite_sequence WHERE name = 'telemetry_run'")
        db.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('telemetry_run', ?)", (next_run - 1,)
        )
    return serve(env, tmp_path / "server-c.out", port=port), token


def test_a_run_of_another_server_with_the_same_name_keeps_the_first_ones_unsent_part(
    div, remote, tmp_path
):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    run = outlived(remote, gpu, folder, 10)

    number = int(run.name.removeprefix("run-"))
    other, token = another_server(div, tmp_path, next_run=number)
    try:
        there = {"DIVERGENT_URL": other.url, "DIVERGENT_TOKEN": token}
        made = gpu("run", str(folder), *RUN, "3", "0.01", **there)
        assert (made.returncode, made.stderr) == (0, "")
        assert made.stdout.splitlines()[0] == run.name  # the same name, on another server
        read = gpu("telemetry", run.name, "loss", **there)
        assert read.stdout == "step\tloss\n" + "".join(f"{s}\t{1 / s}\n" for s in (1, 2, 3))
        left = gpu("sync", **there)  # this server's runs are whole; the first one's is not
        assert (left.returncode, left.stderr) == (
            1,
            f"div: {run.name} was made on {remote.url}, not on {other.url}; div login "
            f"{remote.url} to upload it\n",
        )
    finally:
        stop(other.process)

    remote.restart()
    synced = gpu("sync", run.name)
    assert (synced.returncode, synced.stderr) == (0, "")
    run = closed(run.name)
    assert (run.status, run.exit_code, steps_stored(run)) == ("succeeded", 0, list(range(1, 11)))
    assert gpu("sync").returncode == 0  # nothing left of either


def test_a_server_whose_database_was_reset_making_the_same_run_again_sets_the_first_aside(
    div, remote, tmp_path
):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    run = outlived(remote, gpu, folder, 10)
    earlier = gpu.folder(run.name)
    written = (earlier / "telemetry.jsonl").read_bytes()

    number = int(run.name.removeprefix("run-"))
    reset, token = another_server(div, tmp_path, next_run=number, port=remote.server.port)
    try:
        made = gpu("run", str(folder), *RUN, "3", "0.01", DIVERGENT_TOKEN=token)
        synced = gpu("sync", DIVERGENT_TOKEN=token)
    finally:
        stop(reset.process)

    aside = earlier.with_name(f"{run.name}.earlier-1")
    assert (made.returncode, made.stdout.splitlines()[0]) == (0, run.name)
    assert made.stderr == (
        f"div: the server at {remote.url} made {run.name} again (its database since reset, or "
        f"another server answering there): what this machine had of the earlier {run.name}, "
        f"not all sent, is kept in {aside}\n"
    )
    assert (aside / "telemetry.jsonl").read_bytes() == written
    assert (earlier / "telemetry.jsonl").read_text().count("\n") == 3
    assert (synced.returncode, synced.stderr) == (0, "")  # what is set aside is never sent


def test_an_end_a_proxy_fails_once_is_sent_again_and_the_run_ends(remote, tmp_path):
    proxy = Proxy(remote.url, path="/end/")
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice", DIVERGENT_URL=proxy.url)
    try:
        done = gpu("run", str(folder), *RUN, "5", "0.01")
    finally:
        proxy.stop()

    name = done.stdout.splitlines()[0]
    assert (done.returncode, done.stderr) == (0, "")
    assert proxy.failed == [f"/api/runs/{name}/end/"]
    run = closed(name)
    assert (run.status, run.exit_code, steps_stored(run)) == ("succeeded", 0, [1, 2, 3, 4, 5])


def test_a_detached_runs_end_a_proxy_fails_once_is_sent_again_and_followed_to_it(remote, tmp_path):
    proxy = Proxy(remote.url, path="/end/")
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice", DIVERGENT_URL=proxy.url)
    laptop = remote.machine("bob", name="laptop")
    try:
        name = gpu("run", str(folder), "--detach", *RUN, "5", "0.01").stdout.strip()
        wait_for(points(5), 30, "its five points")
        # Well before the 2 minutes after which a silent run is lost: its end came.
        followed = laptop("telemetry", name, "loss", "-f", timeout=30)
        run = closed(name, timeout=30)
    finally:
        proxy.stop()

    assert (followed.returncode, followed.stderr) == (0, "")
    assert followed.stdout == "step\tloss\n" + "".join(f"{s}\t{1 / s}\n" for s in range(1, 6))
    assert proxy.failed == [f"/api/runs/{name}/end/"]
    assert (run.status, run.exit_code) == ("succeeded", 0)
    assert "is kept here" not in (gpu.folder(name) / "log").read_text()


def test_a_detached_run_refused_for_good_says_so_in_its_log_and_div_sync_sends_the_rest(
    remote, tmp_path, div
):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    name = gpu("run", str(folder), "--detach", *RUN, "10", "0.01", "wait").stdout.strip()
    run = wait_for(points(2), 30, "two points")
    services.token_revoke(user=run.creator, name="token-1")
    go(gpu, run)

    refused = (
        "div: the server does not know this token (revoked, or mistyped); make a new one with "
        "div token create on the server or on your account page, then div login"
    )
    kept = f"{refused}; {name} is kept here: div sync {name} uploads the rest\n"
    log = gpu.folder(name) / "log"
    wait_for(lambda: log.read_text().endswith(kept), 30, "the supervisor to give up, saying so")
    assert gpu("sync").stderr == refused + "\n"  # and div sync says so too, until a new token
    token = div("token", "create", "--user", "alice", "--name", "again").stdout.strip()
    synced = gpu("sync", DIVERGENT_TOKEN=token)
    assert (synced.returncode, synced.stderr) == (0, "")
    run = closed(name)
    assert (run.status, steps_stored(run)) == ("succeeded", list(range(1, 11)))
    assert run.log_path.read_text().endswith(kept)


def test_another_orgs_run_is_one_line_to_every_command_of_its_user(remote, tmp_path):
    folder = project(tmp_path, PACED)
    gpu = remote.machine("alice")
    run = kept_run(remote, gpu, folder, 3)  # on alice's machine, its end not sent yet
    eve = remote.machine("eve", name="eve")
    unknown = f'div: there is no run "{run.name}"; div telemetry lists the runs\n'

    for said, line in (
        (eve("telemetry", run.name), unknown),
        (eve("telemetry", run.name, "loss", "-f"), unknown),
        (eve("log", run.name), unknown),
        (eve("log", run.name, "-f"), unknown),
        (
            gpu("sync", run.name, DIVERGENT_TOKEN=remote.tokens["eve"]),  # her token, his machine
            f"div: the server at {remote.url} has no {run.name} of this token's user (deleted, "
            "or another server now answers there)\n",
        ),
    ):
        assert (said.returncode, said.stdout, said.stderr) == (1, "", line)
    assert eve("telemetry").stdout == "name  status  points  keys  created\n"

    synced = gpu("sync", run.name)  # nothing of it was touched: alice sends the rest
    assert (synced.returncode, synced.stderr) == (0, "")
    assert steps_stored(closed(run.name)) == [1, 2, 3]


def test_a_chunk_over_the_limit_sent_to_the_server_is_a_413_saying_what_to_do(remote):
    connection = http.client.HTTPConnection("127.0.0.1", remote.server.port, timeout=30)
    alice = {"Authorization": f"Bearer {remote.tokens['alice']}"}
    made = {"org": "acme", "command": ["true"], "layout": {}, "host": "gpu-7", "pid": 1}
    connection.request("POST", "/api/runs/", json.dumps(made), alice | JSON)
    name = json.loads(connection.getresponse().read())["name"]

    big = b"x" * (1024 * 1024 + 1)
    connection.request("POST", f"/api/runs/{name}/files/telemetry/?offset=0", big, alice | BYTES)
    answer = connection.getresponse()
    refused = (answer.status, answer.getheader("Divergent-API"), json.loads(answer.read()))
    connection.request("GET", f"/api/runs/{name}/files/", headers=alice)
    held = json.loads(connection.getresponse().read())
    connection.close()

    assert refused == (
        413,
        "1",
        {
            "error": "a chunk is at most 1,048,576 bytes and this one is 1,048,577; send the file "
            "in smaller pieces, each naming the offset it starts at",
            "limit": 1048576,
        },
    )
    assert held == {"telemetry": 0, "log": 0}


JSON = {"Content-Type": "application/json"}
BYTES = {"Content-Type": "application/octet-stream"}

# Two lines, then (once a file named go is there) 2 MB of lines too long to keep, then it waits
# for a file named end: the server can be away while the 2 MB are written, and back before the
# command ends.
CATCH_UP = """\
import json, os, time
def wait(name):
    deadline = time.monotonic() + 60
    while not os.path.exists(name) and time.monotonic() < deadline:
        time.sleep(0.02)
with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
    f.write(json.dumps({"step": 1}) + "\\n" + json.dumps({"step": 2}) + "\\n")
    f.flush()
    wait("go")
    f.write((json.dumps({"step": 3, "pad": "x" * 5000}) + "\\n") * 400)
    f.flush()
    wait("end")
"""


@pytest.mark.parametrize("stderr", ["a terminal", "a pipe"])
def test_div_run_catching_up_after_an_outage_shows_progress_on_a_terminal_alone(
    remote, tmp_path, stderr
):
    folder = project(tmp_path, CATCH_UP)
    gpu = remote.machine("alice")
    main, terminal = pty.openpty() if stderr == "a terminal" else os.pipe()
    said = bytearray()
    reading = threading.Thread(target=read_all, args=(main, said))
    launched = gpu.popen("run", str(folder), *RUN, stderr=terminal)
    os.close(terminal)
    reading.start()
    try:
        run = wait_for(points(2), 30, "two points")
        here = gpu.folder(run.name)
        remote.kill()
        go(gpu, run)
        wait_for(lambda: (here / "telemetry.jsonl").stat().st_size > 2_000_000, 30, "2 MB")
        remote.restart()
        size = (here / "telemetry.jsonl").stat().st_size
        wait_for(lambda: run.telemetry_path.stat().st_size == size, 60, "the 2 MB sent")
        (here / "files" / "end").touch()
        launched.communicate(timeout=60)
    finally:
        launched.kill()
        reading.join(timeout=10)
        os.close(main)

    assert launched.returncode == 0
    if stderr == "a pipe":
        assert bytes(said) == b""
    else:  # redrawn on its line, then wiped once caught up
        size = r"[0-9.]+ (?:bytes|kB|MB|GB)"
        drawn = rf"\rdiv: {run.name}: {size} of {size} sent, {size}/s\x1b\[K"
        assert re.fullmatch(rf"(?:{drawn})+\r\x1b\[K", said.decode()), said
        assert " of 2 MB sent, " in said.decode()


def read_all(fd: int, into: bytearray) -> None:
    """Everything written to the other end, until it is closed."""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # a pty's other end closed
            return
        if not data:
            return
        into += data
