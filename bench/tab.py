"""The Telemetry tab's figures on a 200,000-point run: server read cost, bytes sent, time to draw.

    python bench/tab.py [--points 200000] [--repeat 7] [--loads 5]

Prints progress on stderr and a summary table on stdout, and writes the table with every sample
to bench/out/tab.json. Targets from issue 3 ("Large runs"); bench/README.md says how each figure
is made.

Django is set up in this process, on a fresh DIVERGENT_HOME in a temporary directory: it builds
and ingests the run and times the series API with Django's test client. `div serve` then runs as
a child on the same home, and headless Chromium (Playwright) opens the run's tab. latency.py
imports the server and browser helpers from here.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    MB,
    ROOT,
    Row,
    command_line,
    django_env,
    interleaved,
    median,
    progress,
    scratch,
    spread,
    table,
    write_json,
)

DB_NAME = "divergent.sqlite3"  # settings.py: DIVERGENT_HOME / "divergent.sqlite3"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Targets, from issue 3 ("Large runs"). Its series target was 1.2x the bare read of the key's
# points; a first view reads an overview's buckets now (issue 9), whose bare read takes well
# under a millisecond, so the figure is held to the time a tab's four panels get (reads.py).
SERIES_MAX_SECONDS = 0.025
DATA_MAX_BYTES = 1 * MB
FIRST_PANEL_MAX_S = 1.5

# The four panels the issue names: three keys, and loss again on a log scale.
LAYOUT = """\
x = "step"

[[panel]]
title = "Loss"
y = "loss"

[[panel]]
title = "Learning rate"
y = "lr"

[[panel]]
title = "Gradient norm"
y = "grad_norm"

[[panel]]
title = "Loss (log)"
y = "loss"
scale = "log"
"""
PANELS = 4

# Runs in the page before its own scripts. It records, on each animation frame, when each
# panel first has points on screen (performance.now(): ms since navigation start), and wraps
# Plotly.react as Plotly.js defines it, to tell the drawing's own time from the waiting.
PAGE_HOOK = """
(() => {
  const bench = (window.__bench = { drawn: {}, reacts: [], frames: [] });
  let plotly;
  Object.defineProperty(window, "Plotly", {
    configurable: true,
    enumerable: true,
    get() { return plotly; },
    set(value) {
      plotly = value;
      const react = value && value.react;
      if (typeof react !== "function") return;
      value.react = function (gd, ...rest) {
        const start = performance.now();
        const out = react.call(this, gd, ...rest);
        const panel = gd.closest && gd.closest("section.panel");
        bench.reacts.push({ start, end: performance.now(), title: panel && panel.dataset.title });
        return out;
      };
    },
  });
  function poll() {
    document.querySelectorAll("section.panel .plot").forEach((plot, i) => {
      if (i in bench.drawn) return;
      const points = plot.data && plot.data.some((t) => t.x && t.x.length);
      if (points && plot.querySelector(".main-svg")) bench.drawn[i] = performance.now();
    });
    requestAnimationFrame(poll);
  }
  requestAnimationFrame(poll);
})();
"""


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated between the closest ranks."""
    ordered = sorted(samples)
    at = (len(ordered) - 1) * q / 100
    low, high = math.floor(at), math.ceil(at)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


# --- Django in this process -------------------------------------------------------------------


