"""Live latency: from a line written to its point drawn in the Telemetry tab, over 100 lines.

    python bench/latency.py [--lines 100]

`div serve` runs on a fresh DIVERGENT_HOME; `div run DIR --detach -- python writer.py` starts
a run whose writer appends one line every 100-200 ms, each stamped with the wall clock just
before its write and flush; the run's tab is open in headless Chromium, where a hook notes, on
each animation frame, when each step first appears in the Loss panel's Plotly data. Both
clocks are this machine's. Prints progress on stderr and a table on stdout, and writes it with
every sample to bench/out/latency.json. Targets from issue 3 ("Large runs").
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    Row,
    command_line,
    django_env,
    progress,
    run_folder,
    scratch,
    table,
    write_json,
)
from tab import DB_NAME, launch, log_in, percentile, serving

P50_MAX_MS = 300
P95_MAX_MS = 1000

LAYOUT = """\
x = "step"

[[panel]]
title = "Loss"
y = "loss"
"""

# The training script. It waits for the go file (the tab open and live) so that every line is
# written while someone watches, and gives up on the stop file, which the benchmark leaves on
# its way out, error or not, so no writer outlives it.
WRITER = """\
import json, math, os, random, sys, time
from pathlib import Path

go, stop, lines = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
deadline = time.time() + 120
while not go.exists():
    if stop.exists() or time.time() > deadline:
        sys.exit(0)
    time.sleep(0.01)
rng = random.Random(0)
with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a", encoding="utf-8") as f:
    for step in range(1, lines + 1):
        if stop.exists():
            break
        loss = 2.0 * math.exp(-step / 40) + 0.1 + rng.random() * 0.05
        t = time.time()
        f.write(json.dumps({"step": step, "loss": loss, "t": t}) + "\\n")
        f.flush()
        time.sleep(rng.uniform(0.1, 0.2))
print(f"wrote {step} lines")
"""

# Runs in the page before its own scripts. Date.now(), not performance.now(): it is compared
# with the writer's time.time(). Each step is noted when its websocket message arrives (a
# listener added before the tab's own) and when it is first in the Loss panel's trace, checked
# on every animation frame, i.e. as the frame that shows it is painted.
PAGE_HOOK = """
(() => {
  const bench = (window.__latency = { drawn: {}, received: {}, messages: 0 });
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        const now = Date.now();
        const message = JSON.parse(event.data);
        if (message.type !== "points") return;
        bench.messages += 1;
        for (const p of message.points) {
          const step = p.data.step;
          if (step !== undefined && !(step in bench.received)) bench.received[step] = now;
        }
      });
    }
  };
  let array = null, seen = 0;
  function poll() {
    const plot = document.querySelector("section.panel .plot");
    const trace = plot && plot.data && plot.data[0];
    if (trace && trace.x) {
      if (trace.x !== array) { array = trace.x; seen = 0; }  // re-read: look at it all again
      const now = Date.now();
      for (; seen < array.length; seen++) {
        if (!(array[seen] in bench.drawn)) bench.drawn[array[seen]] = now;
      }
    }
    requestAnimationFrame(poll);
  }
  requestAnimationFrame(poll);
})();
"""


def make_project(work: Path) -> Path:
    project = work / "project"
    project.mkdir()
    (project / "writer.py").write_text(WRITER)
    (project / "telemetry.toml").write_text(LAYOUT)
    return project


def launch_run(
    home: Path, project: Path, go: Path, stop: Path, lines: int, env: dict | None = None
) -> str:
    """`div run PROJECT --detach -- python writer.py ...`; returns the run's name. `env`: that
    of another machine's div (bench/remote.py), else the server's own home."""
    cmd = [sys.executable, "-m", "divergent", "run", str(project), "--detach", "--"]
    cmd += [sys.executable, "writer.py", str(go), str(stop), str(lines)]
    env = env if env is not None else django_env(home)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"div run failed ({done.returncode}):\n{done.stderr}")
    return done.stdout.splitlines()[0]


def run_status(home: Path, name: str) -> tuple[str, bool]:
    """The run's status and whether its telemetry is closed, read straight from SQLite."""
    with sqlite3.connect(home / DB_NAME, timeout=10) as db:
        row = db.execute(
            "SELECT status, telemetry_closed FROM telemetry_run WHERE id = ?",
            (int(name.removeprefix("run-")),),
        ).fetchone()
    return row[0], bool(row[1])


