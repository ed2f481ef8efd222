"""Telling whether a process of this machine is still there: for leases, heartbeats, folders."""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime, timedelta


def this_host() -> str:
    return socket.gethostname()


def alive_here(host: str, pid: int) -> bool | None:
    """Whether process pid of host is alive; None when host is another machine, which a pid
    cannot tell about."""
    if host != this_host():
        return None
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, under another user
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process killed but not yet waited for by its parent: gone, though its pid answers."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"Z", b"X")


def booted_at() -> datetime:
    """When this machine started: a process heard from before then has gone, whatever its pid
    is now (pids start again after a restart)."""
    since = time.clock_gettime(time.CLOCK_BOOTTIME)
    return datetime.now(UTC) - timedelta(seconds=since)