def setup_django(home: Path) -> None:
    """Django on HOME, migrated. Settings read DIVERGENT_HOME once, so this comes first."""
    os.environ.update(django_env(home))
    home.mkdir(parents=True, exist_ok=True)  # SQLite makes its file, not its folder
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def write_run_file(path: Path, points: int, *, seed: int = 0) -> int:
    """step, loss, lr, grad_norm on each line, written with json.dumps as a training script
    would (long float reprs); loss stays above 0 for the log panel. Returns the bytes."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for step in range(1, points + 1):
            line = {
                "step": step,
                "loss": 2.5 * math.exp(-step / (points / 4)) + 0.3 + abs(rng.gauss(0, 0.05)),
                "lr": 3e-4 * 0.5 * (1 + math.cos(math.pi * step / points)),
                "grad_norm": abs(rng.gauss(1.0, 0.3)),
            }
            f.write(json.dumps(line) + "\n")
    return path.stat().st_size


def build_run(points: int) -> tuple[Any, Any, int]:
    """A user, and an ended, ingested run of POINTS points with the four-panel layout.

    Returns (user, run, file bytes). The user is made here, so `div serve` prints no login
    link: the benchmark makes its own with services.login_link, as `div user add` does.
    """
    from telemetry import services

    user = services.user_create(username="bench", orgs=[services.DEFAULT_ORG])
    run = services.run_create(
        org=services.org_get_or_create(), command=["python", "train.py"], layout_source=LAYOUT
    )
    size = write_run_file(run.telemetry_path, points)
    progress(f"wrote {run.name}'s telemetry.jsonl: {points:,} lines, {size / MB:.1f} MB")
    services.run_finish(run=run, exit_code=0)
    ingest_ended(run, points)
    return user, run, size


def ingest_ended(run: Any, points: int | None = None) -> None:
    """Read an ended run's telemetry to its end, as `div ingest` would, in this process."""
    from telemetry.ingest import Ingester

    started = time.perf_counter()
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    run.refresh_from_db()
    if (points is not None and run.points != points) or not run.telemetry_closed:
        raise RuntimeError(f"{run.name} has {run.points} points, closed={run.telemetry_closed}")
    seconds = time.perf_counter() - started
    progress(f"ingested {run.name}'s {run.points:,} points in {seconds:.1f} s")


# --- figure 1: the series API against a bare SQLite read -------------------------------------


# What a panel's first view reads: the buckets of loss (key 2) against step (key 1), with
# nothing in the way. (Before overviews, the floor was reading the points: see bench/README.md.)
FLOOR_SQL = (
    "SELECT p.buckets FROM telemetry_overviewpart p JOIN telemetry_overview o"
    " ON o.id = p.overview_id WHERE o.run_id = ? AND o.y_no = 2 AND o.x_no = 1 ORDER BY p.part"
)


def series_client(user: Any) -> Any:
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def get_json(client: Any, url: str) -> bytes:
    """The body of a GET that must answer 200."""
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code} {response.content[:300]!r}")
    return response.content


def bench_series_api(user: Any, run: Any, points: int, repeat: int, raw: dict) -> tuple[Row, int]:
    """Median of REPEAT rounds each, in turns: the API, the floor, and the API's stages one by
    one (so the stages share the machine's noise with the figure they explain). Returns the row
    and the response's bytes."""
    client = series_client(user)
    url = f"/api/runs/{run.name}/series/?y=loss&x=step"
    floor_db = sqlite3.connect(Path(os.environ["DIVERGENT_HOME"]) / DB_NAME)
    body: dict[str, bytes] = {}
    stages: dict[str, list[float]] = {}
    read: dict[str, int] = {}

    def api() -> float:
        start = time.perf_counter()
        body["api"] = get_json(client, url)
        return time.perf_counter() - start

    def floor() -> float:
        start = time.perf_counter()
        values = [array("d", blob).tolist() for (blob,) in floor_db.execute(FLOOR_SQL, (run.pk,))]
        seconds = time.perf_counter() - start
        read["buckets"] = sum(map(len, values)) // 12
        return seconds

    def staged() -> float:
        for stage, seconds in series_stages(run).items():
            stages.setdefault(stage, []).append(seconds)
        return 0.0

    progress(f"series API: {repeat} rounds of GET {url} and of the bare SQLite read, in turns")
    api_s, floor_s, _ = interleaved(repeat, api, floor, staged)
    floor_db.close()
    series = json.loads(body["api"])["series"][0]
    raw["series_api"] = {
        "url": url,
        "api_seconds": api_s,
        "floor_seconds": floor_s,
        "response_bytes": len(body["api"]),
        "drawn": series["drawn"],
        "total": series["total"],
        # The warm-up round's stages are left out, as interleaved() leaves out its figures.
        "stage_seconds": {stage: samples[1:] for stage, samples in stages.items()},
        "stages": {stage: median(samples[1:]) for stage, samples in stages.items()},
    }
    ratio = median(api_s) / median(floor_s)
    if median(api_s) >= SERIES_MAX_SECONDS:
        raw["series_api"]["profile"] = profile_series(client, url)
    progress(f"  api {median(api_s):.3f} s, floor {median(floor_s):.3f} s: {ratio:.2f}x")
    row = Row(
        f"series API, 1 key of {points:,} (?y=loss&x=step)",
        f"{median(api_s):.3f} s ({spread(api_s)}), {len(body['api']) / 1000:.0f} kB",
        f"{median(floor_s):.4f} s ({spread(floor_s)}) sqlite3: its {read['buckets']:,} buckets",
        ratio,
        f"< {SERIES_MAX_SECONDS * 1000:.0f} ms",
        median(api_s) < SERIES_MAX_SECONDS,
    )
    return row, len(body["api"])


