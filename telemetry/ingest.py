"""The ingester: tails every open run's telemetry.jsonl into the database.

Shaped like a long-running worker: `tail_once()` does one pass and says whether it found work,
`run_forever()` sleeps when idle and stops cleanly. Each batch is stored in one transaction with
the file offset it reached, so a killed ingester resumes where it stopped.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import socket
import stat
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from telemetry import homes, processes, services, supervision, tailing
from telemetry.encryption import SecretsKeyError
from telemetry.errors import Refused
from telemetry.lines import BOM, MAX_LINE_BYTES, Reason
from telemetry.masking import Masker
from telemetry.models import Run
from telemetry.tailing import Mark, Verdict
from telemetry.tally import Tally

log = logging.getLogger("divergent.ingest")

CHUNK_BYTES = 4 * 1024 * 1024
IDLE_SECONDS = 0.2  # a line is stored within about this long of its newline
LEASE = timedelta(seconds=15)
SECRETS_TTL = 5.0  # seconds a run's masker is trusted before secrets are read again
CANNOT_LOCK = "cannot write {path} ({why}); point DIVERGENT_HOME at a folder this user can write"
REAP_SECONDS = 1.0  # how often the live runs' supervisors are looked at


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
        self.sealed_orgs: set[int] = set()  # orgs whose secrets this key cannot decrypt
        self.reaped_at = -REAP_SECONDS
        self.trouble: dict[int | None, str] = {}  # what went wrong last, said once until it clears

    def open_runs(self):
        # Only this home's: another home's files are not here to read (homes.py).
        runs = Run.objects.filter(telemetry_closed=False, home__in=homes.these())
        if self.run_ids is not None:
            runs = runs.filter(pk__in=self.run_ids)
        return runs.order_by("pk")

    def tail_once(self) -> bool:
        """One pass over the open runs; True when something was stored.

        Every second or so it also ends as lost the live runs whose supervisor has gone, so
        their telemetry is read to the end and closed. A database that refuses (locked past its
        timeout, out of reach) is said once, in one line, and the pass is tried again later.
        """
        try:
            if time.monotonic() - self.reaped_at >= REAP_SECONDS:
                self.reaped_at = time.monotonic()
                supervision.reap_live(self.run_ids)
            runs = list(self.open_runs())
        except DatabaseError as e:
            self.complain(None, "ingesting paused: the database refused ({why}); trying again", e)
            return False
        self.trouble.pop(None, None)
        found = False
        for run in runs:
            try:
                if not self.hold(run):
                    continue
                found |= self.tail_run(run)
                self.trouble.pop(run.pk, None)
            except Exception as e:
                # One run's trouble must not stop the others; its tally is re-read next time.
                self.complain(
                    run.pk, f"ingesting {run} failed ({{why}}); retrying from its stored offset", e
                )
                self.forget(run.pk)
        return found

    def complain(self, key: int | None, message: str, error: Exception) -> None:
        """One line, once until the trouble changes or clears: never a traceback a pass."""
        said = message.format(why=str(error).strip() or type(error).__name__)
        if self.trouble.get(key) != said:
            self.trouble[key] = said
            log.warning(said)

    def hold(self, run: Run) -> bool:
        """Take or renew the run's lease: each run is ingested by one process at a time, and
        only by a process of the home that holds its files."""
        now = timezone.now()
        until = self.leases.get(run.pk)
        if until is not None and until - now > LEASE / 2:
            return True
        if not homes.holds(run):
            return False
        free = Q(lease_owner=self.owner) | Q(lease_owner="") | Q(lease_until__lt=now)
        if run.lease_owner and _dead_here(run.lease_owner):
            free |= Q(lease_owner=run.lease_owner)
        # A run made before homes were recorded becomes this home's, which holds its folder.
        home = homes.home_id()
        taken = (
            Run.objects.filter(pk=run.pk, home__in=[home, ""])
            .filter(free)
            .update(lease_owner=self.owner, lease_until=now + LEASE, home=home)
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

    def masker(self, run: Run) -> Masker | None:
        """The org's masker, read again every SECRETS_TTL seconds; None while its secrets cannot
        be read (said once in the server's log): its runs wait rather than go unmasked."""
        read_at, masker = self.maskers.get(run.org_id, (0.0, None))
        if masker is None or time.monotonic() - read_at > SECRETS_TTL:
            try:
                masker = services.masker_for(run.org_id)
            except SecretsKeyError as e:
                if run.org_id not in self.sealed_orgs:
                    log.error("telemetry of org %s waits: %s", run.org, e)
                self.sealed_orgs.add(run.org_id)
                self.maskers.pop(run.org_id, None)
                return None
            self.sealed_orgs.discard(run.org_id)
            self.maskers[run.org_id] = (time.monotonic(), masker)
        return masker

    def tail_run(self, run: Run) -> bool:
        ended = not run.is_live
        with TelemetryFile.open(run.telemetry_path, run.folder) as current:
            seen = current.seen(run.offset, wanted=ended or current.size > run.offset)
            verdict = tailing.judge(
                inode=run.telemetry_inode, head=run.telemetry_head, offset=run.offset, seen=seen
            )
            if verdict is Verdict.UNREADABLE:
                return self.unreadable(run, seen.problem, ended)
            if verdict is Verdict.SAME:
                if tailing.first_look(inode=run.telemetry_inode, offset=run.offset):
                    older = _beside(run, current, None, tailing.written_after(run.telemetry_after))
                    if older:  # rotated before the first look: the oldest is read first
                        return self.move_on(run, None, older, current, verdict=None, ended=ended)
                return self.read(run, current, ended, last=True)
            return self.rotated(run, verdict, current, ended)

    def read(
        self, run: Run, source: TelemetryFile, ended: bool, *, last: bool, done: bool = False
    ) -> bool:
        """Read on from the run's offset in source: the run's file (last), or a rotated one,
        which is complete at its end once the run has ended or its writer has gone on (done)."""
        tally = self.tallies[run.pk]
        offset, in_long_line, size = run.offset, run.in_long_line, source.size
        mark = Mark(
            inode=source.inode or run.telemetry_inode,
            head=run.telemetry_head,
            after=run.telemetry_after,
        )
        if offset >= size:
            if ended and last:
                services.ingest_batch(
                    run=run, tally=tally, offset=offset, in_long_line=False, close=True, mark=mark
                )
                self.forget(run.pk)
                return True
            if run.telemetry_problem:  # readable again: a new problem is noted anew
                services.ingest_batch(
                    run=run,
                    tally=tally,
                    offset=offset,
                    in_long_line=in_long_line,
                    close=False,
                    mark=mark,
                )
            return False

        chunk = source.read(offset, self.chunk_bytes)
        if offset == 0 and chunk.startswith(BOM):
            # Stepped over once, as the file's first bytes: the first line is then any other.
            services.ingest_batch(
                run=run, tally=tally, offset=len(BOM), in_long_line=False, close=False, mark=mark
            )
            return True
        complete = (ended or done) and offset + len(chunk) >= size
        lines, consumed, in_long_line = split_chunk(
            chunk, complete=complete, in_long_line=in_long_line
        )
        if not consumed:
            return False  # a line waiting for its newline
        masker = self.masker(run)
        if masker is None:
            return False
        for raw in lines:
            tally.add(masker.read_line(raw))
        offset += consumed
        if not mark.head or tailing.head_length(offset) > tailing.head_length(run.offset):
            mark = replace(mark, head=source.head(offset))
        close = last and complete and offset >= size
        services.ingest_batch(
            run=run, tally=tally, offset=offset, in_long_line=in_long_line, close=close, mark=mark
        )
        if close:
            self.forget(run.pk)
        return True

    def rotated(self, run: Run, verdict: Verdict, current: TelemetryFile, ended: bool) -> bool:
        """Another file at the path, or the same one cut short, or a rotated file being read:
        read the rest of the old one first when it is found beside it (renamed, or copied),
        then each rotated file written after it, oldest first, then the path's file from its
        start. Each step is stored with its offset, so a killed ingester resumes at the same
        place."""
        with TelemetryFile.previous(run) as previous:
            than = (
                previous.order
                if previous is not None
                else tailing.written_after(run.telemetry_after)
            )
            newer = _beside(run, current, previous, than)
            # A newer file with something in it: the writer has gone on, and the old one is done.
            gone_on = ended or bool(newer) or current.size > 0
            if previous is not None and previous.size > run.offset:
                return self.read(run, previous, ended, last=False, done=gone_on)
            if previous is not None and not gone_on:
                return False  # nothing in the new file yet: a writer may still append to the old
            return self.move_on(run, previous, newer, current, verdict=verdict, ended=ended)

    def move_on(
        self,
        run: Run,
        previous: TelemetryFile | None,
        newer: list[tailing.Rotated],
        current: TelemetryFile,
        *,
        verdict: Verdict | None,
        ended: bool,
    ) -> bool:
        """From the file read to its end (previous; None when it has gone, or at the first
        look) on to the next: the oldest newer rotated file, or the path's file. A file that
        cannot be read (gone, compressed) is said in the one note and counted."""
        compressed = list(itertools.takewhile(lambda f: f.compressed, newer))
        following = newer[len(compressed)] if len(newer) > len(compressed) else None
        if following is None and not current.inode and not ended:
            return False  # nothing at the path yet to go on to
        tally = self.tallies[run.pk]
        for _ in compressed:
            tally.drop(Reason.ROTATED_AWAY, mention=False)
        if previous is None and verdict is not None:
            tally.drop(Reason.ROTATED_AWAY, mention=False)
        notes = []
        if verdict is not None or compressed:
            notes.append(
                tailing.rotation_note(
                    verdict,
                    name=run.telemetry_path.name,
                    offset=run.offset,
                    previous=previous.name if previous is not None else None,
                    following=following.name if following is not None else None,
                    compressed=[f.name for f in compressed],
                )
            )
        after = max(
            [previous.mtime_ns if previous is not None else run.telemetry_after]
            + [f.mtime_ns for f in compressed]
        )
        if following is None and not current.inode:
            # The run has ended with nothing at the path: what was read is all there is.
            mark = Mark(inode=run.telemetry_inode, head=run.telemetry_head, after=after)
            services.ingest_batch(
                run=run,
                tally=tally,
                offset=run.offset,
                in_long_line=False,
                close=True,
                mark=mark,
                notes=notes,
            )
            self.forget(run.pk)
            return True
        inode = following.inode if following is not None else current.inode
        services.ingest_batch(
            run=run,
            tally=tally,
            offset=0,
            in_long_line=False,
            close=False,
            mark=Mark(inode=inode, after=after),
            notes=notes,
        )
        return True

    def unreadable(self, run: Run, problem: str, ended: bool) -> bool:
        """Noted in the run's log and counted once each time the path becomes unreadable (or
        unreadable another way); an ended run's telemetry is closed all the same."""
        tally = self.tallies[run.pk]
        notes = []
        if problem != run.telemetry_problem:
            tally.drop(Reason.UNREADABLE, mention=False)
            notes.append(tailing.unreadable_note(name=run.telemetry_path.name, problem=problem))
        if not notes and not ended:
            return False
        services.ingest_batch(
            run=run,
            tally=tally,
            offset=run.offset,
            in_long_line=run.in_long_line,
            close=ended,
            mark=Mark(
                inode=run.telemetry_inode,
                head=run.telemetry_head,
                problem=problem,
                after=run.telemetry_after,
            ),
            notes=notes,
        )
        if ended:
            self.forget(run.pk)
        return True

    def run_forever(self, stop: threading.Event, *, until_closed: bool = False) -> None:
        """Tail until stop is set (or, with until_closed, until every run it follows is closed)."""
        while not stop.is_set():
            started = time.monotonic()
            close_old_connections()
            if until_closed and self.all_closed():
                return
            self.tail_once()
            # Paced even when busy: a batch a pass keeps the tabs' messages to a few a second,
            # and a pass that read a full chunk has taken longer than this anyway.
            stop.wait(max(0.0, IDLE_SECONDS - (time.monotonic() - started)))

    def all_closed(self) -> bool:
        try:
            return not self.open_runs().exists()
        except DatabaseError:
            return False  # said by the pass that follows


class TelemetryFile:
    """A run's telemetry file opened for one pass: never followed out of the run's folder,
    never a FIFO that would block the ingester, read at offsets on one descriptor."""

    def __init__(self, path: Path, fd: int | None = None, problem: str = ""):
        self.path = path
        self.name = path.name
        self.fd = fd
        self.problem = problem
        info = os.fstat(fd) if fd is not None else None
        self.inode = f"{info.st_dev}:{info.st_ino}" if info else ""
        self.size = info.st_size if info else 0
        self.mtime_ns = info.st_mtime_ns if info else 0

    @property
    def order(self) -> tuple[int, float, str]:
        return tailing.order(self.name, self.mtime_ns)

    @classmethod
    @contextmanager
    def open(cls, path: Path, folder: Path):
        opened = cls._open(path, folder)
        try:
            yield opened
        finally:
            if opened.fd is not None:
                os.close(opened.fd)

    @classmethod
    def _open(cls, path: Path, folder: Path) -> TelemetryFile:
        try:
            if os.path.islink(path):
                real = Path(os.path.realpath(path))
                if not real.is_relative_to(folder.resolve()):
                    return cls(path, problem=f"is a link to {real}, outside the run's folder")
            kind = _not_a_file(os.stat(path).st_mode)
            if kind:
                return cls(path, problem=f"is {kind}")
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return cls(path)  # not written yet (or a link to nothing yet)
        except OSError as e:  # said after "it", as the other problems are: "it is a FIFO"
            return cls(path, problem=f"cannot be opened ({(e.strerror or str(e)).lower()})")
        kind = _not_a_file(os.fstat(fd).st_mode)
        if kind:  # it changed between the look and the open
            os.close(fd)
            return cls(path, problem=f"is {kind}")
        return cls(path, fd)

    @classmethod
    @contextmanager
    def previous(cls, run: Run):
        """The file the run's offset counts bytes of, found beside the path: the same inode
        (renamed), else the same first bytes and at least the bytes read (copied); the newest
        such. None when it is gone (deleted, compressed, moved elsewhere)."""
        found = None
        try:
            found = cls._previous(run)
            yield found
        finally:
            if found is not None and found.fd is not None:
                os.close(found.fd)

    @classmethod
    def _previous(cls, run: Run) -> TelemetryFile | None:
        skip = {run.telemetry_path.name, run.log_path.name, run.files_path.name}
        try:
            names = sorted(p for p in os.listdir(run.folder) if p not in skip)
        except OSError:
            return None
        same_head = []
        for name in names:
            path = run.folder / name
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
                candidate = cls(path, os.open(path, os.O_RDONLY | os.O_NONBLOCK))
            except OSError:
                continue
            if candidate.inode == run.telemetry_inode:
                for other in same_head:
                    os.close(other.fd)
                return candidate
            if (
                run.telemetry_head
                and candidate.size >= run.offset
                and candidate.head(run.offset) == run.telemetry_head
            ):
                same_head.append(candidate)
            else:
                os.close(candidate.fd)
        if not same_head:
            return None
        same_head.sort(key=lambda f: f.mtime_ns)
        for other in same_head[:-1]:
            os.close(other.fd)
        return same_head[-1]

    def seen(self, offset: int, *, wanted: bool) -> tailing.Seen:
        """What is at the path; its fingerprint only when there is something to read (wanted)
        and the file has the bytes it covers."""
        head = ""
        if wanted and offset and self.size >= tailing.head_length(offset):
            head = self.head(offset)
        return tailing.Seen(problem=self.problem, inode=self.inode, size=self.size, head=head)

    def head(self, offset: int) -> str:
        return tailing.fingerprint(os.pread(self.fd, tailing.head_length(offset), 0))

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)


