"""The telemetry pipeline's figures, each against a floor measured in the same run.

    python bench/ingest.py [--points 200000] [--big-mb 800] [--repeat 5]

Prints progress on stderr and a summary table on stdout, and writes the table with every
sample to bench/out/ingest.json. See bench/README.md for what each figure means.

Every figure that needs Django is taken in a fresh child process (`--child ingest`) on a fresh
DIVERGENT_HOME, since Django reads DIVERGENT_HOME once at set-up and each repetition needs an
empty database; the child times only the ingest loop and prints its figures as JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import random
import resource
import shutil
import sqlite3
import sys
import time
from pathlib import Path

from common import (
    MB,
    ROOT,
    Row,
    child,
    command_line,
    interleaved,
    manage,
    median,
    place,
    progress,
    rss_mb,
    scratch,
    spread,
    sqlite_bytes,
    table,
    write_json,
)

SCRIPT = Path(__file__).resolve()
DB_NAME = "divergent.sqlite3"  # settings.py: DIVERGENT_HOME / "divergent.sqlite3"
WIDE_KEYS = 256
KEYS_PER_LINE = 64  # a line may carry at most 64 numbers

# Targets, from issue 2 ("Tests, benchmark, figures"); issue 9 ("Reads that cost what they
# return") asks ingest to keep to the floor's time with points stored by key.
INGEST_MAX_RATIO = 1.0
SERIES_MAX_SECONDS = 1.0
# "Independent of the number of points": both medians include ~0.3 s of start-up, so a key
# table that read the points would show far more than this; less is start-up noise.
KEY_TABLE_MAX_RATIO = 1.2
STORE_MAX_RATIO = 1.5
RSS_MAX_MB = 200
RSS_MAX_RATIO = 1.2  # "flat whatever the file's size": 10x the file, at most 20% more memory


# --- the files ------------------------------------------------------------------------------


def write_run_file(path: Path, points: int, *, seed: int = 0) -> int:
    """A training run's telemetry.jsonl, written with json.dumps as a run would; returns bytes.

    step, loss, lr and grad_norm on every line, and {"eval": {"loss": ...}} every 10th line.
    The floats are the long reprs real runs write, not short round numbers.
    """
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for step in range(1, points + 1):
            loss = 2.5 * math.exp(-step / (points / 4)) + 0.3 + rng.gauss(0, 0.05)
            line: dict = {
                "step": step,
                "loss": loss,
                "lr": 3e-4 * 0.5 * (1 + math.cos(math.pi * step / points)),
                "grad_norm": abs(rng.gauss(1.0, 0.3)),
            }
            if step % 10 == 0:
                line["eval"] = {"loss": loss + abs(rng.gauss(0.1, 0.02))}
            f.write(json.dumps(line) + "\n")
    return path.stat().st_size


def write_wide_file(path: Path, points: int, *, seed: int = 1) -> int:
    """A run with 256 keys: each line carries 64 of them, rotating, so 4 lines name them all."""
    rng = random.Random(seed)
    names = [f"layer{i:03d}" for i in range(WIDE_KEYS)]
    blocks = WIDE_KEYS // KEYS_PER_LINE
    with open(path, "w", encoding="utf-8") as f:
        for i in range(points):
            start = (i % blocks) * KEYS_PER_LINE
            line = {name: rng.random() for name in names[start : start + KEYS_PER_LINE]}
            f.write(json.dumps(line) + "\n")
    return path.stat().st_size


def write_big_file(path: Path, source: Path, size: int) -> int:
    """SOURCE repeated until the file is at least SIZE bytes.

    Lines past the run's 200,000 points are dropped, but every one is still read and parsed,
    which is what the memory figure is about; repeating keeps the generation to seconds.
    """
    block = source.read_bytes()
    written = 0
    with open(path, "wb") as f:
        while size - written >= len(block):
            f.write(block)
            written += len(block)
        # The rest of the size, cut after a newline so the file ends with a whole line.
        rest = block[: block.rfind(b"\n", 0, size - written) + 1]
        f.write(rest)
        written += len(rest)
    return written


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


# --- homes ----------------------------------------------------------------------------------


def make_template(work: Path) -> tuple[Path, int]:
    """One migrated, empty database, copied into every fresh home: migrating once is enough,
    and a child that never migrates has no migration in its peak memory."""
    home = work / "template"
    manage(["migrate", "--verbosity", "0"], home)
    db = home / DB_NAME
    return db, sqlite_bytes(db)


def fresh_home(work: Path, template: Path, name: str) -> Path:
    home = work / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copyfile(template, home / DB_NAME)
    return home


def ingest_in_child(home: Path, file: Path) -> dict:
    return child(SCRIPT, ["ingest", "--home", str(home), "--file", str(file)], home)


# --- figure 2: ingest lines/s against the floor -----------------------------------------------


def bench_ingest(
    work: Path, template: Path, file: Path, lines: int, points: int, repeat: int, raw: dict
) -> tuple[Row, Path]:
    """Returns the row and the home of the last repetition, kept for the figures that read it."""
    home = work / "ingest"
    floor_db = work / "floor.sqlite3"
    results: list[dict] = []

    def ingest() -> float:
        result = ingest_in_child(fresh_home(work, template, "ingest"), file)
        if result["points"] != points:
            raise RuntimeError(f"the ingester stored {result['points']} points, not {points}")
        results.append(result)
        progress(f"  ingest {result['seconds']:.3f} s")
        return result["seconds"]

    def floor() -> float:
        for path in (floor_db, floor_db.with_name(floor_db.name + "-wal")):
            path.unlink(missing_ok=True)
        result = child(SCRIPT, ["floor", "--db", str(floor_db), "--file", str(file)])
        if result["rows"] != lines:
            raise RuntimeError(f"the floor stored {result['rows']} rows, not {lines}")
        progress(f"  floor  {result['seconds']:.3f} s")
        return result["seconds"]

    progress(f"ingest: {repeat} rounds of the ingester and the floor, taken in turns")
    ingest_s, floor_s = interleaved(repeat, ingest, floor)
    raw["ingest"] = {"ingest_seconds": ingest_s, "floor_seconds": floor_s, "children": results}
    ratio = median(ingest_s) / median(floor_s)
    row = Row(
        f"ingest {points:,} points",
        f"{lines / median(ingest_s):,.0f} lines/s ({median(ingest_s):.2f} s, {spread(ingest_s)})",
        f"{lines / median(floor_s):,.0f} lines/s ({median(floor_s):.2f} s, {spread(floor_s)})",
        ratio,
        f"time <= {INGEST_MAX_RATIO}x floor",
        ratio <= INGEST_MAX_RATIO,
    )
    return row, home


# --- figure 3: div telemetry RUN loss -------------------------------------------------------


def bench_series(home: Path, work: Path, points: int, repeat: int, raw: dict) -> Row:
    out = work / "loss.tsv"
    progress(f"div telemetry run-1 loss: {repeat} rounds, against `div telemetry` (start-up)")
    startup_s, series_s = interleaved(
        repeat,
        lambda: manage(["telemetry"], home),
        lambda: manage(["telemetry", "run-1", "loss"], home, stdout=out),
    )
    rows = count_lines(out)
    if rows != points + 1:  # a header, then every point (each carries loss)
        raise RuntimeError(f"div telemetry run-1 loss printed {rows} lines, not {points + 1}")
    raw["series"] = {"series_seconds": series_s, "startup_seconds": startup_s}
    value = median(series_s)
    return Row(
        f"div telemetry RUN loss > file ({points:,} points)",
        f"{value:.3f} s ({spread(series_s)})",
        f"{median(startup_s):.3f} s start-up (div telemetry)",
        value / median(startup_s),
        f"< {SERIES_MAX_SECONDS:.0f} s wall",
        value < SERIES_MAX_SECONDS,
    )


# --- figure 4: the key table on a 256-key run -----------------------------------------------


def wide_home(work: Path, template: Path, points: int) -> Path:
    file = work / f"wide-{points}.jsonl"
    size = write_wide_file(file, points)
    home = fresh_home(work, template, f"wide-{points}")
    progress(f"  ingesting a {WIDE_KEYS}-key run of {points:,} points ({size / MB:.0f} MB)")
    result = ingest_in_child(home, file)
    file.unlink()
    if result["points"] != points or result["keys"] != WIDE_KEYS:
        raise RuntimeError(f"the wide run stored {result['points']} points, {result['keys']} keys")
    return home


def bench_key_table(work: Path, template: Path, many: int, repeat: int, raw: dict) -> Row:
    few = 200
    progress(f"key table: building {WIDE_KEYS}-key runs of {few} and {many:,} points")
    small, big = wide_home(work, template, few), wide_home(work, template, many)
    out = work / "keys.txt"

    def key_table(home: Path) -> float:
        seconds = manage(["telemetry", "run-1"], home, stdout=out)
        if count_lines(out) != WIDE_KEYS + 1:
            raise RuntimeError(f"the key table has {count_lines(out) - 1} keys, not {WIDE_KEYS}")
        return seconds

    progress(f"key table: {repeat} rounds on each run, taken in turns")
    few_s, many_s = interleaved(repeat, lambda: key_table(small), lambda: key_table(big))
    raw["key_table"] = {f"seconds_{few}": few_s, f"seconds_{many}": many_s}
    shutil.rmtree(small)
    shutil.rmtree(big)
    ratio = median(many_s) / median(few_s)
    return Row(
        f"key table, {WIDE_KEYS} keys",
        f"{many:,} points: {median(many_s):.3f} s ({spread(many_s)})",
        f"{few} points: {median(few_s):.3f} s ({spread(few_s)})",
        ratio,
        f"independent of points (<= {KEY_TABLE_MAX_RATIO}x)",
        ratio <= KEY_TABLE_MAX_RATIO,
    )


# --- figure 5: the store's size -------------------------------------------------------------


def bench_store(home: Path, file_bytes: int, empty_bytes: int, points: int, raw: dict) -> list[Row]:
    """The database alone, and the home: the run's folder keeps telemetry.jsonl beside it."""
    stored = sqlite_bytes(home / DB_NAME) - empty_bytes
    raw["store"] = {"db_bytes": stored, "empty_db_bytes": empty_bytes, "file_bytes": file_bytes}
    ratio = stored / file_bytes
    return [
        Row(
            f"store size ({points:,} points)",
            f"{stored / MB:.1f} MB (db + wal - empty db)",
            f"{file_bytes / MB:.1f} MB telemetry.jsonl",
            ratio,
            f"< {STORE_MAX_RATIO}x the file",
            ratio < STORE_MAX_RATIO,
        ),
        Row(
            "  the home: the store and telemetry.jsonl",
            f"{(stored + file_bytes) / MB:.1f} MB",
            f"{file_bytes / MB:.1f} MB telemetry.jsonl",
            (stored + file_bytes) / file_bytes,
            "report",
            None,
        ),
    ]