def series_stages(run: Any) -> dict[str, float]:
    """Where the API's time goes, stage by stage, without a profiler's overhead: reading the
    pair's overview (queries.overview), drawing it at 2,000 buckets (Overview.view), the JSON
    encoding (DRF's JSONRenderer). Seconds."""
    from django.db import connection
    from rest_framework.renderers import JSONRenderer

    from telemetry import downsample, queries

    times: dict[str, float] = {}
    start = time.perf_counter()
    summary = queries.overview(run.pk, "loss", "step", upto=run.points)
    times["queries.overview"] = time.perf_counter() - start
    start = time.perf_counter()
    if summary.serves(downsample.BUCKETS):
        dx, dy, _ = summary.view(downsample.BUCKETS, gap=summary.gap())
        times["Overview.view"] = time.perf_counter() - start
    else:  # under 64,000 points a series is drawn from its points (docs/storage.md)
        xs, ys = queries.series(run.pk, "loss", "step", upto=run.points)
        dx, dy = downsample.min_max(xs, ys, downsample.BUCKETS)
        times["queries.series and min_max"] = time.perf_counter() - start
    payload = {"x": "step", "last": run.points, "series": [{"key": "loss", "x": dx, "y": dy}]}
    start = time.perf_counter()
    JSONRenderer().render(payload)
    times["render"] = time.perf_counter() - start
    connection.close()  # as each request does (CONN_MAX_AGE = 0)
    return times


def panel_urls(run: Any) -> list[str]:
    """The series requests the tab made on opening before it asked for its panels in one: one
    a panel, as tab.js's seriesUrl() still makes them for a panel read alone."""
    from telemetry.layout import panels_for

    urls = []
    for panel in panels_for(run.layout.parsed, ["step", "loss", "lr", "grad_norm"]):
        query = "&".join(f"y={y}" for y in panel["y"])
        urls.append(f"/api/runs/{run.name}/series/?{query}&x={panel['x']}")
    return urls


def requests_done(user: Any, urls: Sequence[str], *, at_once: bool) -> list[float]:
    """Seconds from the start until each request is answered, in the order they finish.

    The tab once sent its panels' requests together; Django's ASGI handler serves each in a
    thread of its own, and those threads share one GIL, so the first panel waited about as
    long as all of them. Threads with the test client stand in for daphne's: the same Python,
    the same GIL."""
    done: list[float] = []
    start = time.perf_counter()

    def get(url: str) -> None:
        get_json(series_client(user), url)
        done.append(time.perf_counter() - start)

    if not at_once:
        for url in urls:
            get(url)
        return done
    threads = [threading.Thread(target=get, args=(url,)) for url in urls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(done) != len(urls):
        raise RuntimeError(f"{len(urls) - len(done)} of the concurrent requests failed")
    return sorted(done)


def parts_done(user: Any, url: str) -> list[float]:
    """Seconds from the start until each line of a streamed /panels/ answer is made: the tab
    draws each panel as its line arrives."""
    client = series_client(user)
    start = time.perf_counter()
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code}")
    done = []
    for _ in response.streaming_content:
        done.append(time.perf_counter() - start)
    return done


def bench_at_once(user: Any, run: Any, repeat: int, raw: dict) -> Row:
    """The tab's one request for its panels against what it made before: a /series/ request a
    panel, sent together."""
    urls = panel_urls(run)
    one = f"/api/runs/{run.name}/panels/"
    samples: dict[str, list[list[float]]] = {"one_request": [], "series_at_once": []}

    def streamed() -> float:
        samples["one_request"].append(parts_done(user, one))
        return samples["one_request"][-1][0]

    def together() -> float:
        samples["series_at_once"].append(requests_done(user, urls, at_once=True))
        return samples["series_at_once"][-1][0]

    progress(f"the {len(urls)} panels: {repeat} rounds of {one}, and of {len(urls)} /series/")
    interleaved(repeat, streamed, together, warm_up=False)
    raw["panels_request"] = {"url": one, "series_urls": urls, **samples}

    def first_last(name: str) -> tuple[float, float]:
        return median([s[0] for s in samples[name]]), median([s[-1] for s in samples[name]])

    first, last = first_last("one_request")
    before, before_last = first_last("series_at_once")
    return Row(
        f"the {len(urls)} panels in one request (/panels/)",
        f"first line {first:.3f} s, last {last:.3f} s",
        f"{len(urls)} /series/ at once: first {before:.3f} s, last {before_last:.3f} s",
        last / before_last,
        "report (in-process threads)",
        None,
    )


