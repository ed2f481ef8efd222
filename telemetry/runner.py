"""Running a run's command: its environment, its masked log, how it ended."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from django.conf import settings
from django.db import connection

from telemetry import logs, services
from telemetry.ingest import Ingester, ingester_running
from telemetry.models import Run, Secret

_command: subprocess.Popen | None = None  # the command this process is running, if any


def environment(run: Run) -> dict[str, str]:
    env = dict(os.environ)
    env.update(Secret.objects.filter(org_id=run.org_id).values_list("name", "value"))
    env["DIVERGENT_TELEMETRY_PATH"] = str(run.telemetry_path)
    env["DIVERGENT_RUN"] = run.name
    return env


def execute(run: Run) -> int:
    """Run the command in the shipped folder, writing its masked output to the run's log.

    When no `div serve` or `div ingest` is tailing runs on this machine, the run's telemetry
    is ingested here, so `div telemetry` works with nothing else running.
    """
    masker = services.masker_for(run.org_id)
    stop = threading.Event()
    ingesting = None
    if not ingester_running():
        ingesting = threading.Thread(target=_ingest, args=(run.pk, stop), daemon=True)
        ingesting.start()

    global _command
    services.run_start(run=run)
    try:
        process = _command = subprocess.Popen(
            run.command,
            cwd=run.files_path,
            env=environment(run),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as e:
        services.log_append(run, f"div: cannot start {run.command[0]}: {e.strerror}\n")
        code = 127
    else:
        with open(run.log_path, "ab", buffering=0) as log:
            for line in process.stdout:
                log.write(masker.mask(line))
        code = process.wait()
        if code < 0:  # killed by a signal: report it as a shell does
            code = 128 - code
    services.run_finish(run=run, exit_code=code)
    if ingesting is not None:
        stop.set()  # the rest is stored now, without waiting out the ingester's pause
        ingesting.join()
    return code


def run_attached(run: Run, out: logs.Printer) -> int:
    """Supervise the run in this process, printing its log as it is written; returns the
    command's exit code. A reader that goes away stops only the printing: the command, its
    log and its telemetry go on to the end."""
    ended = {}
    supervising = threading.Thread(target=lambda: ended.update(code=execute(run)))
    supervising.start()
    # Waiting on the supervisor, not a clock: its end is noticed at once.
    logs.follow(run, out, follow=True, wait=supervising.join)
    supervising.join()
    return ended.get("code", 1)


def forward(signum: int, frame=None) -> None:
    """A signal handler: pass a stop on to the run's command, whose end is then recorded as
    any other (a run stopped by SIGTERM ends failed, with exit code 143)."""
    if _command is not None and _command.poll() is None:
        _command.send_signal(signum)


def _ingest(run_id: int, stop: threading.Event) -> None:
    try:
        ingester = Ingester(run_ids=[run_id])
        ingester.run_forever(stop, until_closed=True)
        # Stopped once the run has ended: store what is left and close its telemetry.
        while ingester.tail_once():
            pass
    finally:
        connection.close()


def detach(run: Run) -> subprocess.Popen:
    """Supervise the run from a process of its own, which goes on after this one returns."""
    return subprocess.Popen(
        [sys.executable, "-m", "divergent", "supervise", run.name],
        cwd=settings.BASE_DIR,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