# --- figure 6: peak memory while ingesting a big file -----------------------------------------


def peak_rss(work: Path, template: Path, source: Path, megabytes: float, raw: dict) -> float:
    """The ingesting child's peak RSS in MB, on a file of about MEGABYTES."""
    file = work / f"big-{megabytes:g}.jsonl"
    home = fresh_home(work, template, "big")
    try:
        size = write_big_file(file, source, int(megabytes * MB))
        progress(f"  ingesting {size / MB:,.0f} MB")
        result = ingest_in_child(home, file)
    finally:
        file.unlink(missing_ok=True)
        shutil.rmtree(home, ignore_errors=True)
    peak = rss_mb(result["maxrss_kib"])
    progress(
        f"  peak RSS {peak:.0f} MB (after set-up {rss_mb(result['hwm_before_kib']):.0f} MB), "
        f"{result['lines']:,} lines at {result['lines'] / result['seconds']:,.0f} lines/s"
    )
    raw.setdefault("memory", {})[f"{megabytes:g}MB"] = {"file_bytes": size, **result}
    return peak


def bench_memory(work: Path, template: Path, source: Path, big_mb: float, raw: dict) -> Row:
    small_mb = big_mb / 10
    progress(f"memory: ingesting {small_mb:g} MB and {big_mb:g} MB files")
    small = peak_rss(work, template, source, small_mb, raw)
    big = peak_rss(work, template, source, big_mb, raw)
    ratio = big / small
    return Row(
        f"ingester peak RSS, {big_mb:g} MB file",
        f"{big:.0f} MB",
        f"{small:.0f} MB on a {small_mb:g} MB file",
        ratio,
        f"< {RSS_MAX_MB} MB, flat (<= {RSS_MAX_RATIO}x)",
        big < RSS_MAX_MB and ratio <= RSS_MAX_RATIO,
    )