def profile_series(client: Any, url: str, top: int = 25) -> str:
    """cProfile of one request, the heaviest functions first (file:line); also on stderr."""
    profiler = cProfile.Profile()
    profiler.enable()
    get_json(client, url)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    progress("series API missed its target; cProfile of one request (by own time):\n" + text)
    return text


def full_resolution_bytes(user: Any, run: Any) -> int:
    """What the four panels' requests would send without downsampling (?raw=1): the size the
    buckets save."""
    client = series_client(user)
    return sum(len(get_json(client, url + "&raw=1")) for url in panel_urls(run))


# --- the server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    process: subprocess.Popen
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def login_link(self) -> str | None:
        """The one-time link a first `div serve` prints when no user exists."""
        found = re.search(r"(http://\S+/login/\S+/\S+/)", self.output())
        return found.group(1) if found else None


@contextmanager
def serving(home: Path, log: Path, timeout: float = 60.0) -> Iterator[Server]:
    """`python -m divergent serve` on a free port; stopped (SIGTERM, then SIGKILL) on the way
    out, error or not. Its own session, so the signals reach it and only it."""
    port = free_port()
    env = {**django_env(home), "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "divergent", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        wait_until_serving(server, port, timeout)
        progress(f"div serve is up at {server.url} (pid {process.pid})")
        yield server
    finally:
        stop(process)


def wait_until_serving(server: Server, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"div serve exited {server.process.returncode}:\n{server.output()}")
        if "Serving " in server.output():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                pass
        time.sleep(0.1)
    raise RuntimeError(f"div serve did not start within {timeout:.0f} s:\n{server.output()}")


def stop(process: subprocess.Popen, grace: float = 10.0) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass
    progress(f"stopped pid {process.pid} (exit {process.returncode})")


# --- the browser ------------------------------------------------------------------------------


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def log_in(browser: Any, link: str) -> dict:
    """Follow the one-time link once; the session's cookies are kept for every later context."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    if "/login/" in page.url:
        raise RuntimeError(f"the login link did not log in: ended on {page.url}")
    state = context.storage_state()
    context.close()
    return state


def watch_websockets(page: Any) -> list[dict]:
    """Every websocket frame the page sends or receives, with its size in bytes."""
    frames: list[dict] = []

    def size(payload: str | bytes) -> int:
        return len(payload.encode() if isinstance(payload, str) else payload)

    def on_socket(ws: Any) -> None:
        ws.on("framereceived", lambda p: frames.append({"way": "in", "bytes": size(p)}))
        ws.on("framesent", lambda p: frames.append({"way": "out", "bytes": size(p)}))

    page.on("websocket", on_socket)
    return frames


PAGE_FIGURES = """
() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource").map((e) => ({
    path: new URL(e.name).pathname + new URL(e.name).search,
    start: e.startTime, response_start: e.responseStart, end: e.responseEnd,
    transfer: e.transferSize, body: e.encodedBodySize, decoded: e.decodedBodySize,
  }));
  const notes = [...document.querySelectorAll("section.panel")].map((p) => ({
    title: p.dataset.title,
    note: p.querySelector(".note").textContent,
    drawn: (p.querySelector(".plot").data || []).map((t) => t.x.length),
  }));
  return {
    bench: window.__bench,
    nav: { response_end: nav.responseEnd, dom_content_loaded: nav.domContentLoadedEventEnd,
           load: nav.loadEventEnd, body: nav.encodedBodySize, transfer: nav.transferSize },
    resources, notes,
  };
}
"""


# Resolves once the page has made no request for half a second (resource timing's entries stop
# growing): Playwright's "networkidle" can miss a streamed answer's end and wait for ever.
SETTLE = """() => new Promise((resolve) => {
  let seen = -1, since = performance.now();
  const look = () => {
    const now = performance.getEntriesByType("resource").length;
    if (now !== seen) { seen = now; since = performance.now(); }
    if (performance.now() - since >= 500) resolve(now);
    else setTimeout(look, 50);
  };
  look();
})"""


def settle(page: Any) -> None:
    page.evaluate(SETTLE)


def load_tab(context: Any, url: str, panels: int = PANELS, timeout: float = 60.0) -> dict:
    """Open the tab in a new page of CONTEXT and wait for every panel to have points on screen,
    then for the page's requests to stop (the Log tab's one read). Returns what it measured."""
    page = context.pages[0] if context.pages else context.new_page()
    frames = watch_websockets(page)
    page.goto(url, wait_until="commit")
    page.wait_for_function(
        f"() => window.__bench && Object.keys(window.__bench.drawn).length >= {panels}",
        timeout=timeout * 1000,
    )
    settle(page)
    measured = page.evaluate(PAGE_FIGURES)
    page.close()
    measured["frames"] = frames
    return summarize_load(measured)


def summarize_load(m: dict) -> dict:
    """A page load's figures: seconds to the first and last panel, and bytes by kind."""
    drawn = sorted(m["bench"]["drawn"].values())
    api = [r for r in m["resources"] if r["path"].startswith("/api/")]
    static = [r for r in m["resources"] if r["path"].startswith("/static/")]
    ws_bytes = sum(f["bytes"] for f in m["frames"])
    # The one request for the panels streams a line a panel: its first byte is the first
    # panel's data (resource timing cannot see each line).
    first_byte = min(r["response_start"] for r in api if "/panels/" in r["path"])
    ready = m["nav"]["dom_content_loaded"]
    return {
        # The first panel's time in three parts, ms: the page and its scripts (Plotly.js
        # fetched and run), the panels' answer until its first byte (asked for before Plotly.js
        # runs, so often already in), and the drawing.
        "phases_ms": {
            "to DOMContentLoaded": ready,
            "then to the panels answer's first byte": max(0.0, first_byte - ready),
            "then to the first panel on screen": drawn[0] - max(ready, first_byte),
        },
        "first_panel_s": drawn[0] / 1000,
        "all_panels_s": drawn[-1] / 1000,
        "dom_content_loaded_s": m["nav"]["dom_content_loaded"] / 1000,
        "api_bytes": sum(r["body"] for r in api),
        "api_requests": len(api),
        "ws_bytes": ws_bytes,
        "ws_frames": len(m["frames"]),
        "data_bytes": sum(r["body"] for r in api) + ws_bytes,
        "html_bytes": m["nav"]["body"],
        "static_bytes": sum(r["body"] for r in static),
        "static_transferred": sum(r["transfer"] for r in static),
        "static_requests": len(static),
        "page": m,
    }


