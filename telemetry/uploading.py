"""A remote run's files on their way to the server, from the machine that runs it.

The run's telemetry file and its (masked) log are written here, in the client's own
DIVERGENT_HOME, as a local run's are; the uploader sends their new bytes, each chunk naming the
offset it starts at (receiving.py says what the server does with it). What the server has
acknowledged of each file is kept on disk beside them (`.upload/state.json`), so the run goes
on when the network or the server goes away, and whatever is left is sent once it is back:
by `div run` itself, retrying with a back-off, or later by `div sync`.

The process that uploads a run holds `.upload/lock` while it does: `div sync` never races the
`div run` that is still uploading, and finds the run free once that process has gone.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from telemetry import processes
from telemetry.errors import Refused
from telemetry.masking import Masker
from telemetry.receiving import KINDS, MAX_CHUNK
from telemetry.remote import Api, Conflict, NotFound, ServerError, Unreachable
from telemetry.shipping import format_size

UPLOADS = ".upload"
FILES = {"telemetry": "telemetry.jsonl", "log": "log"}
# The log first: what the command printed before a line of telemetry is on the server before
# any note the server's ingester adds to the log about that line.
ORDER = ("log", "telemetry")
PASS_SECONDS = 0.1  # a line written is sent within about this long
HEARTBEAT_SECONDS = 5.0
BACKOFF_FIRST = 0.25  # seconds before trying again once the server is away; doubling
BACKOFF_MOST = 15.0
PROGRESS_EVERY = 0.1  # seconds between redraws of the progress line
# Attached, `div run` tries its end again only while the server answered this recently: a
# failure within a catch-up is tried again, an outage at the end is left to `div sync`.
ATTACHED_PATIENCE = 5.0

KEPT = "div: {why}; {run} is kept here: div sync {run} uploads the rest"
AHEAD = (
    "the server has {have:,} bytes of {run}'s {kind} and this machine {size:,}: "
    "they are not the same run's; nothing more of it is sent"
)
BUSY = "{run} is being uploaded by its div run (pid {pid}) now, which catches up by itself"
OTHER_SERVER = "{run} was made on {made}, not on {url}; div login {made} to upload it"
NOT_HERE = "there is no {run} made from this machine in {home}; div sync uploads the runs there"
ENDLESS = "the server keeps asking for more of {run} than this machine has"
GONE = (
    "the server at {url} has no {run} of this token's user (deleted, or another server now "
    "answers there)"
)
NO_END = (
    "{run}'s div run was stopped before its command ended: what it wrote is uploaded, and the "
    "server shows it as lost"
)


_saving = threading.Lock()  # State.save's


@dataclass
class State:
    """What the server has acknowledged of a run made from this machine, and how it ended."""

    url: str
    run: str
    sent: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    exit_code: int | None = None
    ended: bool = False  # the server has taken the end: every byte, and the exit code

    @classmethod
    def load(cls, folder: Path) -> State:
        return cls(**json.loads((folder / UPLOADS / "state.json").read_text()))

    def save(self, folder: Path) -> None:
        path = folder / UPLOADS / "state.json"
        # One writer at a time: the uploader's thread and the supervisor's both save, and a
        # draft shared by two would be renamed away from under one of them.
        with _saving:
            path.parent.mkdir(exist_ok=True)
            draft = path.with_suffix(".draft")
            draft.write_text(json.dumps(asdict(self)))
            os.replace(draft, path)  # whole or not at all: a killed client keeps the last one


@contextmanager
def holding(folder: Path, run: str) -> Iterator[None]:
    """The run's upload lock, or Refused naming the process that has it."""
    path = folder / UPLOADS / "lock"
    path.parent.mkdir(exist_ok=True)
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise Refused(BUSY.format(run=run, pid=lock.read().strip() or "?")) from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        yield


