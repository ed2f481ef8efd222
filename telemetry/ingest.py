"""The ingester: tails every open run's telemetry.jsonl into the database.

Shaped like a long-running worker: `tail_once()` does one pass and says whether it found work,
`run_forever()` sleeps when idle and stops cleanly. Each batch is stored in one transaction with
the file offset it reached, so a killed ingester resumes where it stopped.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from telemetry import processes, services
from telemetry.lines import MAX_LINE_BYTES, read_line
from telemetry.masking import Masker
from telemetry.models import Run
from telemetry.tally import Tally

log = logging.getLogger("divergent.ingest")

CHUNK_BYTES = 4 * 1024 * 1024
IDLE_SECONDS = 0.2  # a line is stored within about this long of its newline
LEASE = timedelta(seconds=15)
SECRETS_TTL = 5.0  # seconds a run's masker is trusted before secrets are read again


def split_chunk(
    chunk: bytes, *, complete: bool, in_long_line: bool
) -> tuple[list[bytes], int, bool]:
    """Bytes read from a run's offset -> (lines, bytes consumed, whether still inside a long line).

    Only lines whose newline has been written are taken, unless the file is complete (the run
    has ended and this chunk reaches its end): then the last line needs no newline. A line
    already past 4 KiB without its newline is taken at once (it will be dropped as too long)
    and the rest of it skipped, so no line is ever held whole in memory.
    """
    start = 0
    if in_long_line:
        newline = chunk.find(b"\n")
        if newline < 0:
            return [], len(chunk), not complete
        start = newline + 1
    lines: list[bytes] = []
    last = chunk.rfind(b"\n")
    if last >= start:
        lines = chunk[start:last].split(b"\n")
        start = last + 1
    tail = chunk[start:]
    if tail and complete:
        lines.append(tail)
        start = len(chunk)
    elif len(tail) > MAX_LINE_BYTES + 1:  # + 1: a CRLF line may be waiting for its \n
        lines.append(tail)
        return lines, len(chunk), True
    return lines, start, False


class Ingester:
    def __init__(self, *, run_ids: list[int] | None = None, chunk_bytes: int = CHUNK_BYTES):
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.run_ids = run_ids
        self.chunk_bytes = chunk_bytes
        self.leases: dict[int, object] = {}
        self.tallies: dict[int, Tally] = {}
        self.maskers: dict[int, tuple[float, Masker]] = {}

    def open_runs(self):
        runs = Run.objects.filter(telemetry_closed=False)
        if self.run_ids is not None:
            runs = runs.filter(pk__in=self.run_ids)
        return runs.order_by("pk")

    def tail_once(self) -> bool:
        """One pass over the open runs; True when something was stored."""
        found = False
        for run in self.open_runs():
            if not self.hold(run):
                continue
            try:
                found |= self.tail_run(run)
            except Exception:
                # One run's trouble must not stop the others; its tally is re-read next time.
                log.exception("ingesting %s failed; retrying from its stored offset", run)
                self.forget(run.pk)
        return found

    def hold(self, run: Run) -> bool:
        """Take or renew the run's lease: each run is ingested by one process at a time."""
        now = timezone.now()
        until = self.leases.get(run.pk)
        if until is not None and until - now > LEASE / 2:
            return True
        free = Q(lease_owner=self.owner) | Q(lease_owner="") | Q(lease_until__lt=now)
        if run.lease_owner and _dead_here(run.lease_owner):
            free |= Q(lease_owner=run.lease_owner)
        taken = (
            Run.objects.filter(pk=run.pk)
            .filter(free)
            .update(lease_owner=self.owner, lease_until=now + LEASE)
        )
        if not taken:
            self.forget(run.pk)
            return False
        if until is None:
            # Newly held: whatever another process stored before is the truth.
            run.refresh_from_db()
            self.tallies[run.pk] = services.tally_load(run=run)
        self.leases[run.pk] = now + LEASE
        return True

    def forget(self, run_id: int) -> None:
        self.leases.pop(run_id, None)
        self.tallies.pop(run_id, None)

    def masker(self, run: Run) -> Masker:
        read_at, masker = self.maskers.get(run.org_id, (0.0, None))
        if masker is None or time.monotonic() - read_at > SECRETS_TTL:
            masker = services.masker_for(run.org_id)
            self.maskers[run.org_id] = (time.monotonic(), masker)
        return masker

    def tail_run(self, run: Run) -> bool:
        tally = self.tallies[run.pk]
        # The stored offset only moves under this lease, so what open_runs() just read is current.
        offset, in_long_line = run.offset, run.in_long_line
        ended = not run.is_live
        try:
            size = os.stat(run.telemetry_path).st_size
        except FileNotFoundError:
            size = 0
        if offset >= size:
            if ended:
                services.ingest_batch(
                    run=run, tally=tally, offset=offset, in_long_line=False, close=True
                )
                self.forget(run.pk)
                return True
            return False

        with open(run.telemetry_path, "rb") as f:
            f.seek(offset)
            chunk = f.read(self.chunk_bytes)
        complete = ended and offset + len(chunk) >= size
        lines, consumed, in_long_line = split_chunk(
            chunk, complete=complete, in_long_line=in_long_line
        )
        if not consumed:
            return False  # a line waiting for its newline
        masker = self.masker(run)
        for raw in lines:
            tally.add(read_line(masker.mask(raw) if masker else raw))
        close = complete and offset + consumed >= size
        services.ingest_batch(
            run=run, tally=tally, offset=offset + consumed, in_long_line=in_long_line, close=close
        )
        if close:
            self.forget(run.pk)
        return True

    def run_forever(self, stop: threading.Event, *, until_closed: bool = False) -> None:
        """Tail until stop is set (or, with until_closed, until every run it follows is closed)."""
        while not stop.is_set():
            started = time.monotonic()
            close_old_connections()
            if until_closed and not self.open_runs().exists():
                return
            self.tail_once()
            # Paced even when busy: a batch a pass keeps the tabs' messages to a few a second,
            # and a pass that read a full chunk has taken longer than this anyway.
            stop.wait(max(0.0, IDLE_SECONDS - (time.monotonic() - started)))


def _dead_here(owner: str) -> bool:
    """Whether a lease's owner was a process of this machine that has gone: a killed ingester
    restarted here resumes at once instead of waiting out its old lease."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return pid.isdigit() and processes.alive_here(host, int(pid)) is False


def lock_path():
    return settings.DIVERGENT_HOME / "ingester.lock"


@contextmanager
def ingester_present():
    """Held by `div serve` and `div ingest` while they run: tells `div run` it need not ingest."""
    settings.DIVERGENT_HOME.mkdir(parents=True, exist_ok=True)
    with open(lock_path(), "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ingester_running() -> bool:
    """Whether a `div serve` or `div ingest` on this machine is tailing runs."""
    try:
        f = open(lock_path(), "a")
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False