def cold_loads(browser: Any, state: dict, url: str, loads: int) -> list[dict]:
    """Each load in a new context with an empty cache: a first visit, Plotly.js included."""
    results = []
    for i in range(loads):
        context = browser.new_context(storage_state=state)
        context.add_init_script(PAGE_HOOK)
        try:
            results.append(load_tab(context, url))
        finally:
            context.close()
        progress(f"  cold load {i + 1}: {brief(results[-1])}")
    return results


def warm_loads(playwright: Any, state: dict, url: str, loads: int, profile: Path) -> list[dict]:
    """Each load in a new persistent context on one profile directory, after one untimed visit:
    a new browser each time, with the disk cache (Plotly.js, the scripts) kept, as a returning
    user has it."""
    results = []
    for i in range(loads + 1):
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            context.add_cookies(state["cookies"])
            context.add_init_script(PAGE_HOOK)
            result = load_tab(context, url)
        finally:
            context.close()
        if i == 0:
            progress(f"  warm-up visit: {brief(result)}")
            continue
        results.append(result)
        progress(f"  warm load {i}: {brief(result)}")
    return results


def loads_in_turns(
    link: str, urls: dict[str, str], loads: int, work: Path, measure: Any, brief: Any
) -> dict:
    """`loads` cold loads of each page (a new context, an empty cache), then `loads` warm ones
    (a new persistent context on one profile, after an untimed visit), the pages in turns so
    that the machine's noise falls on each alike. `measure(context, name, url)` opens a page
    and returns what it measured. Returns {"cold": {name: [...]}, "warm": {name: [...]}}."""
    from playwright.sync_api import sync_playwright

    out: dict = {"cold": {name: [] for name in urls}, "warm": {name: [] for name in urls}}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            state = log_in(browser, link)
            for i in range(loads):
                for name, url in urls.items():
                    context = browser.new_context(storage_state=state)
                    context.add_init_script(PAGE_HOOK)
                    try:
                        out["cold"][name].append(measure(context, name, url))
                    finally:
                        context.close()
                    progress(f"  cold {name} {i + 1}: {brief(out['cold'][name][-1])}")
        finally:
            browser.close()
        profile = work / "chromium-profile"
        for i in range(loads + 1):
            for name, url in urls.items():
                context = playwright.chromium.launch_persistent_context(
                    str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
                )
                try:
                    context.add_cookies(state["cookies"])
                    context.add_init_script(PAGE_HOOK)
                    load = measure(context, name, url)
                finally:
                    context.close()
                if i == 0:
                    progress(f"  warm-up visit {name}: {brief(load)}")
                    continue
                out["warm"][name].append(load)
                progress(f"  warm {name} {i}: {brief(load)}")
    return out