def _beside(
    run: Run,
    current: TelemetryFile,
    previous: TelemetryFile | None,
    than: tuple[int, float, str],
) -> list[tailing.Rotated]:
    """The rotated files beside the run's path newer than `than`, oldest first: neither the
    path's file nor the one read last."""
    name = run.telemetry_path.name
    known = {current.inode, previous.inode if previous is not None else ""}
    try:
        names = [n for n in os.listdir(run.folder) if tailing.is_rotated(n, of=name)]
    except OSError:
        return []
    found = []
    for other in names:
        try:
            info = os.lstat(run.folder / other)
        except OSError:
            continue
        inode = f"{info.st_dev}:{info.st_ino}"
        if stat.S_ISREG(info.st_mode) and inode not in known:
            found.append(tailing.Rotated(other, inode, info.st_mtime_ns))
    return tailing.unread(found, than=than)


def _not_a_file(mode: int) -> str:
    """What a path is when it is not a regular file, as the note says it: "a directory"."""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


class Follower:
    """What `div telemetry -f` and `div log -f` do between looks, so they always come to an end
    even with nothing else running: end the run as lost once its supervisor has gone and, for
    telemetry, read an ended run's file to its end themselves when no `div serve` or
    `div ingest` runs on this machine."""

    def __init__(self, run: Run, *, read: bool):
        self.run = run
        self.read = read
        self.looked = -REAP_SECONDS
        self.ingester: Ingester | None = None

    def step(self) -> None:
        """One look; a database out of reach (restarted, failed over) is looked at again at
        the next, on a new connection: what follows goes on."""
        try:
            self._step()
        except DatabaseError as e:
            log.debug("following %s waits for the database: %s", self.run, e)
            connection.close()

    def _step(self) -> None:
        self.run.refresh_from_db(fields=[*supervision.CHECKED[1:], "points"])  # as judged
        if self.run.is_live and time.monotonic() - self.looked >= REAP_SECONDS:
            self.looked = time.monotonic()
            supervision.reap([self.run])
        if (
            self.read
            and self.run.telemetry_unread
            and homes.holds(self.run)
            and not ingester_running()
        ):
            self.ingester = self.ingester or Ingester(run_ids=[self.run.pk])
            self.ingester.tail_once()


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
    homes.folder_made(settings.DIVERGENT_HOME)
    try:
        f = open(lock_path(), "a")
    except OSError as e:  # a read-only home, or another user's: one line, not a traceback
        why = (e.strerror or str(e)).lower()
        raise Refused(CANNOT_LOCK.format(path=lock_path(), why=why)) from None
    with f:
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
