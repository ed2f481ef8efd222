"""A run's supervisor and its heartbeat; a run whose supervisor has gone ends as lost.

The supervisor is the process running the command: the attached `div run`, or the
`div supervise` that `div run --detach` starts. It says who it is (host and pid) and beats
every few seconds. Whoever looks at a live run can then tell whether its supervisor has gone:
the ingester (always there in `div serve` and `div ingest`, and in `div run` when nothing else
ingests), and `div telemetry -f`, `div log -f` and the runs list, which must come to an end
even when no ingester runs. A lost run's telemetry is then read to its end and closed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from telemetry import homes, processes, services
from telemetry.models import Run

log = logging.getLogger("divergent.supervision")

HEARTBEAT_SECONDS = 5.0
# Silence that makes a run of another machine lost; a run whose supervisor never started
# (a detached run's `div supervise` that did not come up) is lost this long after it was made.
LOST_AFTER = timedelta(seconds=30)


def gone(
    *,
    heartbeat: datetime | None,
    host: str,
    pid: int | None,
    created: datetime,
    now: datetime,
    alive: Callable[[str, int, int | None], bool | None],
    booted: datetime,
    started: int | None = None,
    remote_after: timedelta | None = None,
) -> bool:
    """Whether a live run's supervisor has gone: the rule, in one place.

    On this machine the process decides: gone when no process with its pid is alive, or one is
    that started at another time than the supervisor did (started: the pid was given again),
    or when the machine has restarted since the last heartbeat (pids start again). The live
    supervisor keeps the run however late its heartbeat, since it may be waiting on a locked
    database to record how the run ended. Of another machine only the heartbeat can tell: gone
    after LOST_AFTER of silence. A run whose supervisor never spoke is judged by when it was
    made.

    A remote run (remote_after given: its `div` reports over the API, retrying through
    outages) is judged by its silence alone, however its host is named: gone once it has not
    been heard from for remote_after.
    """
    if remote_after is not None:
        return now - (heartbeat or created) > remote_after
    if heartbeat is None or pid is None:
        return now - created > LOST_AFTER
    here = alive(host, pid, started)
    if here is not None:
        return not here or heartbeat < booted
    return now - heartbeat > LOST_AFTER


def supervisor_gone(run: Run) -> bool:
    return gone(
        heartbeat=run.heartbeat,
        host=run.supervisor_host,
        pid=run.supervisor_pid,
        started=run.supervisor_started,
        created=run.created,
        now=timezone.now(),
        alive=processes.alive_here,
        booted=processes.booted_at(),
        remote_after=timedelta(seconds=settings.REMOTE_LOST_AFTER) if run.remote else None,
    )


def reap(runs: Iterable[Run]) -> list[Run]:
    """End as lost each live run whose supervisor has gone, its command stopped first (on the
    machine that ran it); the runs it ended."""
    lost = []
    for run in runs:
        if run.is_live and homes.holds(run) and supervisor_gone(run):
            stop_command(run)
            if services.run_lose(run=run):
                lost.append(run)
    return lost


def stop_command(run: Run) -> bool:
    """Stop what is left of a lost run's command: its process group, killed (SIGKILL) as
    GitHub Actions' runner ends a job's processes, so that nothing writes to its telemetry file
    after it is read to its end and closed. Only on the machine that ran it, only while the
    group's leader is the command that started then, and never after a restart (its pids
    mean nothing since). True when something was stopped."""
    if run.remote or run.command_pid is None or run.heartbeat is None:
        return False
    if run.heartbeat < processes.booted_at():
        return False
    return processes.stop_group(run.supervisor_host, run.command_pid, run.command_started)


def reap_live(run_ids: list[int] | None = None) -> list[Run]:
    """reap() over the live runs of this home (or those of them named), read fresh: a lost
    run's note goes into its log, which only its own home holds."""
    runs = Run.objects.filter(
        telemetry_closed=False, status=Run.Status.RUNNING, home__in=homes.these()
    )
    if run_ids is not None:
        runs = runs.filter(pk__in=run_ids)
    return reap(runs.only(*CHECKED))


CHECKED = (
    "pk",
    "status",
    "created",
    "started",
    "heartbeat",
    "supervisor_host",
    "supervisor_pid",
    "supervisor_started",
    "command_pid",
    "command_started",
    "telemetry_closed",
    "remote",
    "home",
)


class Heartbeat:
    """The supervisor's beat: says who supervises the run at once, then every few seconds
    from a thread of its own, until stopped. A beat the database refuses (locked, gone) is
    tried again at the next one: the pid already tells this machine the supervisor is there."""

    def __init__(self, run: Run, *, every: float = HEARTBEAT_SECONDS):
        self.run_id = run.pk
        self.every = every
        self.host = processes.this_host()
        self.pid = os.getpid()
        self.started = processes.started_at(self.pid)
        self.command: tuple[int, int | None] | None = None
        self.stopped = threading.Event()
        self.soon = threading.Event()  # beat now, not at the next interval
        self.thread = threading.Thread(target=self._beat_until_stopped, daemon=True)

    def start(self) -> Heartbeat:
        self.beat()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.soon.set()
        if self.thread.is_alive():
            self.thread.join()

    def running(self, pid: int) -> None:
        """The command has started as process pid: said at once (from the heartbeat's thread,
        never holding up the command's output), so that it is stopped should this supervisor
        be killed before its next beat."""
        self.command = (pid, processes.started_at(pid))
        self.soon.set()

    def beat(self) -> bool:
        try:
            services.run_heartbeat(
                run_id=self.run_id,
                host=self.host,
                pid=self.pid,
                started=self.started,
                command=self.command,
            )
        except DatabaseError as e:
            log.debug("the heartbeat of run-%s waits for the database: %s", self.run_id, e)
            connection.close()  # a connection the database dropped is made anew next time
            return False
        return True

    def _beat_until_stopped(self) -> None:
        try:
            while True:
                self.soon.wait(self.every)
                self.soon.clear()
                if self.stopped.is_set():
                    return
                self.beat()
        finally:
            connection.close()
