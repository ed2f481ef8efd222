"""What the real-browser tests stand on: Debian's Chromium driven by Playwright, `div serve` in a
process of its own on the test's database, and a run launched by `div run` with the spec's
example telemetry.toml, its script writing lines as a training script does.

test_browser.py imports the fixtures it uses by name.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from telemetry import services
from telemetry.models import Run
from tests.conftest import ROOT, wait_for
from tests.examples import SPEC_EXAMPLE

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "test-artifacts"
VIEWPORT = {"width": 1280, "height": 900}  # wide enough for the two-column grid

LAYOUT = SPEC_EXAMPLE

# What train.py writes before it waits: 50 steps of loss, an eval every 10th, and two lines
# without "step" (they carry a loss, so only the missing x can keep them off the Loss panel).
# eval_leak_recall is never written.
STEPS = [10 * i for i in range(1, 51)]
EVAL_STEPS = [s for s in STEPS if s % 100 == 0]
SAMPLES_PER_SECOND = [140.5, 152.75, 149.0, 155.5, 147.25]  # the last is neither min nor max
STRICT_F1 = [0.91, 0.93, 0.945, 0.955, 0.962]
TYPED_F1 = [0.92, 0.94, 0.952, 0.96, 0.968]
STEPLESS_AFTER = {150: {"loss": 0.321, "epoch": 1}, 350: {"loss": 0.123, "epoch": 2}}


def loss_at(step: int) -> float:
    return round(2.5 * 0.99**step + 0.05, 6)


def lines_written() -> list[dict]:
    lines = []
    for step in STEPS:
        line = {"step": step, "loss": loss_at(step), "lr": 3e-4}
        if step in EVAL_STEPS:
            i = EVAL_STEPS.index(step)
            line |= {
                "eval_loss": round(loss_at(step) * 1.1, 6),
                "eval_strict_f1": STRICT_F1[i],
                "eval_typed_f1": TYPED_F1[i],
                "eval_samples_per_second": SAMPLES_PER_SECOND[i],
            }
        lines.append(line)
        if step in STEPLESS_AFTER:
            lines.append(STEPLESS_AFTER[step])
    return lines


TRAIN = textwrap.dedent(
    """\
    import json, os, sys, time

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
        for line in json.load(open(os.path.join(here, "lines.json"))):
            f.write(json.dumps(line) + "\\n")
            f.flush()
    print("wrote the lines; waiting for a file named stop", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(here, "stop")):
        if time.monotonic() > deadline:
            print("no stop file in 120 s", flush=True)
            sys.exit(2)
        time.sleep(0.05)
    print("done", flush=True)
    """
)


# ---- Chromium and Playwright ------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, installed with apt-get when this machine has none (CI starts without)."""
    if not CHROMIUM.exists():
        sudo = [] if os.geteuid() == 0 or not shutil.which("sudo") else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            done = subprocess.run([*sudo, *command], env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr[-3000:]}"
    assert CHROMIUM.exists(), f"apt-get installed chromium, but there is no {CHROMIUM}"
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium):
    """One Chromium for the module. Module-scoped, not session: Playwright's sync API keeps an
    event loop running on this thread, which would trip later modules' ORM and asyncio tests."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        chrome = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        yield chrome
        chrome.close()
    finally:
        playwright.stop()


@pytest.fixture(autouse=True)
def orm_beside_playwright(monkeypatch):
    """Playwright's sync API leaves an event loop running on the test's thread, and Django then
    refuses ORM calls as if they were made from async code. They are not: allow them, for this
    module's tests only (the server and the runs, in processes of their own, do not get it)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# ---- the server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    output: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def said(self) -> str:
        return self.output.read_text(errors="replace")


def stop(process: subprocess.Popen) -> bool:
    """SIGTERM, then SIGKILL if it is still there after 5 s; whether it took the SIGKILL."""
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=5)
        return False
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
        return True


def serve(env: dict, output: Path, *, deadline: float = 30, port: int | None = None) -> Server:
    """`div serve` on a free port (or the one given), once it says it serves. A port taken between
    finding it free and the server listening on it gets another."""
    for _ in range(3):
        port = port or free_port()
        with open(output, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "divergent", "serve", "--port", str(port)],
                env=env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        served = Server(port, process, output)
        until = time.monotonic() + deadline
        # The serving line comes once the port listens, after whatever start-up prints.
        while process.poll() is None and not ("Serving http" in served.said() and answers(port)):
            if time.monotonic() > until:
                stop(process)
                raise AssertionError(f"div serve never answered in {deadline} s:\n{served.said()}")
            time.sleep(0.05)
        if process.poll() is None:
            return served
        if "Address already in use" not in served.said():
            raise AssertionError(f"div serve exited with {process.returncode}:\n{served.said()}")
        port = None
    raise AssertionError(f"div serve found no free port in 3 tries:\n{served.said()}")


@pytest.fixture
def alice(div):
    """Made before the server starts, so the server makes no user and prints no link."""
    return services.user_create(username="alice", orgs=[services.DEFAULT_ORG])


