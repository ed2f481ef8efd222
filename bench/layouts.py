"""How the ways of laying out a run's points in SQLite compare, on W1 and on a live wide run.

    python bench/layouts.py [--points 200000] [--repeat 3]

The measurements behind docs/storage.md's choice, kept so that it can be made again. Plain
stdlib sqlite3 and Python, no Django: the layouts alone, each in a fresh WAL database, against
the layout the points had before (a JSON row a point) as the floor. Prints a table on stdout
and writes bench/out/layouts.json.

On W1 (step, loss, lr, grad_norm, eval.loss on every 10th point), the points parsed once up
front, each layout's write of them all in one transaction, its size, and a read of loss (and
of eval.loss) with step beside it. On a live run of 256 keys (64 numbers a line, 4 lines a
batch, 300 batches), the time and the WAL a batch costs, for the two ways a per-key layout can
take in a batch: rewriting each key's open chunk, or keeping the newest points whole until
their window is complete.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import time
from array import array
from pathlib import Path

from common import (
    MB,
    Row,
    command_line,
    interleaved,
    median,
    progress,
    scratch,
    sqlite_bytes,
    table,
    write_json,
)
from ingest import flatten, write_run_file

LIVE_KEYS, LIVE_PER_LINE, LIVE_LINES, LIVE_BATCHES = 256, 64, 4, 300


def fresh(path: Path) -> sqlite3.Connection:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    return con


def write_all(con: sqlite3.Connection, sql: str, rows, start: float) -> float:
    """Seconds from `start` (before the rows were made) to the commit."""
    con.execute("BEGIN")
    con.executemany(sql, rows)
    con.execute("COMMIT")
    return time.perf_counter() - start


def json_rows(con, points, keys):
    con.execute("CREATE TABLE point (run_id INT, seq INT, data TEXT)")
    con.execute("CREATE UNIQUE INDEX point_seq ON point (run_id, seq)")
    start = time.perf_counter()
    rows = [(seq, json.dumps(data)) for seq, data in points]
    seconds = write_all(con, "INSERT INTO point VALUES (1, ?, ?)", rows, start)

    def read(key: str) -> None:
        con.execute(
            "SELECT data -> '$.step', data -> ? FROM point WHERE run_id = 1 ORDER BY seq",
            (f'$."{key}"',),
        ).fetchall()

    return seconds, read


def narrow(con, points, keys):
    con.execute(
        "CREATE TABLE value (run_id INT, key INT, seq INT, value,"
        " PRIMARY KEY (run_id, key, seq)) WITHOUT ROWID"
    )
    start = time.perf_counter()
    rows = [(keys[k], seq, v) for seq, data in points for k, v in data.items()]
    seconds = write_all(con, "INSERT INTO value VALUES (1, ?, ?, ?)", rows, start)

    def read(key: str) -> None:
        for number in (keys[key], keys["step"]):
            con.execute(
                "SELECT seq, value FROM value WHERE run_id = 1 AND key = ? ORDER BY seq",
                (number,),
            ).fetchall()

    return seconds, read


def chunked(window: int):
    def layout(con, points, keys):
        con.execute(
            "CREATE TABLE chunk (id INTEGER PRIMARY KEY, run_id INT, key INT, window INT,"
            " seqs BLOB, vals BLOB)"
        )
        con.execute("CREATE UNIQUE INDEX chunk_key ON chunk (run_id, key, window)")
        start = time.perf_counter()
        rows = []
        for first in range(0, len(points), window):
            found: dict[str, tuple[list, list]] = {}
            for seq, data in points[first : first + window]:
                for k, v in data.items():
                    seqs, vals = found.setdefault(k, ([], []))
                    seqs.append(seq)
                    vals.append(v)
            for k, (seqs, vals) in found.items():
                dense = seqs[-1] - seqs[0] == len(seqs) - 1
                code = "q" if all(type(v) is int for v in vals) else "d"
                offsets = None if dense else array("H", [s - seqs[0] for s in seqs]).tobytes()
                rows.append((keys[k], first // window, offsets, array(code, vals).tobytes()))
        seconds = write_all(con, "INSERT INTO chunk VALUES (NULL, 1, ?, ?, ?, ?)", rows, start)

        def read(key: str) -> None:
            for number in (keys[key], keys["step"]):
                for (vals,) in con.execute(
                    "SELECT vals FROM chunk WHERE run_id = 1 AND key = ? ORDER BY window",
                    (number,),
                ):
                    array("d", vals).tolist()

        return seconds, read

    return layout


LAYOUTS = {
    "a JSON row a point (before)": json_rows,
    "a row a value: (run, key, seq, value)": narrow,
    "chunks: a row a key a 256-point window": chunked(256),
    "chunks: a row a key a 1,024-point window": chunked(1024),
    "chunks: a row a key a 4,096-point window": chunked(4096),
}


def bench_w1(work: Path, points: int, repeat: int, raw: dict) -> list[Row]:
    file = work / "w1.jsonl"
    file_bytes = write_run_file(file, points)
    with open(file) as f:
        parsed = [(seq, flatten(json.loads(line))) for seq, line in enumerate(f, 1)]
    keys = {k: i for i, k in enumerate(dict.fromkeys(k for _, d in parsed[:20] for k in d), 1)}
    found: dict[str, dict] = {}
    for name, layout in LAYOUTS.items():
        progress(f"W1: {name}")
        writes, reads, evals, size = [], [], [], 0
        for _ in range(repeat):
            db = work / "layout.sqlite3"
            con = fresh(db)
            seconds, read = layout(con, parsed, keys)
            writes.append(seconds)
            loss_s, eval_s = interleaved(
                repeat,
                lambda read=read: _timed(read, "loss"),
                lambda read=read: _timed(read, "eval.loss"),
            )
            reads += loss_s
            evals += eval_s
            con.close()
            size = sqlite_bytes(db)
        found[name] = {"write": writes, "read_loss": reads, "read_eval": evals, "bytes": size}
    raw["w1"] = {"file_bytes": file_bytes, **found}
    floor = found["a JSON row a point (before)"]
    rows = []
    for name, f in found.items():
        rows.append(
            Row(
                name,
                f"write {median(f['write']):.2f} s, {f['bytes'] / MB:.1f} MB"
                f" ({f['bytes'] / file_bytes:.2f}x the file), read loss"
                f" {median(f['read_loss']) * 1000:.1f} ms, eval.loss"
                f" {median(f['read_eval']) * 1000:.1f} ms",
                f"write {median(floor['write']):.2f} s",
                median(f["write"]) / median(floor["write"]),
                "report",
                None,
            )
        )
    return rows


def _timed(read, key: str) -> float:
    start = time.perf_counter()
    read(key)
    return time.perf_counter() - start


def bench_live(work: Path, raw: dict) -> list[Row]:
    rng = random.Random(0)
    names = [f"layer{i // 10:02d}.m{i % 10}" for i in range(LIVE_KEYS)]
    lines = []
    for i in range(LIVE_BATCHES * LIVE_LINES):
        first = (i % (LIVE_KEYS // LIVE_PER_LINE)) * LIVE_PER_LINE
        lines.append({k: rng.random() for k in names[first : first + LIVE_PER_LINE]})
    number = {k: i for i, k in enumerate(names)}
    found = {}
    for name, step in (
        ("newest points whole, sealed by window", _whole_then_sealed),
        ("each key's open chunk rewritten", _open_rewritten),
    ):
        progress(f"live: {name}")
        db = work / "live.sqlite3"
        con = fresh(db)
        con.execute("PRAGMA wal_autocheckpoint=0")  # the WAL then holds every page written
        con.execute("CREATE TABLE point (id INTEGER PRIMARY KEY, run_id INT, seq INT, data TEXT)")
        con.execute("CREATE UNIQUE INDEX point_seq ON point (run_id, seq)")
        con.execute(
            "CREATE TABLE chunk (id INTEGER PRIMARY KEY, run_id INT, key INT, first INT, vals BLOB)"
        )
        con.execute("CREATE UNIQUE INDEX chunk_key ON chunk (run_id, key, first)")
        start = time.perf_counter()
        step(con, lines, number)
        seconds = time.perf_counter() - start
        wal = Path(f"{db}-wal").stat().st_size
        con.close()
        found[name] = {"seconds": seconds, "wal_bytes": wal}
    raw["live"] = found
    floor = found["newest points whole, sealed by window"]
    return [
        Row(
            f"live, {LIVE_KEYS} keys: {name}",
            f"{f['seconds'] / LIVE_BATCHES * 1000:.2f} ms and"
            f" {f['wal_bytes'] / LIVE_BATCHES / 1000:.0f} kB of WAL a batch",
            f"{floor['wal_bytes'] / LIVE_BATCHES / 1000:.0f} kB a batch",
            f["wal_bytes"] / floor["wal_bytes"],
            "report",
            None,
        )
        for name, f in found.items()
    ]


def _whole_then_sealed(con, lines, number) -> None:
    held: list[tuple[int, dict]] = []
    for batch in range(LIVE_BATCHES):
        con.execute("BEGIN")
        fresh_points = [
            (batch * LIVE_LINES + i + 1, line)
            for i, line in enumerate(lines[batch * LIVE_LINES : (batch + 1) * LIVE_LINES])
        ]
        con.executemany(
            "INSERT INTO point (run_id, seq, data) VALUES (1, ?, ?)",
            [(s, json.dumps(d)) for s, d in fresh_points],
        )
        held += fresh_points
        if len(held) >= 1024:
            columns: dict[str, list] = {}
            for _, data in held:
                for k, v in data.items():
                    columns.setdefault(k, []).append(v)
            con.executemany(
                "INSERT INTO chunk (run_id, key, first, vals) VALUES (1, ?, ?, ?)",
                [(number[k], held[0][0], array("d", v).tobytes()) for k, v in columns.items()],
            )
            con.execute("DELETE FROM point WHERE run_id = 1 AND seq <= ?", (held[-1][0],))
            held = []
        con.execute("COMMIT")


def _open_rewritten(con, lines, number) -> None:
    open_chunks: dict[str, tuple[int, list]] = {}
    for batch in range(LIVE_BATCHES):
        con.execute("BEGIN")
        touched = set()
        for i, data in enumerate(lines[batch * LIVE_LINES : (batch + 1) * LIVE_LINES]):
            seq = batch * LIVE_LINES + i + 1
            for k, v in data.items():
                open_chunks.setdefault(k, (seq, []))[1].append(v)
                touched.add(k)
        rows = []
        for k in touched:
            first, vals = open_chunks[k]
            rows.append((number[k], first, array("d", vals).tobytes()))
            if len(vals) >= 256:  # a key on every 4th point: 1,024 points
                del open_chunks[k]
        con.executemany(
            "INSERT INTO chunk (run_id, key, first, vals) VALUES (1, ?, ?, ?)"
            " ON CONFLICT (run_id, key, first) DO UPDATE SET vals = excluded.vals",
            rows,
        )
        con.execute("COMMIT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000, help="points in W1")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each layout")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    started = time.monotonic()
    raw: dict = {}
    with scratch("div-layouts-", args.tmp, args.keep) as work:
        rows = [*bench_w1(work, args.points, args.repeat, raw), *bench_live(work, raw)]
    print(f"$ {command_line()}")
    print(table(rows, floor="before"), end="")
    write_json("layouts.json", rows, started=started, raw=raw)


if __name__ == "__main__":
    main()
