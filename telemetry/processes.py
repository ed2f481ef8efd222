"""Telling whether a process of this machine is still there: for leases, heartbeats, folders.

A pid alone does not say who a process is: pids are given again (32,768 of them by default),
so a supervisor's is kept with its start time (`started_at`), and a live process with that pid
that started at another time is another process.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

STOP_WAIT = 2.0  # seconds a stopped group's processes are given to be gone


def this_host() -> str:
    return socket.gethostname()


def alive_here(host: str, pid: int, started: int | None = None) -> bool | None:
    """Whether process pid of host is alive (and, given when it started, is the process that
    started then); None when host is another machine, which a pid cannot tell about."""
    if host != this_host():
        return None
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, under another user
        pass
    stat = _stat(pid)
    if stat is None:
        return True  # no /proc to tell more by
    state, _, since = stat
    if state in (b"Z", b"X"):  # killed, not yet waited for by its parent: its pid answers
        return False
    return started is None or since == started


def started_at(pid: int) -> int | None:
    """When process pid of this machine started, in clock ticks since the machine booted (the
    22nd field of /proc/PID/stat); None when there is no such process, or no /proc."""
    stat = _stat(pid)
    return stat[2] if stat is not None else None


def _stat(pid: int) -> tuple[bytes, int, int] | None:
    """A process's state, process group and start time, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # After the command's name, in parentheses (which may hold anything), field 3 on.
            fields = f.read().rpartition(b")")[2].split()
        return fields[0], int(fields[2]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def stop_group(host: str, pgid: int, started: int | None) -> bool:
    """SIGKILL every process of process group pgid of this machine, the group a run's command
    was started in (it leads it): unless a live process with that pid started at another time
    than the command did, and so is not the run's. Returns once none of them is left running
    (or after STOP_WAIT), so nothing they write comes after; False when nothing was stopped.

    While any process of the group is there, the group's id is not given to another process;
    once it is empty, killing it finds nothing."""
    if host != this_host() or pgid <= 1 or started is None:
        return False
    leader = _stat(pgid)
    if leader is not None and leader[1] == pgid and leader[2] != started:
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    deadline = time.monotonic() + STOP_WAIT
    while _group_running(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return True


def _group_running(pgid: int) -> bool:
    """Whether any process of the group is still running (not a zombie waiting to be reaped)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pgid and stat[0] not in (b"Z", b"X"):
                return True
    return False


def booted_at() -> datetime:
    """When this machine started: a process heard from before then has gone, whatever its pid
    is now (pids start again after a restart)."""
    since = time.clock_gettime(time.CLOCK_BOOTTIME)
    return datetime.now(UTC) - timedelta(seconds=since)