@pytest.fixture
def server(div, alice, tmp_path):
    """`div serve` (daphne and the ingester) on a free port, on the test's database and home."""
    div.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # div copied it from os.environ; not theirs
    served = serve(div.env, tmp_path / "serve.out")
    try:
        yield served
    finally:
        if stop(served.process):
            warnings.warn("div serve did not stop within 5 s of SIGTERM: killed", stacklevel=1)
    assert "Log in, once" not in served.said(), "the server made a user though alice existed"


# ---- a run launched with the spec's layout ----------------------------------------------------


@dataclass
class LaunchedRun:
    run: Run
    stop_file: Path
    written: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.run.name

    def write(self, *lines: dict) -> float:
        """Append lines to the run's telemetry file as the script would; returns when (epoch s)."""
        with open(self.run.telemetry_path, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
            f.flush()
            at = time.time()
        self.written.extend(lines)
        return at

    def stored(self) -> int:
        self.run.refresh_from_db()
        return self.run.points

    def finish(self) -> None:
        """Let the script end; wait for the run to be recorded as ended."""
        self.stop_file.touch()
        wait_for(lambda: not Run.objects.get(pk=self.run.pk).is_live, 30, "the run to end")
        self.run.refresh_from_db()


@pytest.fixture
def spec_run(div, server, tmp_path):
    """A run of a script that writes lines_written() and then waits for a file named stop in its
    folder, launched by `div run --detach` from a directory holding the spec's example
    telemetry.toml.

    Launched after the server is up, so the server's ingester (not the run's own) stores the
    lines and tells the open tabs. Returns once every line is stored."""
    yield from launch(div, tmp_path, lines_written(), LAYOUT)


@pytest.fixture
def default_run(div, server, tmp_path):
    """Like spec_run, with no telemetry.toml: the default layout, two keys written so far."""
    lines = [{"step": step, "loss": loss_at(step)} for step in (10, 20, 30)]
    yield from launch(div, tmp_path, lines, layout=None)


def launch(div, tmp_path: Path, lines: list[dict], layout: str | None):
    """`div run --detach` of the waiting script, from a project with that layout (or none)."""
    project = tmp_path / "project"
    project.mkdir()
    if layout is not None:
        (project / "telemetry.toml").write_text(layout)
    (project / "train.py").write_text(TRAIN)
    (project / "lines.json").write_text(json.dumps(lines))

    launched = div("run", str(project), "--detach", "--", sys.executable, "train.py")
    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get(pk=int(launched.stdout.split()[0].removeprefix("run-")))
    the_run = LaunchedRun(run, run.files_path / "stop", list(lines))
    try:
        wait_for(lambda: the_run.stored() == len(lines), 30, f"{len(lines)} points stored")
        yield the_run
    finally:
        # The script ends, and with it the detached supervisor, before the database is flushed.
        the_run.finish()


# ---- the tab in the browser -------------------------------------------------------------------


def log_in(browser, server: Server, user, **context):
    """A fresh browser context (Playwright's new_context options) logged in as user with a
    one-time link; returns its page."""
    context = browser.new_context(**{"viewport": VIEWPORT, **context})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(services.login_link(user=user, base=server.url))
    assert page.url.rstrip("/") == server.url, f"the login link led to {page.url}"
    return page


@pytest.fixture
def tab(browser, server, spec_run, alice):
    """Alice's page on the run, its Telemetry tab drawn: the three panels there, each drawn by
    Plotly (the tab sets data-points on a panel when it draws it), the Loss panel holding every
    point that has a step."""
    page = log_in(browser, server, alice)
    try:
        response = page.goto(f"{server.url}/runs/{spec_run.name}/")
        assert response.status == 200
        page.wait_for_function(
            """(n) => {
                const p = [...document.querySelectorAll("section.panel[data-title]")];
                const drawn = p.every((s) => s.dataset.points !== undefined
                                             && s.querySelector(".plot").layout);
                const loss = document.querySelector("section.panel[data-title='Loss'] .plot");
                return p.length === 3 && drawn && loss.data.length && loss.data[0].x.length >= n;
            }""",
            arg=len(STEPS),
        )
        yield page
    finally:
        page.context.close()


PLOT = """(title) => {
    const panel = document.querySelector(`section.panel[data-title='${title}']`);
    const d = panel.querySelector(".plot");
    return {
        data: (d.data || []).map((t) => ({name: t.name, x: Array.from(t.x || []),
                                           y: Array.from(t.y || [])})),
        layout: {yaxis: d.layout ? d.layout.yaxis : null,
                 shapes: d.layout ? d.layout.shapes || [] : []},
    };
}"""


def plot(page, title: str) -> dict:
    """What Plotly holds for a panel: its traces' names, xs and ys, its y axis and shapes."""
    return page.evaluate(PLOT, title)


def trace(page, title: str, name: str) -> dict:
    traces = [t for t in plot(page, title)["data"] if t["name"] == name]
    assert len(traces) == 1, f"{title} has {len(traces)} traces named {name}"
    return traces[0]


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path
