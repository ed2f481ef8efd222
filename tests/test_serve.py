"""`div serve` as scripts and people meet it: what it prints, once it can be reached, and the
addresses its login links name."""

from __future__ import annotations

import http.cookiejar
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from telemetry.models import Run
from tests.conftest import ROOT, wait_for

LINK = re.compile(r"http://\S+/login/\S+/\S+/")


class Served:
    """A `div serve` process, its output read a line at a time as a script would."""

    def __init__(self, env: dict, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "divergent", "serve", *args],
            env={**env, "PYTHONUNBUFFERED": "1"},
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []

    def until(self, start: str) -> str:
        """Read lines until one starts with `start`; that line. The rest is read as it comes,
        so the server never waits on a full pipe."""
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith(start):
                threading.Thread(target=self.lines.extend, args=(self.process.stdout,)).start()
                return line
        raise AssertionError(f"div serve ended without a {start!r} line:\n{''.join(self.lines)}")

    def stop(self) -> None:
        """SIGTERM, as Ctrl-C or a service manager stops it; it must stop on its own."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"div serve did not stop on SIGTERM:\n{''.join(self.lines)}"
            ) from None


@pytest.fixture
def serving(div):
    started: list[Served] = []

    def start(*args: str, env: dict | None = None) -> Served:
        served = Served(env or div.env, *args)
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            served.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_serving_line_comes_once_the_port_accepts_connections(serving):
    port = free_port()
    served = serving("--port", str(port))

    line = served.until("Serving ")

    assert line == f"Serving http://127.0.0.1:{port}/ (Ctrl-C stops)\n"
    # At once, no retry: a script that waits for the line connects on the next line.
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_port_0_serves_on_a_free_port_and_says_which(serving):
    served = serving("--port", "0")

    port = int(
        re.fullmatch(
            r"Serving http://127\.0\.0\.1:(\d+)/ \(Ctrl-C stops\)\n", served.until("Serving ")
        )[1]
    )

    assert port != 0
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_the_first_login_link_and_div_user_link_name_the_address_served(serving, div):
    port = free_port()
    served = serving("--port", str(port))
    served.until("Serving ")
    first = LINK.search("".join(served.lines))[0]

    linked = div("user", "link", "admin")

    assert first.startswith(f"http://127.0.0.1:{port}/login/")
    assert linked.returncode == 0, linked.stderr
    assert linked.stdout.startswith(f"http://127.0.0.1:{port}/login/")
    assert div("user", "add", "alice").stdout.startswith(f"http://127.0.0.1:{port}/login/")


def test_with_divergent_url_the_links_name_the_public_address(serving, div):
    port = free_port()
    served = serving(
        "--port", str(port), env={**div.env, "DIVERGENT_URL": "https://div.example.com"}
    )
    assert served.until("Serving ") == f"Serving http://127.0.0.1:{port}/ (Ctrl-C stops)\n"

    assert "  https://div.example.com/login/" in "".join(served.lines)


def test_a_taken_port_is_one_line(serving):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        served = serving("--port", str(taken.getsockname()[1]))

        assert served.process.wait(timeout=30) == 1
    said = served.process.stdout.read()
    assert said.startswith("div: cannot serve on 127.0.0.1:") and said.count("\n") == 1
    assert "pick another --port" in said


def test_without_secret_key_a_key_is_made_once_and_sessions_survive_a_restart(serving, div):
    env = {k: v for k, v in div.env.items() if k != "SECRET_KEY"}
    home = Path(env["DIVERGENT_HOME"])
    port = free_port()
    served = serving("--port", str(port), env=env)
    served.until("Serving ")
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    browser.open(LINK.search("".join(served.lines))[0], timeout=10)
    key = (home / "secret_key").read_text()

    served.stop()
    again = serving("--port", str(port), env=env)
    again.until("Serving ")
    runs = browser.open(f"http://127.0.0.1:{port}/api/runs/", timeout=10)

    assert runs.status == 200
    assert (home / "secret_key").stat().st_mode & 0o777 == 0o600
    assert (home / "secret_key").read_text() == key and len(key.strip()) >= 50
    assert key.strip() not in (ROOT / "divergent" / "settings.py").read_text()


def test_the_demo_run_is_launched_as_div_run_launches_one_and_ends_with_the_server(serving):
    port = free_port()
    served = serving("--port", str(port), "--demo")
    served.until("Serving ")

    demo = Run.objects.get()
    said = "".join(served.lines)
    assert f"Demo run {demo.name} is streaming: http://127.0.0.1:{port}/runs/{demo.name}/" in said
    assert demo.layout.origin == str(ROOT / "demo" / "telemetry.toml")
    assert (demo.files_path / "train.py").exists()
    # Stopped once the demo's command runs: a stop before its supervisor has started the
    # command is the supervisor's own business (runner.forward).
    wait_for(lambda: "training" in demo.log_path.read_text(), 30, "the demo's command to start")
    served.stop()
    wait_for(lambda: not Run.objects.get().is_live, 30, "the demo run to end with the server")
    assert os.path.exists(demo.log_path)
    assert "Traceback" not in "".join(served.lines)
