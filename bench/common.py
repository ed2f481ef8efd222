"""What the benchmark scripts share: timing, child processes, SQLite sizes and the summary table.

No Django here: the parent process never sets Django up, so every figure that needs it is taken
in a fresh child process with its own DIVERGENT_HOME.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
MB = 1_000_000  # sizes are reported in decimal megabytes, RSS included

_START = time.monotonic()


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the summary table."""
    print(f"[{time.monotonic() - _START:7.1f}s] {message}", file=sys.stderr, flush=True)


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def spread(samples: Sequence[float]) -> str:
    """min..max of the samples, to show how noisy a median is."""
    return f"{min(samples):.3f}..{max(samples):.3f}"


def django_env(home: Path) -> dict[str, str]:
    """The environment of a child that sets Django up on its own DIVERGENT_HOME."""
    env = dict(os.environ)
    env["DIVERGENT_HOME"] = str(home)
    env["DJANGO_SETTINGS_MODULE"] = "divergent.settings"
    # A DATABASE_URL in the caller's shell would point every child at the same server.
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    return env


def manage(args: Sequence[str], home: Path, *, stdout: Path | None = None) -> float:
    """Run `python manage.py ARGS` on HOME and return its wall time, start-up included."""
    cmd = [sys.executable, str(ROOT / "manage.py"), *args]
    with open(stdout or os.devnull, "wb") as out:
        start = time.perf_counter()
        done = subprocess.run(
            cmd, cwd=ROOT, env=django_env(home), stdout=out, stderr=subprocess.PIPE
        )
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.decode(errors='replace')}")
    return seconds


def child(script: Path, args: Sequence[str], home: Path | None = None) -> dict:
    """Run SCRIPT --child ARGS in a fresh interpreter; it prints one JSON object on stdout."""
    cmd = [sys.executable, str(script), "--child", *args]
    env = django_env(home) if home is not None else dict(os.environ)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.decode(errors='replace')}")
    return json.loads(done.stdout.splitlines()[-1])


def interleaved(
    repeat: int, *measures: Callable[[], float], warm_up: bool = True
) -> list[list[float]]:
    """Samples of each measure, taken in turns (a, b, a, b, ...).

    Taking them in turns spreads the machine's noise over all of them alike; one untimed round
    first fills the page cache and Python's bytecode cache, which a user's second run has too.
    """
    if warm_up:
        for measure in measures:
            measure()
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(repeat):
        for i, measure in enumerate(measures):
            samples[i].append(measure())
    return samples


def run_folder(home: Path, run: str) -> Path:
    """A run's folder in a home: runs/run-7/ on the server, and on a GPU machine in the folder
    of the server it was made on (runs/http-127.0.0.1-8000/run-7/)."""
    (folder,) = [path for path in (home / "runs").glob(f"**/{run}") if path.is_dir()]
    return folder


def sqlite_bytes(db: Path) -> int:
    """The database's size on disk: the file plus its -wal, after a truncating checkpoint."""
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def place(source: Path, target: Path) -> None:
    """Put SOURCE at TARGET: a hard link when possible (instant for an 800 MB file), else a copy.

    The ingester only reads the file, so a link is as good as a copy.
    """
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def rss_mb(kib: int) -> float:
    """ru_maxrss and VmHWM are KiB on Linux."""
    return kib * 1024 / MB


@dataclass
class Row:
    """A row of a summary. met is None for a figure reported without a target."""

    figure: str
    value: str
    floor: str
    ratio: float | None
    target: str
    met: bool | None


def table(rows: Sequence[Row], floor: str = "floor") -> str:
    """The summary, aligned like `div telemetry`'s tables; FLOOR names the third column."""
    header = ("figure", "value", floor, "ratio", "target", "met?")
    cells = [
        (
            r.figure,
            r.value,
            r.floor,
            "" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target,
            "—" if r.met is None else "yes" if r.met else "NO",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    return "".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() + "\n"
        for line in [header, *cells]
    )


def machine() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def command_line() -> str:
    """How this benchmark was run, as the summary's first line says it."""
    return " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def write_json(name: str, rows: Sequence[Row], *, started: float, raw: dict, **extra) -> None:
    """bench/out/NAME: the table with every sample behind it; stderr says where it went."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    seconds = time.monotonic() - started
    payload = {
        "machine": machine(),
        "rows": [asdict(r) for r in rows],
        "command": command_line(),
        "seconds": seconds,
        **extra,
        "raw": raw,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    progress(f"done in {seconds:.0f} s; wrote {path.relative_to(ROOT)}")


@contextmanager
def scratch(prefix: str, tmp: str | None, keep: bool) -> Iterator[Path]:
    """A scratch directory for one benchmark, removed at the end unless kept."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))
    try:
        yield work
    finally:
        if keep:
            progress(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
