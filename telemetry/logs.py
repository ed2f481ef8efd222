"""A run's log as people read it: as written, for `div log` and `div run`, followed until the
run ends; and in pages, as written or as a terminal shows it (terminal.py), for the API."""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from divergent.streams import StdoutFailed
from telemetry import following
from telemetry.following import Look
from telemetry.ingest import Follower
from telemetry.models import Run
from telemetry.terminal import Screen, Span, last_state_start

LOG_POLL = 0.1  # seconds between looks at a followed log


def follow(
    run: Run,
    out: BinaryIO | Printer,
    *,
    follow: bool,
    wait: Callable[[float], object] = time.sleep,
    done: Callable[[], bool] | None = None,
) -> None:
    """Print the log's bytes as written, as cat would (a progress bar still draws in a
    terminal), and with follow, keep printing them until the run has ended. `wait` is how to
    pass the time between looks: one that returns early when the run ends saves the wait.
    `done`, when given, says when nothing more will be written (the supervisor in this
    process has finished, its ingester's notes included): the run's end is recorded before
    its ingester has drained the telemetry and written what it notes of it."""
    follower = Follower(run, read=False)
    with open(run.log_path, "rb") as log:

        def look() -> Look:
            follower.step()  # a run whose supervisor has gone ends as lost: so does this
            ended = not run.is_live if done is None else done()
            data = log.read()
            if data:
                out.write(data)
                out.flush()
            return Look.ENDED if ended else Look.GOING

        following.follow(look, follow=follow, pause=LOG_POLL, wait=wait)


def reader_gone(stream) -> None:
    """The reader of stream went away (`| head`): what is still buffered for it, and anything
    written later, goes nowhere, quietly."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError):
        pass


class Printer:
    """Writes to a stream until its reader goes away, or it fails otherwise (a full disk),
    then to nowhere: for output that is not the point of what runs (`div run … | head -1`
    takes the run's name and goes; the run goes on to its end)."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.gone = False

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, StdoutFailed):
            self.gone = True
            reader_gone(self.stream)

    def flush(self) -> None:
        pass  # each write is flushed, or its reader is gone


# ---- pages of the log, for the Log tab and the API -----------------------------------------

PAGE_BYTES = 256 * 1024
# What one request may read past the states of a line already written over: a progress bar of
# 100,000 updates is skipped to its last state in one request.
SCAN_BYTES = 32 * 1024 * 1024


def _read(path: Path, offset: int, size: int) -> bytes:
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            return log.read(size)
    except FileNotFoundError:
        return b""


def whole_text_end(data: bytes, *, full: bool) -> int:
    """Where to cut a page of log so no one is sent half a line, or half a character."""
    if full and b"\n" in data:
        return data.rfind(b"\n") + 1
    # A line longer than a page is sent in pieces, each ending on a whole UTF-8 character:
    # what the decoder holds back is the half one.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(data)
    return len(data) - len(decoder.getstate()[0])


def raw_page(path: Path, offset: int) -> tuple[str, int]:
    """The log's text from a byte offset, as written, and the offset after it."""
    data = _read(path, offset, PAGE_BYTES)
    cut = whole_text_end(data, full=len(data) == PAGE_BYTES)
    return data[:cut].decode("utf-8", errors="replace"), offset + cut


@dataclass
class ScreenPage:
    """A page of the log as a terminal shows it: whole lines, then the last state of the line
    being written (None when the page ends on a newline)."""

    lines: list[list[Span]]
    partial: list[Span] | None
    offset: int  # the next page starts here: after the whole lines, at the partial's line
    # (a line longer than a page: at its last state)
    more: bool  # the page was cut short: ask again at once


def screen_page(path: Path, offset: int, *, page: int = PAGE_BYTES) -> ScreenPage:
    data = _read(path, offset, page)
    scanned = 0
    # A line being rewritten (a progress bar) is read up to its last state: what its carriage
    # returns wrote over is never sent, however many updates it had.
    while b"\n" not in data and len(data) == page and scanned < SCAN_BYTES:
        start = last_state_start(data)
        if start == 0:
            break
        offset, scanned = offset + start, scanned + start
        data = _read(path, offset, page)

    screen = Screen()
    full = len(data) == page
    newline = data.rfind(b"\n") + 1
    text = data[:newline].decode("utf-8", errors="replace")
    lines = [screen.spans(line) for line in text.split("\n")[:-1]]
    tail, offset = data[newline:], offset + newline
    partial = None
    if newline and full:
        pass  # the page ends inside a line: the next page starts at it, and skips to its state
    elif tail and full and last_state_start(tail) == 0:
        # One state longer than a page: shown as a line of its own, in pieces.
        cut = whole_text_end(tail, full=False)
        lines.append(screen.spans(tail[:cut].decode("utf-8", errors="replace")))
        offset += cut
    elif tail:
        # Read again from its start next time, not from its last state, so the colours set
        # before its carriage returns are still on when it is drawn, as on a terminal; a line
        # longer than a page is skipped to its last state as above.
        partial = screen.spans(tail.decode("utf-8", errors="replace"))
    return ScreenPage(lines, partial, offset, more=full)
