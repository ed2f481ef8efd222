"""A run's log as people read it: as written, for `div log` and `div run`, and followed until
the run ends. (The Log tab's rendering, as a terminal draws it, is terminal.py's.)"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import BinaryIO

from telemetry.models import Run

LOG_POLL = 0.1  # seconds between looks at a followed log


def follow(
    run: Run, out: BinaryIO | Printer, *, follow: bool, wait: Callable[[float], object] = time.sleep
) -> None:
    """Print the log's bytes as written, as cat would (a progress bar still draws in a
    terminal), and with follow, keep printing them until the run has ended. `wait` is how to
    pass the time between looks: one that returns early when the run ends saves the wait."""
    with open(run.log_path, "rb") as log:
        while True:
            run.refresh_from_db(fields=["status"])
            ended = not run.is_live
            data = log.read()
            if data:
                out.write(data)
                out.flush()
            if not follow or ended:
                return
            wait(LOG_POLL)


def reader_gone(stream) -> None:
    """The reader of stream went away (`| head`): what is still buffered for it, and anything
    written later, goes nowhere, quietly."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError):
        pass


class Printer:
    """Writes to a stream until its reader goes away, then to nowhere: for output that is
    not the point of what runs (`div run … | head -1` takes the run's name and goes)."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.gone = False

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except BrokenPipeError:
            self.gone = True
            reader_gone(self.stream)

    def flush(self) -> None:
        pass  # each write is flushed, or its reader is gone