def brief(load: dict) -> str:
    return (
        f"first panel {load['first_panel_s']:.3f} s, all {load['all_panels_s']:.3f} s, "
        f"data {load['data_bytes'] / 1000:.0f} kB, static {load['static_transferred'] / 1000:.0f}"
        f" kB transferred"
    )


def bench_browser(server: Server, link: str, run: Any, loads: int, work: Path, raw: dict) -> dict:
    from playwright.sync_api import sync_playwright

    url = f"{server.url}/runs/{run.name}/"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            state = log_in(browser, link)
            progress(f"browser: {loads} cold loads of {url} (a new context each, empty cache)")
            cold = cold_loads(browser, state, url, loads)
        finally:
            browser.close()
        progress(f"browser: {loads} warm loads (a new persistent context each, cache kept)")
        warm = warm_loads(playwright, state, url, loads, work / "chromium-profile")
    raw["browser"] = {"url": url, "cold": cold, "warm": warm}
    return {"cold": cold, "warm": warm}


# --- the table --------------------------------------------------------------------------------


def stat(loads: Sequence[dict], key: str) -> tuple[float, str]:
    values = [load[key] for load in loads]
    return median(values), spread(values)


def browser_rows(loads: dict, points: int, full_bytes: int) -> list[Row]:
    cold, warm = loads["cold"], loads["warm"]
    data, _ = stat(cold, "data_bytes")
    api_requests = cold[0]["api_requests"]
    ws_frames = cold[0]["ws_frames"]
    rows = [
        Row(
            f"data sent, {PANELS} panels x {points:,} points",
            f"{data / MB:.3f} MB ({api_requests} /api/ bodies + {ws_frames} ws frames)",
            f"{full_bytes / MB:.1f} MB at full resolution (?raw=1)",
            data / full_bytes,
            f"< {DATA_MAX_BYTES / MB:.0f} MB",
            data < DATA_MAX_BYTES,
        )
    ]
    for name, group in (("cold cache", cold), ("warm cache", warm)):
        first, first_spread = stat(group, "first_panel_s")
        every, every_spread = stat(group, "all_panels_s")
        ready, ready_spread = stat(group, "dom_content_loaded_s")
        floor = f"{ready:.3f} s ({ready_spread}) DOMContentLoaded"
        rows.append(
            Row(
                f"first panel drawn ({name})",
                f"{first:.3f} s ({first_spread})",
                floor,
                first / ready,
                f"< {FIRST_PANEL_MAX_S} s",
                first < FIRST_PANEL_MAX_S,
            )
        )
        rows.append(
            Row(
                f"all {PANELS} panels drawn ({name})",
                f"{every:.3f} s ({every_spread})",
                floor,
                every / ready,
                "report",
                None,
            )
        )
    static_size, _ = stat(cold, "static_bytes")
    cold_sent, _ = stat(cold, "static_transferred")
    warm_sent, _ = stat(warm, "static_transferred")
    rows.append(
        Row(
            "static assets (Plotly.js included)",
            f"{static_size / MB:.2f} MB; sent {cold_sent / MB:.2f} MB cold, "
            f"{warm_sent / MB:.2f} MB warm",
            "",
            None,
            "report (cached after a first visit)",
            None,
        )
    )
    return rows


