"""The Telemetry tab of a run of many keys: every panel in view drawn, against the 4-panel tab.

    python bench/many_keys.py [--layers 25] [--metrics 10] [--steps 10000] [--loads 5]

Issue 9 ("Reads that cost what they return") sets the target: a run that logs 250 keys (10
metrics for each of 25 layers) has every panel in view drawn within 1.5 s. Its floor is the
4-panel tab of tab.py's 200,000-point run, measured in the same run, in turns with it.

Django is set up in this process on a fresh DIVERGENT_HOME, builds and ingests both runs, then
`div serve` runs as a child on that home and headless Chromium (Playwright) opens each tab:
cold (a new context, an empty cache) and warm (a persistent profile: Plotly.js from the disk
cache). Prints progress on stderr and the table on stdout, and writes it with every sample to
bench/out/many_keys.json. bench/README.md says how each figure is made.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from common import MB, Row, command_line, median, progress, scratch, spread, table, write_json
from tab import (
    PAGE_FIGURES,
    build_run,
    ingest_ended,
    loads_in_turns,
    serving,
    settle,
    setup_django,
    watch_websockets,
)

IN_VIEW_MAX_S = 1.5
METRICS = [
    "grad_norm",
    "weight_norm",
    "update_ratio",
    "act_mean",
    "act_std",
    "attn_entropy",
    "lr_scale",
    "dead_frac",
    "max_logit",
    "kurtosis",
]
LAYERS_A_LINE = 5  # 50 numbers and a step: a line carries at most 64

# Which panels are in the viewport now (their place among every panel), and whether each of
# them has points on screen (PAGE_HOOK notes when, by the same place).
IN_VIEW = """() => {
  const height = window.innerHeight;
  const inView = [];
  document.querySelectorAll("section.panel .plot").forEach((plot, i) => {
    const box = plot.closest("section.panel").getBoundingClientRect();
    if (box.height > 0 && box.bottom > 0 && box.top < height) inView.push(i);
  });
  const drawn = (window.__bench && window.__bench.drawn) || {};
  return { inView, done: inView.length > 0 && inView.every((i) => i in drawn),
           at: inView.map((i) => drawn[i]), drawn: Object.keys(drawn).length,
           panels: document.querySelectorAll("section.panel").length };
}"""

# Scrolls the given panel to the top of the view and resolves, once every panel then in view
# has points on screen, with the ms that took.
SCROLL = (
    """(target) => new Promise((resolve) => {
  const inView = """
    + IN_VIEW
    + """;
  const start = performance.now();
  document.querySelectorAll("section.panel")[target].scrollIntoView();
  const check = () => {
    const now = inView();
    if (now.done) resolve({ ms: performance.now() - start, inView: now.inView.length });
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})"""
)


def key_names(layers: int) -> list[str]:
    return [f"layer{layer:02d}.{metric}" for layer in range(layers) for metric in METRICS]


def write_wide_file(path: Path, layers: int, steps: int, *, seed: int = 1) -> int:
    """A step's numbers for every layer, LAYERS_A_LINE layers a line (each line with the step),
    as a training script that logs each layer's metrics would write them. Returns the bytes."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for step in range(1, steps + 1):
            for first in range(0, layers, LAYERS_A_LINE):
                line: dict = {"step": step}
                for layer in range(first, min(layers, first + LAYERS_A_LINE)):
                    line[f"layer{layer:02d}"] = {
                        metric: abs(rng.gauss(1.0 + layer / 10, 0.2)) for metric in METRICS
                    }
                f.write(json.dumps(line) + "\n")
    return path.stat().st_size


def build_wide_run(layers: int, steps: int) -> Any:
    """An ended, ingested run without a telemetry.toml: the default layout, a panel a key."""
    from telemetry import services

    run = services.run_create(org=services.org_get_or_create(), command=["python", "train.py"])
    size = write_wide_file(run.telemetry_path, layers, steps)
    keys = layers * len(METRICS)
    progress(f"wrote {run.name}'s telemetry: {keys} keys, {steps:,} steps, {size / MB:.0f} MB")
    services.run_finish(run=run, exit_code=0)
    ingest_ended(run)
    return run


def load_in_view(context: Any, url: str, *, scroll: bool, timeout: float = 60.0) -> dict:
    """Open the tab and wait until every panel in the viewport has points on screen; then, if
    asked, scroll to the middle panel and time the same again."""
    page = context.pages[0] if context.pages else context.new_page()
    frames = watch_websockets(page)
    page.goto(url, wait_until="commit")
    page.wait_for_function(f"() => ({IN_VIEW})().done", timeout=timeout * 1000)
    opened = page.evaluate(IN_VIEW)
    settle(page)
    measured = page.evaluate(PAGE_FIGURES)
    scrolled = page.evaluate(SCROLL, opened["panels"] // 2) if scroll else None
    if scrolled:
        settle(page)
    api = [r for r in page.evaluate(PAGE_FIGURES)["resources"] if r["path"].startswith("/api/")]
    page.close()
    opening = [r for r in measured["resources"] if r["path"].startswith("/api/")]
    times = sorted(measured["bench"]["drawn"].values())
    return {
        "in_view_s": max(opened["at"]) / 1000,
        "first_panel_s": times[0] / 1000,
        "dom_content_loaded_s": measured["nav"]["dom_content_loaded"] / 1000,
        "panels": opened["panels"],
        "in_view": len(opened["inView"]),
        "drawn_on_opening": opened["drawn"],
        "api_requests": len(opening),
        "data_bytes": sum(r["body"] for r in opening) + sum(f["bytes"] for f in frames),
        "scrolled_ms": scrolled["ms"] if scrolled else None,
        "scroll_requests": len(api) - len(opening),
        "requests": [r["path"] for r in api],
    }


def brief(load: dict) -> str:
    scrolled = "" if load["scrolled_ms"] is None else f"; scrolled: {load['scrolled_ms']:.0f} ms"
    return (
        f"{load['in_view']} in view drawn at {load['in_view_s']:.3f} s (first"
        f" {load['first_panel_s']:.3f} s), {load['drawn_on_opening']} of {load['panels']} drawn,"
        f" {load['api_requests']} requests, {load['data_bytes'] / 1000:.0f} kB{scrolled}"
    )


def rows_of(loads: dict, keys: int) -> list[Row]:
    def stat(group: list[dict], key: str) -> tuple[float, str]:
        values = [load[key] for load in group]
        return median(values), spread(values)

    rows = []
    for cache in ("cold", "warm"):
        wide, floor = loads[cache]["wide"], loads[cache]["floor"]
        value, value_spread = stat(wide, "in_view_s")
        base, base_spread = stat(floor, "in_view_s")
        rows.append(
            Row(
                f"every panel in view drawn, {keys} keys ({cache} cache)",
                f"{value:.3f} s ({value_spread}), {wide[0]['in_view']} panels",
                f"{base:.3f} s ({base_spread}): the 4-panel tab's 4",
                value / base,
                f"< {IN_VIEW_MAX_S} s",
                value < IN_VIEW_MAX_S,
            )
        )
        first, first_spread = stat(wide, "first_panel_s")
        base_first, _ = stat(floor, "first_panel_s")
        rows.append(
            Row(
                f"first panel drawn, {keys} keys ({cache} cache)",
                f"{first:.3f} s ({first_spread})",
                f"{base_first:.3f} s: the 4-panel tab's",
                first / base_first,
                "report",
                None,
            )
        )
    cold = loads["cold"]["wide"]
    data, _ = stat(cold, "data_bytes")
    base_data, _ = stat(loads["cold"]["floor"], "data_bytes")
    rows.append(
        Row(
            f"data sent on opening, {keys} keys",
            f"{data / MB:.3f} MB in {cold[0]['api_requests']} /api/ requests;"
            f" {median([load['drawn_on_opening'] for load in cold]):.0f} of {keys} panels drawn",
            f"{base_data / MB:.3f} MB: the 4-panel tab's",
            data / base_data,
            "report",
            None,
        )
    )
    scrolled, scrolled_spread = stat(cold, "scrolled_ms")
    rows.append(
        Row(
            f"scrolled to panel {cold[0]['panels'] // 2}: every panel in view drawn",
            f"{scrolled:.0f} ms ({scrolled_spread}) after the scroll,"
            f" {median([load['scroll_requests'] for load in cold]):.0f} more requests",
            "",
            None,
            "report",
            None,
        )
    )
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=25, help="layers, 10 keys each")
    parser.add_argument("--steps", type=int, default=10_000, help="points a key")
    parser.add_argument("--points", type=int, default=200_000, help="points of the 4-panel run")
    parser.add_argument("--loads", type=int, default=5, help="page loads of each, cold and warm")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    with scratch("div-bench-keys-", args.tmp, args.keep) as work:
        home = work / "home"
        progress(f"scratch directory {work}")
        setup_django(home)
        from django.db import connections

        from telemetry import services

        user, floor_run, _ = build_run(args.points)
        wide_run = build_wide_run(args.layers, args.steps)
        connections.close_all()
        with serving(home, work / "serve.log") as server:
            link = services.login_link(user=user, base=server.url)
            connections.close_all()
            runs = {"floor": floor_run, "wide": wide_run}
            urls = {name: f"{server.url}/runs/{run.name}/" for name, run in runs.items()}

            def measure(context: Any, name: str, url: str) -> dict:
                return load_in_view(context, url, scroll=name == "wide")

            loads = loads_in_turns(link, urls, args.loads, work, measure, brief)
    keys = args.layers * len(METRICS)
    rows = rows_of(loads, keys)
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"$ {command_line()}")
    print(table(rows), end="")
    print(
        f"load average (1 min) {load['before'][0]:.1f} before, {load['after'][0]:.1f} after,"
        f" on {os.cpu_count()} CPUs"
    )
    raw = {"loads": loads, "keys": keys, "steps": args.steps, "floor_points": args.points}
    write_json("many_keys.json", rows, started=started, raw=raw, load_average=load)


if __name__ == "__main__":
    sys.exit(main())
