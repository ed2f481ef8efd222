"""A comparison of 10 runs of 200,000 points each: data sent, and its first panel drawn.

    python bench/compare.py [--runs 10] [--points 200000] [--loads 5]

Issue 6 ("Compare runs") sets the targets: under 2 MB of data sent, and the first panel drawn
in under 2 s in headless Chromium with Plotly.js from the cache; the floor is one run's tab,
measured in the same run, in turns with the comparison.

Django is set up in this process on a fresh DIVERGENT_HOME: it builds and ingests the runs (each
tab.py's run, with its own seed, on tab.py's 4-panel layout) and times the comparison's panels
request through Django's test client; then `div serve` runs as a child on that home and headless
Chromium opens the comparison and one run's tab, warm (a persistent profile: Plotly.js from the
disk cache) and cold (a new context, an empty cache). Prints progress on stderr and the table on
stdout, and writes it with every sample to bench/out/compare.json.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from common import (
    MB,
    Row,
    command_line,
    interleaved,
    median,
    progress,
    scratch,
    spread,
    table,
    write_json,
)
from tab import (
    LAYOUT,
    PANELS,
    brief,
    ingest_ended,
    load_tab,
    loads_in_turns,
    parts_done,
    serving,
    setup_django,
    write_run_file,
)

DATA_MAX_BYTES = 2 * MB
FIRST_PANEL_MAX_S = 2.0


def build_runs(count: int, points: int) -> tuple[Any, list[Any]]:
    """A user, and COUNT ended, ingested runs of POINTS points on the 4-panel layout."""
    from telemetry import services

    user = services.user_create(username="bench", orgs=[services.DEFAULT_ORG])
    runs = []
    for seed in range(count):
        run = services.run_create(
            org=services.org_get_or_create(), command=["python", "train.py"], layout_source=LAYOUT
        )
        write_run_file(run.telemetry_path, points, seed=seed)
        services.run_finish(run=run, exit_code=0)
        ingest_ended(run, points)
        runs.append(run)
    return user, runs


def bench_server(user: Any, runs: list[Any], repeat: int, raw: dict) -> Row:
    """The comparison's panels request, its stream read to the end, against one run's."""
    names = ",".join(run.name for run in runs)
    compared = f"/api/compare/panels/?runs={names}"
    alone = f"/api/runs/{runs[0].name}/panels/"
    samples: dict[str, list[list[float]]] = {"comparison": [], "one_run": []}

    def comparison() -> float:
        samples["comparison"].append(parts_done(user, compared))
        return samples["comparison"][-1][-1]

    def one_run() -> float:
        samples["one_run"].append(parts_done(user, alone))
        return samples["one_run"][-1][-1]

    progress(f"server: {repeat} rounds of {compared} and of {alone}, in turns")
    interleaved(repeat, comparison, one_run)
    raw["server"] = {"urls": [compared, alone], **samples}
    first = median([s[0] for s in samples["comparison"][1:] or samples["comparison"]])
    last = median([s[-1] for s in samples["comparison"]])
    floor = median([s[-1] for s in samples["one_run"]])
    return Row(
        f"the comparison's 4 panels, {len(runs)} runs: server time",
        f"first line {first:.3f} s, last {last:.3f} s",
        f"{floor:.3f} s: one run's 4 panels",
        last / floor,
        "report",
        None,
    )


def measure(context: Any, name: str, url: str) -> dict:
    return load_tab(context, url, PANELS)


def browser_rows(loads: dict, runs: int, points: int) -> list[Row]:
    def stat(group: list[dict], key: str) -> tuple[float, str]:
        values = [load[key] for load in group]
        return median(values), spread(values)

    data, data_spread = stat(loads["warm"]["comparison"], "data_bytes")
    floor_data, _ = stat(loads["warm"]["one run"], "data_bytes")
    rows = [
        Row(
            f"data sent, {runs} runs x {points:,} points, 4 panels",
            f"{data / MB:.3f} MB",
            f"{floor_data / MB:.3f} MB: one run's tab",
            data / floor_data,
            f"< {DATA_MAX_BYTES / MB:.0f} MB",
            data < DATA_MAX_BYTES,
        )
    ]
    for cache, target in (("warm", True), ("cold", False)):
        for key, what in (("first_panel_s", "first panel"), ("all_panels_s", "all 4 panels")):
            value, value_spread = stat(loads[cache]["comparison"], key)
            floor, floor_spread = stat(loads[cache]["one run"], key)
            met = value < FIRST_PANEL_MAX_S if target and key == "first_panel_s" else None
            rows.append(
                Row(
                    f"{what} drawn, {runs} runs ({cache} cache)",
                    f"{value:.3f} s ({value_spread})",
                    f"{floor:.3f} s ({floor_spread}): one run's tab",
                    value / floor,
                    f"< {FIRST_PANEL_MAX_S:.0f} s" if met is not None else "report",
                    met,
                )
            )
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs compared")
    parser.add_argument("--points", type=int, default=200_000, help="points a run")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the server figure")
    parser.add_argument("--loads", type=int, default=5, help="page loads of each, warm and cold")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    raw: dict = {"runs": args.runs, "points": args.points}
    with scratch("div-bench-compare-", args.tmp, args.keep) as work:
        home = work / "home"
        progress(f"scratch directory {work}")
        setup_django(home)
        from django.db import connections

        from telemetry import services

        user, runs = build_runs(args.runs, args.points)
        rows = [bench_server(user, runs, args.repeat, raw)]
        connections.close_all()
        with serving(home, work / "serve.log") as server:
            link = services.login_link(user=user, base=server.url)
            connections.close_all()
            names = ",".join(run.name for run in runs)
            urls = {
                "comparison": f"{server.url}/compare/?runs={names}",
                "one run": f"{server.url}/runs/{runs[0].name}/",
            }
            loads = loads_in_turns(link, urls, args.loads, work, measure, brief)
    rows += browser_rows(loads, args.runs, args.points)
    raw["browser"] = loads
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"$ {command_line()}")
    print(table(rows), end="")
    print(
        f"load average (1 min) {load['before'][0]:.1f} before, {load['after'][0]:.1f} after,"
        f" on {os.cpu_count()} CPUs"
    )
    write_json("compare.json", rows, started=started, raw=raw, load_average=load)


if __name__ == "__main__":
    main()
