"""A remote run's files arriving on the server: what a client sends of its telemetry file and
its log, appended to the server's own copy of each, every byte exactly once.

The ingester then tails the server's telemetry.jsonl as it tails any run's: one code path for
the line rules. Each chunk names the offset in the client's file it starts at:
- a chunk that repeats bytes the server has is trimmed to what is new;
- a chunk that starts past what the server has is refused with Behind, naming the server's
  offset, and the client sends again from there.

The telemetry copy is the client's file byte for byte, so its size is the offset. The log is
masked again here (with the org's secrets as the server knows them), so its copy's size is
not the client's: how many of the client's bytes it holds is kept in `.upload/log.json`,
with the masker's held-back end (a secret may be split across two chunks). That record and
the append are made exactly once together: the record says what is about to be appended
(where, how long, its digest) before the append, and says it is done after; a server killed
between the two finds the append in the log, or not, the next time.

All of a run's uploads (and its end) take one lock, so two racing for a run never interleave;
every writer of the log takes the log's own lock (services.log_append), so a note the ingester
adds never lands inside an upload.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from telemetry.errors import Refused
from telemetry.masking import Masker, StreamMasker
from telemetry.models import Run

MAX_CHUNK = 1024 * 1024  # the most one upload may carry; the client sends at most this
UPLOADS = ".upload"  # beside the run's files: a folder, so no ingester takes it for telemetry
KINDS = ("telemetry", "log")

TOO_LARGE = (
    "a chunk is at most {limit:,} bytes and this one is {size:,}; send the file in smaller "
    "pieces, each naming the offset it starts at"
)
ENDED = "{run} has ended: it takes no more bytes of its {kind}"


class Behind(Refused):
    """The chunk starts past what the server has: send again from `offset`."""

    def __init__(self, kind: str, offset: int):
        super().__init__(
            f"the server has {offset:,} bytes of this {kind}; send again from offset {offset}"
        )
        self.kind = kind
        self.offset = offset


@dataclass
class LogRecord:
    """How much of the client's log the server's copy holds, and what the masker holds back."""

    received: int = 0
    held: str = ""  # base64: the end of what was received that could start a secret
    covered: int = 0
    pending: dict | None = field(default=None)  # an append under way: at, length, digest, next

    def stream(self, masker: Masker) -> StreamMasker:
        stream = StreamMasker(masker)
        stream.held, stream.covered = base64.b64decode(self.held), self.covered
        return stream


def folder(run: Run) -> Path:
    return run.folder / UPLOADS


@contextmanager
def locked(run: Run) -> Iterator[None]:
    """The run's upload lock: held by one request at a time, on this machine's every process."""
    path = folder(run)
    path.mkdir(exist_ok=True)
    with open(path / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def telemetry_size(run: Run) -> int:
    try:
        return os.path.getsize(run.telemetry_path)
    except FileNotFoundError:
        return 0


def offsets(run: Run) -> dict[str, int]:
    """What the server has of each of the client's files, in the client's bytes."""
    with locked(run):
        return {"telemetry": telemetry_size(run), "log": _log_record(run).received}


def receive(run: Run, kind: str, offset: int, data: bytes, masker: Masker) -> tuple[int, int]:
    """Append what is new in a chunk of the client's file that starts at offset; (the server's
    offset after it, in the client's bytes; how many new bytes it took). Behind when the chunk
    starts past what the server has; Refused once the run has ended and the chunk is new."""
    with locked(run):
        if kind == "telemetry":
            have = telemetry_size(run)
        else:
            record = _log_record(run)
            have = record.received
        if offset > have:
            raise Behind(kind, have)
        new = data[have - offset :]
        if not new:
            return have, 0
        if run.exit_code is not None:
            raise Refused(ENDED.format(run=run.name, kind=kind))
        if kind == "telemetry":
            with open(run.telemetry_path, "ab") as f:
                f.write(new)
        else:
            stream = record.stream(masker)
            masked = stream.feed(new)
            after = LogRecord(have + len(new), _b64(stream.held), stream.covered)
            _append_log(run, masked, record, after)
        return have + len(new), len(new)


def complete(run: Run, *, telemetry: int, log: int, masker: Masker) -> None:
    """Before a run is ended: Behind unless the server has every byte the client says its
    files hold; then the log's held-back end goes in, masked."""
    with locked(run):
        have = telemetry_size(run)
        if have != telemetry:
            raise Behind("telemetry", have)
        record = _log_record(run)
        if record.received != log:
            raise Behind("log", record.received)
        if record.held:
            _append_log(run, record.stream(masker).flush(), record, LogRecord(record.received))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _record_path(run: Run) -> Path:
    return folder(run) / "log.json"


def _write_record(run: Run, record: LogRecord) -> None:
    path = _record_path(run)
    draft = path.with_suffix(".draft")
    draft.write_text(json.dumps(asdict(record)))
    os.replace(draft, path)  # whole, or not at all


def _log_record(run: Run) -> LogRecord:
    """The record, with an append a killed server left under way settled: done if the log
    holds its bytes where it was to put them, else undone (and any part of it cut off)."""
    try:
        record = LogRecord(**json.loads(_record_path(run).read_text()))
    except FileNotFoundError:
        return LogRecord()
    pending = record.pending
    if pending is None:
        return record
    with open(run.log_path, "r+b") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.seek(pending["at"])
        written = log.read(pending["length"])
        if hashlib.sha256(written).hexdigest() == pending["digest"]:
            settled = LogRecord(**pending["next"])
        else:
            if os.fstat(log.fileno()).st_size <= pending["at"] + pending["length"]:
                log.truncate(pending["at"])  # a part of it, and nothing after: cut off
            settled = LogRecord(record.received, record.held, record.covered)
    _write_record(run, settled)
    return settled


def _append_log(run: Run, masked: bytes, before: LogRecord, after: LogRecord) -> None:
    """Append masked bytes to the log and record `after` in place of `before` (settled),
    exactly once even if killed between the two."""
    if not masked:
        _write_record(run, after)
        return
    with open(run.log_path, "ab") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        at = os.fstat(log.fileno()).st_size
        before.pending = {
            "at": at,
            "length": len(masked),
            "digest": hashlib.sha256(masked).hexdigest(),
            "next": asdict(after),
        }
        _write_record(run, before)
        log.write(masked)
        log.flush()
    _write_record(run, after)
