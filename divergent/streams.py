"""The standard streams of a `div` process: always there, and stdout's failures told apart.

A stream the shell closed (`div telemetry run-7 >&-`) is None to Python; here it becomes
os.devnull, so a closed stdout stops only the printing. A write to stdout that fails (its
reader gone, a full disk) raises StdoutFailed rather than the OSError that a command's own
files raise, so `div` can say which one failed, and `div run` can stop printing and go on.
"""

from __future__ import annotations

import errno
import io
import os
import select
import sys


class StdoutFailed(Exception):
    """Writing to stdout failed; `reader_gone` when its reader went away (`| head -1`)."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))
        self.error = error

    @property
    def reader_gone(self) -> bool:
        return self.error.errno == errno.EPIPE


class _Guarded(io.RawIOBase):
    """stdout's file descriptor, its failures raised as StdoutFailed."""

    def __init__(self, fd: int):
        self.fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data) -> int:
        # All of it: unbuffered (PYTHONUNBUFFERED), the text layer writes here directly, and
        # would not write again what a short write left.
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):
            try:
                written += os.write(self.fd, view[written:])
            except BlockingIOError:  # a stdout made non-blocking by whoever shares it
                select.select([], [self.fd], [])
            except OSError as e:
                raise StdoutFailed(e) from None
        return written


def _guarded(stream: io.TextIOWrapper) -> bool:
    layer = stream.buffer
    return isinstance(layer, _Guarded) or isinstance(getattr(layer, "raw", None), _Guarded)


def ready() -> None:
    """Each standard stream there (os.devnull for one the shell closed, so nothing this
    process opens later takes its descriptor), and stdout's failures raised as StdoutFailed."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is None:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115  (for the process)
    out = sys.stdout
    if not isinstance(out, io.TextIOWrapper) or _guarded(out):
        return
    out.flush()
    unbuffered = not isinstance(out.buffer, io.BufferedWriter)  # PYTHONUNBUFFERED, python -u
    guarded = _Guarded(out.fileno())
    sys.stdout = io.TextIOWrapper(
        guarded if unbuffered else io.BufferedWriter(guarded),
        encoding=out.encoding,
        errors=out.errors,
        line_buffering=out.line_buffering,
        write_through=out.write_through,
    )
