"""Remote runs: a file uploaded through the API against the same file ingested locally, and a
remote run's line written to its point drawn in the Telemetry tab.

    python bench/remote.py [--points 200000] [--repeat 3] [--lines 100]

One `div serve` on a fresh DIVERGENT_HOME (SQLite), and a GPU machine's `div` beside it: its
own DIVERGENT_HOME, a token, DIVERGENT_URL on loopback, and a DATABASE_URL where nothing
listens. Each round runs the same command twice, taken in turns: `div run` on the server's own
home (local), and `div run` from the GPU machine's (remote, its files uploaded). The command
copies a prepared N-line telemetry file into DIVERGENT_TELEMETRY_PATH and notes when it has;
the figure is from then until the server has stored the run's last point (telemetry closed),
read straight from SQLite every 10 ms. Then latency.py's measure, on a run launched from the
GPU machine. Prints progress on stderr, the table on stdout; bench/out/remote.json has every
sample. Targets from issue 7 ("A run on any machine").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import latency
from common import (
    MB,
    ROOT,
    Row,
    command_line,
    django_env,
    interleaved,
    median,
    progress,
    run_folder,
    scratch,
    spread,
    table,
    write_json,
)
from tab import serving, write_run_file

RATIO_MAX = 1.3
P50_MAX_MS = 500
P95_MAX_MS = 1000

# The training script of the ingest figure: the whole file at once, then when it was written.
COPIER = """\
import os, shutil, sys, time
with open(sys.argv[1], "rb") as source, open(os.environ["DIVERGENT_TELEMETRY_PATH"], "ab") as f:
    shutil.copyfileobj(source, f, 1024 * 1024)
open("written-at", "w").write(repr(time.time()))
"""


def div(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "divergent", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )


def gpu_machine(work: Path, url: str, token: str) -> dict:
    """A GPU machine's environment: its own home, the server's address and a token; no
    database (nothing listens where DATABASE_URL points)."""
    home = work / "gpu"
    home.mkdir()
    return {
        **django_env(home),
        "DIVERGENT_URL": url,
        "DIVERGENT_TOKEN": token,
        "DATABASE_URL": "postgres://div@127.0.0.1:9/nowhere",
        "XDG_CONFIG_HOME": str(home / "config"),
    }


def token_for(home: Path) -> str:
    made = div(django_env(home), "token", "create", "--user", "admin", "--name", "bench")
    if made.returncode != 0:
        raise RuntimeError(f"div token create failed:\n{made.stderr}")
    return made.stdout.strip()


def ingested(env: dict, project: Path, source: Path, server_home: Path, files_home: Path) -> dict:
    """One `div run` of the copier: seconds from the file written to its last point stored,
    and to the command's div run done (for a remote run, every byte uploaded and the end
    reported)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--", sys.executable]
        + ["copier.py", str(source)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    name = process.stdout.readline().strip()
    if not name.startswith("run-"):
        process.wait()
        raise RuntimeError(f"div run printed {name!r}:\n{process.stderr.read()}")
    closed_at = done_at = None
    while closed_at is None:
        status, closed = latency.run_status(server_home, name)
        now = time.time()
        if done_at is None and process.poll() is not None:
            done_at = now
        if closed and status != "running":
            closed_at = now
        time.sleep(0.01)
    process.wait()
    done_at = done_at or time.time()
    if process.returncode != 0:
        raise RuntimeError(
            f"div run of {name} exited {process.returncode}:\n{process.stderr.read()}"
        )
    written = float((run_folder(files_home, name) / "files" / "written-at").read_text())
    return {"run": name, "stored": closed_at - written, "done": done_at - written}


def bench_ingest(args, work: Path, server_home: Path, gpu: dict, raw: dict) -> list[Row]:
    source = work / "telemetry.jsonl"
    size = write_run_file(source, args.points)
    progress(f"wrote {args.points:,} lines ({size / MB:.1f} MB) to {source.name}")
    project = work / "copier"
    project.mkdir()
    (project / "copier.py").write_text(COPIER)
    samples: dict[str, list[dict]] = {"local": [], "remote": []}

    def local() -> float:
        taken = ingested(django_env(server_home), project, source, server_home, server_home)
        samples["local"].append(taken)
        progress(f"local {taken['run']}: stored in {taken['stored']:.2f} s")
        return taken["stored"]

    def remote() -> float:
        taken = ingested(gpu, project, source, server_home, Path(gpu["DIVERGENT_HOME"]))
        samples["remote"].append(taken)
        progress(
            f"remote {taken['run']}: stored in {taken['stored']:.2f} s, uploaded and ended"
            f" in {taken['done']:.2f} s"
        )
        return taken["stored"]

    here, there = interleaved(args.repeat, local, remote)
    raw["ingest"] = {"points": args.points, "bytes": size, **samples}
    ratio = median(there) / median(here)
    uploaded = [s["done"] for s in samples["remote"][-args.repeat :]]
    return [
        Row(
            f"{args.points:,} lines stored, remote",
            f"{median(there):.2f} s ({spread(there)})",
            f"local: {median(here):.2f} s ({spread(here)})",
            ratio,
            f"<= {RATIO_MAX}x",
            ratio <= RATIO_MAX,
        ),
        Row(
            "... of which uploaded and ended",
            f"{median(uploaded):.2f} s, {size / MB / median(uploaded):.0f} MB/s",
            "",
            None,
            "report",
            None,
        ),
    ]


def bench_latency(args, work: Path, server, server_home: Path, gpu: dict, raw: dict) -> list[Row]:
    project = latency.make_project(work)
    go, stop = work / "go", work / "stop"
    run = latency.launch_run(server_home, project, go, stop, args.lines, env=gpu)
    progress(f"launched {run} from the GPU machine (div run --detach)")
    try:
        page = latency.measure(server, server_home, run, go, args.lines)
    finally:
        stop.touch()
        if not latency.wait_for_end(server_home, run, timeout=30):
            progress(f"{run} had not ended 30 s after the stop file")
    written = latency.written_at(Path(gpu["DIVERGENT_HOME"]), run)
    lat = latency.latencies(written, page)
    if not lat["total"]:
        raise RuntimeError(f"the page drew none of the {len(written)} lines written")
    raw["latency"] = {"run": run, "written_ms": written, "page": page, "latency_ms": lat}
    rows = latency.rows_for(lat, args.lines, len(written), P50_MAX_MS, P95_MAX_MS)
    return [replace(row, figure=f"remote: {row.figure}") for row in rows]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000, help="lines in the ingest file")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds of each")
    parser.add_argument("--lines", type=int, default=100, help="lines of the latency run")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    raw: dict = {}
    with scratch("div-bench-remote-", args.tmp, args.keep) as work:
        server_home = work / "server"
        with serving(server_home, work / "serve.log") as server:
            gpu = gpu_machine(work, server.url, token_for(server_home))
            rows = bench_ingest(args, work, server_home, gpu, raw)
            rows += bench_latency(args, work, server, server_home, gpu, raw)
    print(f"$ {command_line()}")
    print(table(rows, floor="floor, or of which at the same percentile"), end="")
    load = {"before": load_before, "after": os.getloadavg()}
    print(
        f"load average (1 min) {load['before'][0]:.1f} before, {load['after'][0]:.1f} after,"
        f" on {os.cpu_count()} CPUs"
    )
    write_json("remote.json", rows, started=started, raw=raw, load_average=load)


if __name__ == "__main__":
    main()