# --- the children ---------------------------------------------------------------------------


def vm_hwm_kib() -> int:
    """The process's peak RSS so far (Linux), to tell Django's share from the ingester's."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def child_ingest(home: Path, file: Path, profile: Path | None) -> dict:
    """A run with FILE as its telemetry, ended, ingested; only the ingest loop is timed."""
    os.environ["DIVERGENT_HOME"] = str(home)
    os.environ["DJANGO_SETTINGS_MODULE"] = "divergent.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from telemetry import services
    from telemetry.ingest import Ingester
    from telemetry.models import Key

    if not (home / DB_NAME).exists():  # run by hand on an empty home
        call_command("migrate", interactive=False, verbosity=0)
    run = services.run_create(org=services.org_get_or_create(), command=["bench"])
    place(file, run.telemetry_path)
    services.run_finish(run=run, exit_code=0)

    ingester = Ingester(run_ids=[run.pk])
    hwm_before = vm_hwm_kib()
    profiler = cProfile.Profile() if profile else None
    passes = 0
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    while ingester.tail_once():
        passes += 1
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - start
    if profiler:
        profiler.dump_stats(profile)

    run.refresh_from_db()
    tally = services.tally_load(run=run)
    return {
        "seconds": seconds,
        "passes": passes,
        "lines": count_lines(file),
        "points": run.points,
        "keys": Key.objects.filter(run=run).count(),
        "closed": run.telemetry_closed,
        "drops": tally.drops,
        "hwm_before_kib": hwm_before,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def flatten(obj: dict, prefix: str = "") -> dict:
    """Nested objects to dotted keys: the least any ingester of these lines must do."""
    flat: dict = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def child_floor(db: Path, file: Path) -> dict:
    """The floor: stdlib json + flatten + one executemany of a JSON row per point, one
    transaction, in a fresh WAL database with the same unique (run_id, seq) index."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE point (run_id INTEGER NOT NULL, seq INTEGER NOT NULL, data TEXT)")
    con.execute("CREATE UNIQUE INDEX point_run_seq ON point (run_id, seq)")
    start = time.perf_counter()
    with open(file, "rb") as f:
        rows = ((1, seq, json.dumps(flatten(json.loads(line)))) for seq, line in enumerate(f, 1))
        con.execute("BEGIN")
        con.executemany("INSERT INTO point (run_id, seq, data) VALUES (?, ?, ?)", rows)
        con.execute("COMMIT")
    seconds = time.perf_counter() - start
    (count,) = con.execute("SELECT count(*) FROM point").fetchone()
    con.close()
    return {"seconds": seconds, "rows": count}


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000, help="points in the main run")
    parser.add_argument(
        "--wide-points",
        type=int,
        default=None,
        help="points in the big 256-key run (default: --points)",
    )
    parser.add_argument(
        "--big-mb", type=float, default=800, help="size of the memory figure's big file, MB"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds of each figure")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    # The child side: one measurement in a fresh interpreter, printed as JSON.
    parser.add_argument("--child", choices=["ingest", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run_child(args: argparse.Namespace) -> None:
    if args.child == "ingest":
        result = child_ingest(args.home.resolve(), args.file.resolve(), args.profile)
    else:
        result = child_floor(args.db, args.file)
    print(json.dumps(result))


def run_all(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    raw: dict = {}
    progress(f"scratch directory {work}")
    template, empty_bytes = make_template(work)
    run_file = work / "telemetry.jsonl"
    file_bytes = write_run_file(run_file, args.points)
    lines = args.points
    progress(f"wrote {lines:,} lines, {file_bytes / MB:.1f} MB")

    rows: list[Row] = []
    row, home = bench_ingest(work, template, run_file, lines, args.points, args.repeat, raw)
    rows.append(row)
    rows.append(bench_series(home, work, args.points, args.repeat, raw))
    rows.append(bench_key_table(work, template, args.wide_points or args.points, args.repeat, raw))
    rows += bench_store(home, file_bytes, empty_bytes, args.points, raw)
    rows.append(bench_memory(work, template, run_file, args.big_mb, raw))
    return rows, raw


def main() -> None:
    args = parse_args()
    if args.child:
        run_child(args)
        return
    started = time.monotonic()
    with scratch("div-bench-", args.tmp, args.keep) as work:
        rows, raw = run_all(args, work)
    summary = table(rows)
    print(f"$ {command_line()}")
    print(summary, end="")
    write_json("ingest.json", rows, started=started, raw=raw)


if __name__ == "__main__":
    main()
