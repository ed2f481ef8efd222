"""How much a Telemetry socket may have sent that its tab has not drawn yet: flow control.

An awaited send only hands a message to the server, which buffers what the client has not
read (daphne's transport does): a client that stops reading would grow the server's memory
with every point sent to it. So every points message carries an `ack` token, the tab sends
the token back once it has drawn the message, and a socket sends more points only while what
it has sent unacknowledged stays under a window of bytes. Points it holds back stay in the
database, to be read once the tab catches up, or read from the REST API by a tab that fell
too far behind (`behind`).

Pure: no Django, no I/O; the consumer does the sending.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Iterable, Iterator

import orjson

# A points message is at most this long, unless it holds a single point (which is under 4 KiB
# as a line, and about as much stored).
PAGE_BYTES = 256 * 1024
# Sent and not yet acknowledged, a socket stops sending points once it reaches this, so it
# never has more than this and one message in flight.
WINDOW_BYTES = 1024 * 1024
# A tab this many points short of the run's last is closed and reads the rest from the REST
# API: the series there are downsampled, a fraction of the points' bytes. About what the tab
# re-reads after anyway (static/telemetry/tab.js, TAIL_REFETCH).
MAX_BEHIND = 5000


def points_message(points_json: bytes, ack: str) -> str:
    """The text of a points message: {"type": "points", "points": [...], "ack": "..."}."""
    return (
        b'{"type":"points","points":' + points_json + b',"ack":"' + ack.encode() + b'"}'
    ).decode()


def new_token() -> str:
    """An ack token: random, so that only a client that read a message can acknowledge it."""
    return secrets.token_urlsafe(6)


ENVELOPE = len(points_message(b"", new_token()))  # a message's bytes besides its points


Page = tuple[bytes, int]  # a points message's JSON list, and the last seq in it


def pages(points: Iterable[tuple[int, dict]], limit: int | None = None) -> Iterator[Page]:
    """(seq, data) pairs as the JSON lists of points messages, with the last seq of each: each
    list at most `limit` bytes (by default, what keeps its message within PAGE_BYTES) unless it
    is one point. Encoded as they are asked for: a caller that stops early pays only for the
    pages it took."""
    limit = PAGE_BYTES - ENVELOPE if limit is None else limit
    parts: list[bytes] = []
    size = 1  # of the list so far: "[", then each part and the comma or "]" after it
    last = 0
    for seq, data in points:
        part = orjson.dumps({"seq": seq, "data": data})
        if parts and size + len(part) + 1 > limit:
            yield b"[" + b",".join(parts) + b"]", last
            parts, size = [], 1
        parts.append(part)
        size += len(part) + 1
        last = seq
    if parts:
        yield b"[" + b",".join(parts) + b"]", last


class Window:
    """The points messages a socket has sent and its tab has not acknowledged."""

    def __init__(self, limit: int = WINDOW_BYTES):
        self.limit = limit
        self.in_flight: deque[tuple[str, int, int]] = deque()  # (token, bytes, last seq)
        self.unacked = 0  # bytes
        self.drawn = 0  # the last seq the tab is known to have

    def room(self) -> bool:
        return self.unacked < self.limit

    def sent(self, token: str, size: int, last: int) -> None:
        self.in_flight.append((token, size, last))
        self.unacked += size

    def ack(self, token: str) -> bool:
        """The tab has drawn the message with this token, and so every one before it; False
        for a token this socket has nothing in flight for."""
        if not any(t == token for t, _, _ in self.in_flight):
            return False
        while self.in_flight:
            t, size, last = self.in_flight.popleft()
            self.unacked -= size
            self.drawn = max(self.drawn, last)
            if t == token:
                return True
        return True  # not reached: the token was in flight

    def behind(self, last: int, max_behind: int = MAX_BEHIND) -> bool:
        """Whether the tab is too far short of the run's last seq to catch up on the socket."""
        return last - self.drawn > max_behind


# ---- a socket that carries several runs: a comparison's ----------------------------------------


def run_points_message(run: str, points_json: bytes, ack: str) -> str:
    """A points message of a socket that carries several runs, saying whose points they are:
    {"type": "points", "run": "run-3", "points": [...], "ack": "..."}."""
    head = b'{"type":"points","run":"' + run.encode() + b'","points":'
    return (head + points_json + b',"ack":"' + ack.encode() + b'"}').decode()


# What a page of such a message may hold, so that with its run named it stays within PAGE_BYTES.
RUN_PAGE_BYTES = PAGE_BYTES - len(run_points_message("run-" + "9" * 18, b"", new_token()))


class RunsWindow(Window):
    """A Window for a socket that carries several runs: one window of bytes for them all (the
    page acknowledges their messages in the order it drew them), and how far each run is drawn,
    so that each is judged behind on its own."""

    def __init__(self, limit: int = WINDOW_BYTES):
        super().__init__(limit)
        self.whose: dict[str, tuple[int, int]] = {}  # a token in flight -> (run, its last seq)
        self.drawn_of: dict[int, int] = {}

    def sent_of(self, run: int, token: str, size: int, last: int) -> None:
        self.sent(token, size, 0)
        self.whose[token] = (run, last)

    def ack(self, token: str) -> bool:
        freed = [t for t, _, _ in self.in_flight]
        if not super().ack(token):
            return False
        for t in freed:
            run, last = self.whose.pop(t)
            self.drawn_of[run] = max(self.drawn_of.get(run, 0), last)
            if t == token:
                break
        return True

    def run_behind(self, run: int, last: int, max_behind: int = MAX_BEHIND) -> bool:
        return last - self.drawn_of.get(run, 0) > max_behind