class Progress:
    """`12.5 MB of 22 MB sent, 8.1 MB/s` redrawn on one line of a terminal; nothing at all
    when the stream is not a terminal."""

    def __init__(self, run: str, stream: TextIO | None = None):
        self.run = run
        self.stream = stream if stream is not None else sys.stderr
        self.on = _is_terminal(self.stream)
        self.started: float | None = None
        self.sent = self.total = 0
        self.drawn_at = 0.0

    def begin(self, total: int) -> None:
        if self.started is None:
            self.started, self.sent, self.total = time.monotonic(), 0, total

    def advance(self, sent: int, left: int) -> None:
        if self.started is None:
            return
        self.sent += sent
        self.total = max(self.total, self.sent + left)
        if time.monotonic() - self.drawn_at >= PROGRESS_EVERY:
            self.draw()

    def draw(self) -> None:
        if not self.on or self.started is None:
            return
        self.drawn_at = time.monotonic()
        rate = self.sent / max(self.drawn_at - self.started, 1e-3)
        line = (
            f"div: {self.run}: {format_size(self.sent)} of {format_size(self.total)} sent,"
            f" {format_size(int(rate))}/s"
        )
        self.stream.write(f"\r{line}\x1b[K")
        self.stream.flush()

    def end(self, *, keep: bool) -> None:
        """The catching up is over: its last figures stay on their line (keep), or go."""
        if self.on and self.started is not None:
            self.draw()
            self.stream.write("\n" if keep else "\r\x1b[K")
            self.stream.flush()
        self.started = None


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Uploader:
    """Sends a run's new bytes and says it is there; `div run`'s thread, or `div sync`."""

    def __init__(
        self,
        folder: Path,
        api: Api,
        state: State,
        *,
        supervising: bool,
        progress: Progress,
        secrets: dict[str, str] | None = None,
    ):
        self.folder = folder
        self.api = api
        self.state = state
        self.progress = progress
        self.supervising = supervising
        self.host, self.pid = processes.this_host(), os.getpid()
        self.headers = {"Divergent-Supervisor": f"{self.pid}@{self.host}"} if supervising else {}
        self.secrets = dict(secrets or {})
        self.beaten_at = 0.0
        self.heard_at = time.monotonic()  # when the server last answered (it made the run)
        self.away: Exception | None = None  # why the server cannot be reached now
        self.refused: Refused | None = None  # why uploading stopped for good

    @property
    def run(self) -> str:
        return self.state.run

    def masker(self) -> Masker:
        """The org's secrets as the server last said them: a secret set meanwhile is masked."""
        return Masker(self.secrets.values())

    def pending(self) -> int:
        return sum(max(0, self._size(kind) - self.state.sent[kind]) for kind in KINDS)

    def _size(self, kind: str) -> int:
        try:
            return os.path.getsize(self.folder / FILES[kind])
        except FileNotFoundError:
            return 0

    def send(self, *, final: bool) -> int:
        """Send what is new of each file; the bytes sent. While the command runs (not final),
        telemetry goes a whole line at a time: the server's copy never ends inside a line, so
        a run judged lost meanwhile loses no line to a cut."""
        with self.found():
            return sum(self._send(kind, final) for kind in ORDER)

    @contextmanager
    def found(self) -> Iterator[None]:
        """A 404 from the server, said as what it means for this run."""
        try:
            yield
        except NotFound:
            raise Refused(GONE.format(url=self.api.url, run=self.run)) from None

    def _send(self, kind: str, final: bool) -> int:
        path = self.folder / FILES[kind]
        sent = 0
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            while self.state.sent[kind] < size:
                at = self.state.sent[kind]
                chunk = os.pread(f.fileno(), min(MAX_CHUNK, size - at), at)
                if kind == "telemetry" and not final:
                    cut = chunk.rfind(b"\n") + 1
                    if cut:
                        chunk = chunk[:cut]
                    elif len(chunk) < MAX_CHUNK:
                        break  # a line still being written (one past MAX_CHUNK goes in pieces)
                try:
                    answer = self.api.request(
                        "POST",
                        f"/api/runs/{self.run}/files/{kind}/",
                        query={"offset": at},
                        body=chunk,
                        headers=self.headers,
                    )
                    now = answer.json().get("offset")
                except Conflict as e:
                    now = e.data.get("offset")  # the server's: send again from there
                self.heard_at = time.monotonic()
                if not isinstance(now, int) or now > size:
                    raise Refused(AHEAD.format(have=now, run=self.run, kind=kind, size=size))
                self.state.sent[kind] = now
                self.state.save(self.folder)
                sent += max(0, now - at)
                self.progress.advance(max(0, now - at), self.pending())
        return sent

    def beat(self) -> None:
        """Say the supervisor is there; the answer has the org's secrets as they are now."""
        self.beaten_at = time.monotonic()
        with self.found():
            answer = self.api.send(
                "POST", f"/api/runs/{self.run}/heartbeat/", {"host": self.host, "pid": self.pid}
            )
        self.heard_at = time.monotonic()
        if isinstance(answer.get("secrets"), dict):
            self.secrets = answer["secrets"]

    def end(self) -> None:
        """Report how the command ended, once every byte is sent; again after sending what
        the server says it still lacks."""
        for _ in range(3):
            self.send(final=True)
            sizes = {kind: self.state.sent[kind] for kind in KINDS}
            try:
                with self.found():
                    self.api.send(
                        "POST",
                        f"/api/runs/{self.run}/end/",
                        {"exit_code": self.state.exit_code, **sizes},
                    )
            except Conflict as e:
                kind, have = e.data.get("kind"), e.data.get("offset")
                if kind not in KINDS or not isinstance(have, int):
                    raise
                self.state.sent[kind] = min(have, self.state.sent[kind])  # sent again from there
                continue
            self.state.ended = True
            self.state.save(self.folder)
            return
        raise Refused(ENDLESS.format(run=self.run))

    def follow(self, stop: threading.Event) -> None:
        """Send as the files grow until stop is set, beating every few seconds; through an
        outage, try again backing off to every BACKOFF_MOST seconds, and catch up once the
        server is back (with progress on a terminal). A refusal stops it: said at the end."""
        wait = 0.0
        backoff = BACKOFF_FIRST
        while not stop.wait(wait):
            try:
                if self.away is not None:
                    self.progress.begin(self.pending())
                self.send(final=False)
                if self.supervising and time.monotonic() - self.beaten_at >= HEARTBEAT_SECONDS:
                    self.beat()
            except (Unreachable, ServerError) as e:
                self.away, wait = e, backoff
                backoff = min(backoff * 2, BACKOFF_MOST)
                continue
            except Refused as e:
                self.refused = e
                return
            if self.away is not None:
                self.away = None
                self.progress.end(keep=False)
            wait, backoff = PASS_SECONDS, BACKOFF_FIRST

    def finish(self, *, patience: float | None = None) -> bool:
        """After the command: send the rest and report the end, trying again through an outage
        or a failing server, backing off as follow does, until the server takes it; with
        patience, only while the server has answered within that many seconds, and not at all
        when it was already out of reach as the command ended and answers nothing now. A
        refusal stops it at once. False when it did not: the run is kept here for `div sync`,
        as the one line on stderr (kept()) says."""
        backoff = BACKOFF_FIRST
        started, out_of_reach = time.monotonic(), self.away is not None
        while self.refused is None:
            try:
                if self.away is not None and self.pending():  # catching up: show how it goes
                    self.progress.begin(self.pending())
                self.end()
                self.progress.end(keep=self.away is not None)
                return True
            except (Unreachable, ServerError) as e:
                self.away = e
                if patience is not None:
                    silent = time.monotonic() - self.heard_at >= patience
                    if silent or (out_of_reach and self.heard_at < started):
                        self.refused = e
                        break
                time.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MOST)
            except Refused as e:
                self.refused = e
        self.progress.end(keep=False)
        sys.stderr.write(self.kept() + "\n")
        return False

    def kept(self) -> str:
        """The one line of a run the uploader left to `div sync`, and why."""
        return KEPT.format(why=self.refused, run=self.run)