def timeline(load: dict) -> str:
    """One load's course, in ms from navigation start: where the first panel's time goes."""
    page = load["page"]
    lines = [
        f"    HTML received            {page['nav']['response_end']:8.0f} ms",
        f"    DOMContentLoaded         {page['nav']['dom_content_loaded']:8.0f} ms",
    ]
    for r in page["resources"]:
        lines.append(
            f"    {r['path'][:60]:<60} {r['start']:6.0f} -> first byte {r['response_start']:6.0f}"
            f" -> end {r['end']:6.0f} ms, {r['body'] / 1000:7.1f} kB"
        )
    for r in page["bench"]["reacts"]:
        lines.append(
            f"    Plotly.react {r['title'] or '':<24} {r['start']:6.0f} -> {r['end']:6.0f} ms"
        )
    for i, t in sorted(page["bench"]["drawn"].items(), key=lambda kv: kv[1]):
        lines.append(f"    panel {int(i) + 1} on screen           {t:8.0f} ms")
    return "\n".join(lines)


def phases(loads: Sequence[dict]) -> str:
    names = loads[0]["phases_ms"]
    return ", ".join(
        f"{name} {median([load['phases_ms'][name] for load in loads]):.0f}" for name in names
    )


def notes(raw: dict, load: dict) -> str:
    """The lines under the table: where the series API's and the first panel's time goes, and
    how busy the machine was."""
    stages = raw["series_api"]["stages"]
    browser = raw["browser"]
    return (
        "series API stages (median s): "
        + ", ".join(f"{name} {seconds:.3f}" for name, seconds in stages.items())
        + f"\nfirst panel, cold (median ms): {phases(browser['cold'])}"
        + f"\nfirst panel, warm (median ms): {phases(browser['warm'])}"
        + f"\nload average (1 min) {load['before'][0]:.1f} before, {load['after'][0]:.1f} after,"
        + f" on {os.cpu_count()} CPUs"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000, help="points in the run")
    parser.add_argument("--repeat", type=int, default=7, help="rounds of the series API figure")
    parser.add_argument("--loads", type=int, default=5, help="page loads, cold and warm each")
    parser.add_argument(
        "--at-once-rounds", type=int, default=3, help="rounds of the concurrent-requests figure"
    )
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser.parse_args(argv)


def run_all(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    raw: dict = {}
    home = work / "home"
    progress(f"scratch directory {work}")
    setup_django(home)
    from django.db import connections

    from telemetry import services

    user, run, file_bytes = build_run(args.points)
    raw["run"] = {"name": run.name, "points": args.points, "file_bytes": file_bytes}
    rows: list[Row] = []
    row, _ = bench_series_api(user, run, args.points, args.repeat, raw)
    rows.append(row)
    rows.append(bench_at_once(user, run, args.at_once_rounds, raw))
    full_bytes = full_resolution_bytes(user, run)
    # The server gets the database to itself: this process holds no connection while it runs.
    connections.close_all()

    with serving(home, work / "serve.log") as server:
        link = services.login_link(user=user, base=server.url)
        connections.close_all()
        loads = bench_browser(server, link, run, args.loads, work, raw)
    rows.extend(browser_rows(loads, args.points, full_bytes))
    slowest = max(loads["cold"], key=lambda load: load["first_panel_s"])
    median_load = sorted(loads["cold"], key=lambda load: load["first_panel_s"])[args.loads // 2]
    raw["timeline_median_cold_load"] = timeline(median_load)
    progress("the median cold load, ms from navigation start:\n" + timeline(median_load))
    if slowest is not median_load and any(r.met is False for r in rows[2:]):
        progress("the slowest cold load:\n" + timeline(slowest))
    return rows, raw


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    with scratch("div-bench-tab-", args.tmp, args.keep) as work:
        rows, raw = run_all(args, work)
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"$ {command_line()}")
    print(table(rows), end="")
    print(notes(raw, load))
    write_json("tab.json", rows, started=started, raw=raw, load_average=load)


if __name__ == "__main__":
    main()
