"""What the remote `div` tests stand on: a real `div serve` on a free port (tests/browser.py's
serve()), the personas with API tokens, and `div` run as a GPU machine runs it: a process of its
own with its own DIVERGENT_HOME, a token, and a DATABASE_URL where nothing listens, so any
command that touched a database would fail.

The test modules import the fixtures they use by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model

from telemetry import services
from telemetry.models import Run
from tests.browser import Server, free_port, serve, stop
from tests.conftest import ROOT, wait_for

# Writes a log (a secret in it, colours, bytes that are not UTF-8), waits, then telemetry: a NaN,
# a line that is not JSON, a point without step, nested keys; exits 3. The wait keeps the
# ingester's note about the dropped line after the whole log, whichever way the run is made.
TRAIN = textwrap.dedent(
    """\
    import json, os, sys, time
    print("starting with", os.environ.get("HF_TOKEN"), flush=True)
    print("\\x1b[32mgreen\\x1b[0m and a progress bar\\r50%\\r100%", flush=True)
    sys.stdout.buffer.write(b"raw \\xff\\xfe bytes\\n")
    sys.stdout.flush()
    time.sleep(0.5)
    with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
        for step in range(1, 101):
            line = {"step": step, "loss": 1 / step, "acc": float("nan") if step == 5 else step}
            if step % 10 == 0:
                line["eval"] = {"loss": 2 / step}
            f.write(json.dumps(line) + "\\n")
            if step == 50:
                f.write("not json\\n")
                f.write(json.dumps({"epoch": 1, "loss": 0.5}) + "\\n")
    sys.exit(3)
    """
)
SECRET = "hf_remote_secret_value"

# Writes `step` lines one at a time (every `pause` s), each after a file named go appears when
# `wait` is set; its pid in a file, so a test can stop it.
PACED = textwrap.dedent(
    """\
    import json, os, sys, time
    open("pid", "w").write(str(os.getpid()))
    steps, pause = int(sys.argv[1]), float(sys.argv[2])
    wait = len(sys.argv) > 3
    with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
        for step in range(1, steps + 1):
            if wait and step == 3:
                print("waiting for go", flush=True)
                deadline = time.monotonic() + 60
                while not os.path.exists("go") and time.monotonic() < deadline:
                    time.sleep(0.02)
            f.write(json.dumps({"step": step, "loss": 1 / step}) + "\\n")
            f.flush()
            print(f"line {step}", flush=True)
            time.sleep(pause)
    """
)


def nowhere() -> str:
    """A database address where nothing listens: a client that tried it would fail at once."""
    return f"postgres://div@127.0.0.1:{free_port()}/nowhere"


@dataclass
class Machine:
    """A GPU machine: its own DIVERGENT_HOME, a token, the server's address, no database."""

    home: Path
    env: dict

    def __call__(self, *args: str, input: str | None = None, timeout: float = 60, **env):
        return subprocess.run(
            [sys.executable, "-m", "divergent", *args],
            input=input,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            cwd=ROOT,
            timeout=timeout,
        )

    def folder(self, run: str, url: str | None = None) -> Path:
        """Where this machine keeps a run it made on the server at url (its DIVERGENT_URL by
        default): a folder a server, runs/http-127.0.0.1-8000/run-7/."""
        parts = urlsplit(url or self.env["DIVERGENT_URL"])
        return self.home / "runs" / f"{parts.scheme}-{parts.hostname}-{parts.port}" / run

    def raw(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """The same, stdout and stderr as bytes."""
        return subprocess.run(
            [sys.executable, "-m", "divergent", *args],
            capture_output=True,
            env=self.env,
            cwd=ROOT,
            timeout=timeout,
        )

    def popen(self, *args: str, stderr=subprocess.PIPE, **env) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "divergent", *args],
            env={**self.env, **env},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


@dataclass
class Remote:
    """A real `div serve`, and a token of each persona's: alice and bob in acme, eve in other."""

    server: Server
    output: Path
    env: dict
    tokens: dict[str, str]
    tmp: Path

    @property
    def url(self) -> str:
        return self.server.url

    def machine(self, who: str = "alice", name: str = "gpu", **env) -> Machine:
        home = self.tmp / name
        home.mkdir(exist_ok=True)
        machine_env = {
            **self.env,
            "DIVERGENT_HOME": str(home),
            "DATABASE_URL": nowhere(),
            "DIVERGENT_URL": self.url,
            "DIVERGENT_TOKEN": self.tokens[who],
            "XDG_CONFIG_HOME": str(home / "config"),
        }
        # Nothing of the server's own: no key that could open its secrets, sessions or database.
        for name in ("SECRET_KEY", "DIVERGENT_SECRETS_KEY", "REDIS_URL"):
            machine_env.pop(name, None)
        machine_env.update(env)
        return Machine(home, machine_env)

    def restart(self) -> None:
        """The server killed with SIGKILL if it still runs, then started on the same port."""
        if self.server.process.poll() is None:
            self.server.process.kill()
            self.server.process.wait(timeout=10)
        self.server = serve(self.env, self.output, port=self.server.port)

    def kill(self) -> None:
        self.server.process.kill()
        self.server.process.wait(timeout=10)


def start(div, tmp_path: Path, **server_env) -> Remote:
    """The personas with tokens, then `div serve` on the test's database and home."""
    for who, org in (("alice", "acme"), ("bob", "acme"), ("eve", "other")):
        services.user_create(username=who, orgs=[org])
    tokens = {
        user.username: services.token_create(user=user)[1]
        for user in get_user_model().objects.all()
    }
    env = {**div.env, **server_env}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    output = tmp_path / "serve.out"
    return Remote(serve(env, output), output, env, tokens, tmp_path)


@pytest.fixture
def remote(div, tmp_path):
    """A server with alice, bob and eve, each with a token; stopped at the end."""
    served = start(div, tmp_path)
    try:
        yield served
    finally:
        stop(served.server.process)
    assert "Traceback" not in served.server.said()


def project(tmp_path: Path, script: str = TRAIN, layout: str | None = None) -> Path:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    (folder / "train.py").write_text(script)
    if layout is not None:
        (folder / "telemetry.toml").write_text(layout)
    return folder


def the_run(name: str) -> Run:
    return Run.objects.get(pk=int(name.removeprefix("run-")))


def closed(name: str, timeout: float = 60) -> Run:
    """The run, once it has ended and its telemetry is all stored."""
    return wait_for(
        lambda: (run := the_run(name)).telemetry_closed and not run.is_live and run,
        timeout,
        f"{name} to end and its telemetry to close",
    )


def pid_of(run_folder: Path) -> int | None:
    try:
        return int((run_folder / "files" / "pid").read_text())
    except (OSError, ValueError):
        return None


def kill_command(run_folder: Path) -> None:
    pid = pid_of(run_folder)
    if pid is not None:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