def wait_for_end(home: Path, name: str, timeout: float) -> bool:
    """Until the run has ended and its telemetry is all stored, so nothing outlives the
    benchmark's temporary home."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, closed = run_status(home, name)
        if status != "running" and closed:
            return True
        time.sleep(0.2)
    return False


def watch(page: Any, go: Path, lines: int, timeout: float) -> dict:
    """Start the writer and wait until the page has drawn every line (or TIMEOUT passes)."""
    go.touch()
    progress(f"writer started: {lines} lines, one every 100-200 ms")
    deadline = time.monotonic() + timeout
    drawn = 0
    while time.monotonic() < deadline:
        drawn = page.evaluate("Object.keys(window.__latency.drawn).length")
        if drawn >= lines:
            break
        time.sleep(0.25)
    progress(f"the page has drawn {drawn} of {lines} lines")
    return page.evaluate("window.__latency")


def measure(server: Any, home: Path, run: str, go: Path, lines: int) -> dict:
    from playwright.sync_api import sync_playwright

    link = server.login_link()
    if link is None:
        raise RuntimeError(f"div serve printed no login link:\n{server.output()}")
    url = f"{server.url}/runs/{run}/"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(storage_state=log_in(browser, link))
            context.add_init_script(PAGE_HOOK)
            page = context.new_page()
            page.goto(url)
            # "Live" is the tab's note once its websocket is open and it has said where it is.
            page.wait_for_function(
                "() => document.getElementById('live-note').textContent === 'Live'", timeout=60_000
            )
            progress(f"{url} is open and live")
            # ~150 ms a line, then time for the last ones to arrive.
            return watch(page, go, lines, timeout=lines * 0.2 + 20)
        finally:
            browser.close()


def written_at(home: Path, run: str) -> dict[int, float]:
    """step -> the writer's wall clock just before that line's write, in ms."""
    path = run_folder(home, run) / "telemetry.jsonl"
    stamps = {}
    for line in path.read_text().splitlines():
        data = json.loads(line)
        stamps[data["step"]] = data["t"] * 1000
    return stamps


def latencies(written: dict[int, float], page: dict) -> dict[str, list[float]]:
    """Per step, in ms: write -> drawn, and its two parts, write -> websocket message arrived
    (the ingester's poll, its commit, the channel layer, daphne) and arrived -> drawn (the
    tab's parsing and Plotly.react, up to the next frame)."""
    out: dict[str, list[float]] = {"total": [], "server": [], "page": []}
    for step, at in sorted(written.items()):
        drawn = page["drawn"].get(str(step))
        received = page["received"].get(str(step))
        if drawn is None:
            continue
        out["total"].append(drawn - at)
        if received is not None:
            out["server"].append(received - at)
            out["page"].append(drawn - received)
    return out


def rows_for(
    lat: dict[str, list[float]],
    lines: int,
    written: int,
    p50_max: float = P50_MAX_MS,
    p95_max: float = P95_MAX_MS,
) -> list[Row]:
    total, server, page = lat["total"], lat["server"], lat["page"]

    def split(q: float) -> str:
        return (
            f"write->ws message {percentile(server, q):.0f} ms, "
            f"message->drawn {percentile(page, q):.0f} ms"
        )

    p50, p95, worst = percentile(total, 50), percentile(total, 95), max(total)
    return [
        Row(
            "lines drawn",
            f"{len(total)} of {written} written",
            "",
            None,
            f"all {lines}",
            len(total) == lines == written,
        ),
        Row(
            "write -> drawn, p50",
            f"{p50:.0f} ms",
            split(50),
            None,
            f"< {p50_max:.0f} ms",
            p50 < p50_max,
        ),
        Row(
            "write -> drawn, p95",
            f"{p95:.0f} ms",
            split(95),
            None,
            f"< {p95_max:.0f} ms",
            p95 < p95_max,
        ),
        Row("write -> drawn, max", f"{worst:.0f} ms", split(100), None, "report", None),
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=100, help="lines the writer appends")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser.parse_args(argv)


def run_all(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    home, project = work / "home", make_project(work)
    go, stop = work / "go", work / "stop"
    progress(f"scratch directory {work}")
    with serving(home, work / "serve.log") as server:
        run = launch_run(home, project, go, stop, args.lines)
        progress(f"launched {run} (div run --detach)")
        try:
            page = measure(server, home, run, go, args.lines)
        finally:
            stop.touch()
            if not wait_for_end(home, run, timeout=30):
                progress(f"{run} had not ended 30 s after the stop file")
    written = written_at(home, run)
    lat = latencies(written, page)
    if not lat["total"]:
        raise RuntimeError(f"the page drew none of the {len(written)} lines written")
    raw = {
        "run": run,
        "written_ms": written,
        "page": page,
        "latency_ms": lat,
        "websocket_messages": page["messages"],
    }
    progress(f"{page['messages']} websocket messages of points for {len(written)} lines")
    return rows_for(lat, args.lines, len(written)), raw


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    with scratch("div-bench-latency-", args.tmp, args.keep) as work:
        rows, raw = run_all(args, work)
    print(f"$ {command_line()}")
    print(table(rows, floor="of which, at the same percentile"), end="")
    load = {"before": load_before, "after": os.getloadavg()}
    print(
        f"{raw['websocket_messages']} websocket messages of points;"
        f" load average (1 min) {load['before'][0]:.1f} before, {load['after'][0]:.1f} after,"
        f" on {os.cpu_count()} CPUs"
    )
    write_json("latency.json", rows, started=started, raw=raw, load_average=load)


if __name__ == "__main__":
    main()
