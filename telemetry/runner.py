"""Running a run's command: its environment, its masked log, how it ended."""

from __future__ import annotations

import codecs
import logging
import os
import subprocess
import sys
import threading
import time
from typing import TextIO

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from telemetry import services, supervision
from telemetry.ingest import Follower, Ingester, ingester_running
from telemetry.models import Run, Secret

LOG_POLL = 0.1  # seconds between looks at a followed log
END_RETRY_FIRST = 0.1  # seconds before recording how a run ended is tried again; doubling
END_RETRY_MOST = 5.0
END_RETRYING = "div: cannot record how {run} ended yet ({why}); trying again until it can"
END_STORED = "div: recorded how {run} ended"

log = logging.getLogger("divergent.runner")

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
    heartbeat = supervision.Heartbeat(run).start()
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
    end(run, code)
    heartbeat.stop()
    if ingesting is not None:
        ingesting.join()
    return code


def end(run: Run, code: int) -> None:
    """Record how the command ended, trying again until the database takes it: a database
    locked past its timeout, or out of reach for a while, must not leave the run running
    forever. The heartbeat goes on meanwhile, so the run is not taken for lost."""
    wait = END_RETRY_FIRST
    told = False
    while True:
        try:
            services.run_finish(run=run, exit_code=code)
            break
        except (OperationalError, InterfaceError) as e:
            if not told:
                log.warning(END_RETRYING.format(run=run.name, why=str(e).strip()))
                told = True
            connection.close()
            time.sleep(wait)
            wait = min(wait * 2, END_RETRY_MOST)
    if told:
        log.warning(END_STORED.format(run=run.name))


def forward(signum: int, frame=None) -> None:
    """A signal handler: pass a stop on to the run's command, whose end is then recorded as
    any other (a run stopped by SIGTERM ends failed, with exit code 143)."""
    if _command is not None and _command.poll() is None:
        _command.send_signal(signum)


def _ingest(run_id: int, stop: threading.Event) -> None:
    try:
        Ingester(run_ids=[run_id]).run_forever(stop, until_closed=True)
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


def follow_log(run: Run, out: TextIO, *, follow: bool, alive=lambda: False) -> None:
    """Print the log, and with follow, keep printing it until the run has ended."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    follower = Follower(run, read=False)
    with open(run.log_path, "rb") as log:
        while True:
            follower.step()  # a run whose supervisor has gone ends as lost: so does this
            ended = not run.is_live and not alive()
            text = decoder.decode(log.read(), final=ended)
            if text:
                out.write(text)
                out.flush()
            if not follow or ended:
                return
            time.sleep(LOG_POLL)
