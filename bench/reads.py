"""What reading a run costs on W1, each figure against a floor measured in the same run.

    python bench/reads.py [--points 200000] [--repeat 7] [--runs 50]

W1 is 200,000 points of step, loss, lr and grad_norm, with eval.loss on every 10th point, laid
out by default: four panels, each key against step. Prints progress on stderr and a summary
table on stdout, and writes the table with every sample to bench/out/reads.json. Targets from
issue 9 ("Reads that cost what they return"); bench/README.md says how each figure is made.

Django is set up in this process on a fresh DIVERGENT_HOME, which builds and ingests the run
and times the API with Django's test client; `div telemetry` is timed in a child process of its
own (`--child cli`), after its start-up.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import sys
import threading
import time
from array import array
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from common import (
    MB,
    ROOT,
    Row,
    child,
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
from ingest import write_run_file

SCRIPT = Path(__file__).resolve()
DB_NAME = "divergent.sqlite3"  # settings.py: DIVERGENT_HOME / "divergent.sqlite3"

# Targets, from issue 9.
TAB_MAX_SECONDS = 0.100
KEY_MAX_RATIO = 0.2  # a 20,000-point key against a 200,000-point key
CLI_MAX_RATIO = 1.2
SPARKLINES_MAX_SECONDS = 0.200


def setup_django(home: Path) -> None:
    os.environ.update(django_env(home))
    home.mkdir(parents=True, exist_ok=True)  # SQLite makes its file, not its folder
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def build_run(points: int) -> tuple[Any, Any, int]:
    """A user, and W1 ended and ingested, on the default layout. Returns (user, run, bytes)."""
    from django.core.management import call_command

    from telemetry import services
    from telemetry.ingest import Ingester

    call_command("migrate", interactive=False, verbosity=0)
    user = services.user_create(username="bench", orgs=[services.DEFAULT_ORG])
    run = services.run_create(org=services.org_get_or_create(), command=["python", "train.py"])
    size = write_run_file(run.telemetry_path, points)
    services.run_finish(run=run, exit_code=0)
    started = time.perf_counter()
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    run.refresh_from_db()
    if run.points != points or not run.telemetry_closed:
        raise RuntimeError(f"{run.name} has {run.points} points, closed={run.telemetry_closed}")
    seconds = time.perf_counter() - started
    progress(f"ingested W1, {points:,} points ({size / MB:.1f} MB), in {seconds:.1f} s")
    return user, run, size


def client_for(user: Any) -> Any:
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def get(client: Any, url: str) -> bytes:
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code}")
    return b"".join(response.streaming_content) if response.streaming else response.content


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def sqlite_floor() -> sqlite3.Connection:
    return sqlite3.connect(Path(os.environ["DIVERGENT_HOME"]) / DB_NAME)


# --- figure 1: a tab's data in one request ----------------------------------------------------


def bench_tab(user: Any, run: Any, repeat: int, raw: dict) -> list[Row]:
    client = client_for(user)
    url = f"/api/runs/{run.name}/panels/"
    db = sqlite_floor()
    buckets_sql = (
        "SELECT p.buckets FROM telemetry_overviewpart p"
        " JOIN telemetry_overview o ON o.id = p.overview_id WHERE o.run_id = ?"
    )
    read: dict[str, int] = {}

    def floor() -> float:
        start = time.perf_counter()
        numbers = [array("d", blob).tolist() for (blob,) in db.execute(buckets_sql, (run.pk,))]
        seconds = time.perf_counter() - start
        read["buckets"] = sum(len(n) for n in numbers) // 12
        return seconds

    body: dict[str, bytes] = {}

    def one_request() -> float:
        return timed(lambda: body.__setitem__("panels", get(client, url)))

    series = [
        f"/api/runs/{run.name}/series/?y={part['series'][0]['key']}&x=step"
        for part in map(json.loads, get(client, url).splitlines())
    ]

    def one_by_one() -> float:
        return timed(lambda: [get(client, u) for u in series])

    clients = [client_for(user) for _ in series]

    def at_once() -> float:
        threads = [
            threading.Thread(target=get, args=pair) for pair in zip(clients, series, strict=True)
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.perf_counter() - start

    progress(f"a tab's data: {repeat} rounds of GET {url}, the bare read of its buckets, and")
    progress("  the four /series/ requests one by one and at once, in turns")
    tab_s, floor_s, alone_s, together_s = interleaved(
        repeat, one_request, floor, one_by_one, at_once
    )
    db.close()
    parts = [json.loads(line) for line in body["panels"].splitlines()]
    drawn = sum(s["drawn"] for part in parts for s in part["series"])
    raw["tab"] = {
        "url": url,
        "seconds": tab_s,
        "floor_seconds": floor_s,
        "floor_buckets": read["buckets"],
        "series_one_by_one_seconds": alone_s,
        "series_at_once_seconds": together_s,
        "panels": len(parts),
        "points_drawn": drawn,
        "bytes": len(body["panels"]),
    }
    value = median(tab_s)
    return [
        Row(
            f"a {len(parts)}-panel tab's data, one request",
            f"{value * 1000:.0f} ms ({spread(tab_s)} s), {drawn:,} points, "
            f"{len(body['panels']) / 1000:.0f} kB",
            f"{median(floor_s) * 1000:.1f} ms reading {read['buckets']:,} buckets (sqlite3)",
            value / median(floor_s),
            f"< {TAB_MAX_SECONDS * 1000:.0f} ms",
            value < TAB_MAX_SECONDS,
        ),
        Row(
            f"the {len(series)} panels' /series/ requests, for comparison",
            f"at once: {median(together_s) * 1000:.0f} ms ({spread(together_s)} s)",
            f"one by one: {median(alone_s) * 1000:.0f} ms ({spread(alone_s)} s)",
            median(together_s) / median(alone_s),
            "report",
            None,
        ),
    ]


# --- figure 2: one key's series costs that key's points ----------------------------------------


def bench_key(user: Any, run: Any, repeat: int, raw: dict) -> list[Row]:
    from telemetry import queries

    client = client_for(user)
    url = f"/api/runs/{run.name}/series/?x=step&y="
    sizes: dict[str, int] = {}

    def api(key: str, query: str = "") -> float:
        def read() -> None:
            sizes[key + query] = json.loads(get(client, url + key + query))["series"][0]["total"]

        return timed(read)

    def stored(key: str) -> float:
        return timed(lambda: queries.series(run.pk, key, "step", upto=run.points))

    progress(
        f"one key's series: {repeat} rounds of loss and eval.loss, full resolution and first view"
    )
    samples = interleaved(
        repeat,
        lambda: api("loss", "&raw=1"),
        lambda: api("eval.loss", "&raw=1"),
        lambda: stored("loss"),
        lambda: stored("eval.loss"),
        lambda: api("loss"),
        lambda: api("eval.loss"),
    )
    names = ["raw_loss", "raw_eval", "stored_loss", "stored_eval", "view_loss", "view_eval"]
    raw["key"] = {**dict(zip(names, samples, strict=True)), "points": sizes}
    big, small, big_stored, small_stored, big_view, small_view = map(median, samples)
    n_big, n_small = sizes["loss&raw=1"], sizes["eval.loss&raw=1"]
    return [
        Row(
            "one key's series at full resolution (?raw=1)",
            f"eval.loss, {n_small:,} points: {small * 1000:.1f} ms",
            f"loss, {n_big:,} points: {big * 1000:.1f} ms",
            small / big,
            f"< {KEY_MAX_RATIO}x",
            small / big < KEY_MAX_RATIO,
        ),
        Row(
            "  the same, read from storage alone (queries.series)",
            f"eval.loss: {small_stored * 1000:.1f} ms",
            f"loss: {big_stored * 1000:.1f} ms",
            small_stored / big_stored,
            "report",
            None,
        ),
        Row(
            "  the same, a panel's first view (overview)",
            f"eval.loss: {small_view * 1000:.1f} ms",
            f"loss: {big_view * 1000:.1f} ms",
            small_view / big_view,
            "report",
            None,
        ),
    ]


# --- figure 3: div telemetry RUN loss, after start-up --------------------------------------------


def bench_cli(home: Path, repeat: int, points: int, raw: dict) -> Row:
    progress(f"div telemetry run-1 loss: {repeat} rounds in a child, after its start-up")
    result = child(SCRIPT, ["cli", "--home", str(home), "--repeat", str(repeat)], home)
    if result["lines"] != points + 1:
        raise RuntimeError(f"div telemetry run-1 loss printed {result['lines']} lines")
    raw["cli"] = result
    value, floor = median(result["seconds"]), median(result["floor_seconds"])
    return Row(
        f"div telemetry RUN loss, after start-up ({points:,} points)",
        f"{value:.3f} s ({spread(result['seconds'])})",
        f"{floor:.3f} s ({spread(result['floor_seconds'])}) sqlite3: the two keys' chunks, printed",
        value / floor,
        f"<= {CLI_MAX_RATIO}x floor",
        value / floor <= CLI_MAX_RATIO,
    )


def child_cli(home: Path, repeat: int) -> dict:
    """In a process of its own, set up as div is (gc frozen after set-up, as div freezes it):
    the command and the floor, in turns; only the printing of the points is timed."""
    setup_django(home)
    gc.freeze()
    from django.core.management import call_command

    out = home / "loss.tsv"
    floor_out = home / "floor.tsv"

    def command() -> float:
        # div's commands write to sys.stdout, as a shell's pipe takes them.
        with open(out, "w") as f, redirect_stdout(f):
            return timed(lambda: call_command("telemetry", "run-1", "loss"))

    def floor() -> float:
        """The bare read of step and loss from their chunks, and the same printing."""
        with open(floor_out, "w") as f:
            start = time.perf_counter()
            db = sqlite3.connect(home / DB_NAME)
            (step, loss) = (
                [
                    array("q" if kind == 1 else "d", blob)
                    for (kind, blob) in db.execute(
                        "SELECT kind, vals FROM telemetry_chunk WHERE run_id = 1 AND key_no = ?"
                        " ORDER BY window_no",
                        (key_no,),
                    )
                ]
                for key_no in (1, 2)
            )
            f.write("step\tloss\n")
            for xs, ys in zip(step, loss, strict=True):
                # As div prints a window with every value: the cells interleaved, one format.
                cells: list = [None] * (2 * len(xs))
                cells[0::2], cells[1::2] = xs.tolist(), ys.tolist()
                f.write("%r\t%r\n" * len(xs) % tuple(cells))
            db.close()
            return time.perf_counter() - start

    seconds, floor_seconds = interleaved(repeat, command, floor)
    if out.read_text() != floor_out.read_text():
        raise RuntimeError("div telemetry printed something other than the floor")
    with open(out) as f:
        lines = sum(1 for _ in f)
    return {"seconds": seconds, "floor_seconds": floor_seconds, "lines": lines}


# --- figure 4: sparklines of many runs -------------------------------------------------------


def bench_sparklines(run: Any, runs: int, repeat: int, raw: dict) -> Row:
    """The same W1 overviews under `runs` runs (copied rows: a sparkline reads nothing else)."""
    from telemetry import queries
    from telemetry.models import Key, Overview, Run

    ids = [run.pk]
    keys = list(Key.objects.filter(run=run))
    overviews = list(Overview.objects.filter(run=run))
    for _ in range(runs - 1):
        copy = Run.objects.create(org_id=run.org_id, points=run.points, sealed=run.sealed)
        for key in keys:
            key.pk, key.run_id = None, copy.pk
        Key.objects.bulk_create(keys)
        for overview in overviews:
            overview.pk, overview.run_id = None, copy.pk
        Overview.objects.bulk_create(overviews)
        ids.append(copy.pk)
    db = sqlite_floor()
    marks = ", ".join("?" * len(ids))
    lines: dict = {}

    def sparklines() -> float:
        return timed(lambda: lines.update(queries.sparklines(ids, "loss", "step")))

    def floor() -> float:
        start = time.perf_counter()
        for (blob,) in db.execute(
            f"SELECT coarse FROM telemetry_overview WHERE run_id IN ({marks}) AND y_no = 2",
            ids,
        ):
            array("d", blob).tolist()
        return time.perf_counter() - start

    progress(
        f"sparklines: {repeat} rounds of queries.sparklines for {runs} runs, and the bare read"
    )
    spark_s, floor_s = interleaved(repeat, sparklines, floor)
    db.close()
    if len(lines) != runs:
        raise RuntimeError(f"{len(lines)} sparklines, not {runs}")
    drawn = len(next(iter(lines.values()))[0])
    raw["sparklines"] = {"seconds": spark_s, "floor_seconds": floor_s, "runs": runs, "drawn": drawn}
    value = median(spark_s)
    return Row(
        f"sparklines of {runs} runs, loss against step",
        f"{value * 1000:.1f} ms ({spread(spark_s)} s), {drawn} points each",
        f"{median(floor_s) * 1000:.1f} ms reading their coarse buckets (sqlite3)",
        value / median(floor_s),
        f"< {SPARKLINES_MAX_SECONDS * 1000:.0f} ms",
        value < SPARKLINES_MAX_SECONDS,
    )


# --- main ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000, help="points in W1")
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds of each figure")
    parser.add_argument("--runs", type=int, default=50, help="runs of the sparklines figure")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--child", choices=["cli"], help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(child_cli(args.home.resolve(), args.repeat)))
        return
    started = time.monotonic()
    raw: dict = {}
    with scratch("div-reads-", args.tmp, args.keep) as work:
        home = work / "home"
        setup_django(home)
        user, run, size = build_run(args.points)
        raw["file_bytes"] = size
        rows = [
            *bench_tab(user, run, args.repeat, raw),
            *bench_key(user, run, args.repeat, raw),
            bench_cli(home, args.repeat, args.points, raw),
            bench_sparklines(run, args.runs, args.repeat, raw),
        ]
    print(f"$ {command_line()}")
    print(table(rows), end="")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    write_json("reads.json", rows, started=started, raw=raw, load=load)


if __name__ == "__main__":
    main()
