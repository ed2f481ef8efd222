"""Running a run's command: its environment, its masked log, how it ended."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from telemetry import logs, services, supervision
from telemetry.encryption import SecretsKeyError
from telemetry.errors import Refused
from telemetry.ingest import SECRETS_TTL, Ingester, ingester_running
from telemetry.masking import MIN_LENGTH, Masker, StreamMasker, too_short
from telemetry.models import Run

READ_BYTES = 64 * 1024  # the most of the command's output copied to the log at once
NO_COMMAND = (
    "div supervise reads the run's command on stdin, as a JSON list; div run --detach starts it"
)
SHORT_SECRET = (
    f"div: the secret {{name}} is shorter than {MIN_LENGTH} characters and is not masked; "
    "div secrets set {org} {name} gives it a longer value\n"
)
END_RETRY_FIRST = 0.1  # seconds before recording how a run ended is tried again; doubling
END_RETRY_MOST = 5.0
END_RETRYING = "div: cannot record how {run} ended yet ({why}); trying again until it can"
END_STORED = "div: recorded how {run} ended"

log = logging.getLogger("divergent.runner")

_command: subprocess.Popen | None = None  # the command this process is running, if any
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # what a supervisor's command gets too
PR_SET_PDEATHSIG = 1
try:  # Linux's: a process is sent a signal when the thread that started it ends
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
except (OSError, AttributeError):
    _prctl = None


# div's own settings, which its runs' commands are never given: the server's keys and
# addresses (SECRET_KEY forges sessions, DIVERGENT_SECRETS_KEY opens a dump of the secrets,
# DATABASE_URL carries a password, DIVERGENT_TOKEN is a GPU machine's API token), which a
# command printing its environment would put in a log every member of its org reads. Every
# variable named DIVERGENT_..., but those a run is given (environment()), and these:
OWN_SETTINGS = frozenset(
    {
        "SECRET_KEY",
        "DATABASE_URL",
        "REDIS_URL",
        "ALLOWED_HOSTS",
        "SECURE_PROXY_SSL_HEADER",
        "DJANGO_SETTINGS_MODULE",
    }
)
OWN_PREFIX = "DIVERGENT_"


def environment(name: str, telemetry_path: Path, secrets: dict[str, str]) -> dict[str, str]:
    """The command's environment: this process's, less div's own settings, with the org's
    secrets, the telemetry path and the run's name."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in OWN_SETTINGS and not key.startswith(OWN_PREFIX)
    }
    env.update(secrets)
    env["DIVERGENT_TELEMETRY_PATH"] = str(telemetry_path)
    env["DIVERGENT_RUN"] = name
    return env


def short_secret_notes(secrets: dict[str, str], org: str) -> str:
    """What the log says at its start of each secret too short to be masked."""
    return "".join(
        SHORT_SECRET.format(name=name, org=org)
        for name, value in secrets.items()
        if too_short(value)
    )


def execute(run: Run, command: list[str]) -> int:
    """Run the command in the shipped folder, writing its masked output to the run's log.

    `command` is the command itself: the run keeps it masked.

    When no `div serve` or `div ingest` is tailing runs on this machine, the run's telemetry
    is ingested here, so `div telemetry` works with nothing else running.
    """
    secrets = services.secrets_of(run.org_id)
    notes = short_secret_notes(secrets, run.org.name)
    if notes:
        services.log_append(run, notes)
    stop = threading.Event()
    ingesting = None
    if not ingester_running():
        ingesting = threading.Thread(target=_ingest, args=(run.pk, stop), daemon=True)
        ingesting.start()

    heartbeat = supervision.Heartbeat(run).start()
    services.run_start(run=run)
    code = run_command(
        command,
        cwd=run.files_path,
        env=environment(run.name, run.telemetry_path, secrets),
        log_path=run.log_path,
        masker=Masker(secrets.values()),
        reread=lambda: services.masker_for(run.org_id),
        started=heartbeat.running,
        own_group=True,
    )
    end(run, code)
    heartbeat.stop()
    if ingesting is not None:
        stop.set()  # the rest is stored now, without waiting out the ingester's pause
        ingesting.join()
    return code


def run_attached(run: Run, out: logs.Printer, command: list[str]) -> int:
    """Supervise the run in this process, printing its log as it is written; returns the
    command's exit code. A reader that goes away stops only the printing: the command, its
    log and its telemetry go on to the end."""
    ended = {}
    done = threading.Event()

    def supervise() -> None:
        try:
            ended["code"] = execute(run, command)
        finally:
            done.set()

    supervising = threading.Thread(target=supervise)
    supervising.start()
    # Waiting on the supervisor, not a clock: its end is noticed at once. An event, not
    # Thread.join: a join cut short by Ctrl-C leaves the thread abandoned at exit, and the
    # run's end unrecorded. Ctrl-C stops the printing and is passed on to the command (in a
    # process group of its own, it is not in the terminal's), whose end is recorded before
    # div run exits (130); SIGTERM and SIGHUP are passed on as div supervise does.
    with passing_on_signals():
        try:
            logs.follow(run, out, follow=True, wait=done.wait, done=done.is_set)
        except KeyboardInterrupt:
            done.wait()
            raise
        done.wait()
    return ended.get("code", 1)


@contextmanager
def passing_on_signals(signals: tuple[int, ...] = PASSED_ON):
    """While an attached supervisor runs: the signals a terminal would have sent its command's
    group go to that group too; Ctrl-C then also stops the printing (KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def pass_on(signum: int, frame) -> None:
        forward(signum)
        if signum == signal.SIGINT:
            signal.default_int_handler(signum, frame)

    before = {signum: signal.signal(signum, pass_on) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def run_command(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log_path: Path,
    masker: Masker,
    reread: Callable[[], Masker],
    started: Callable[[int], None] | None = None,
    own_group: bool = False,
) -> int:
    """Run the command to its end, its output masked into the log; its exit code (127 when it
    cannot start, 128 + N when signal N killed it, as a shell says). A local run's supervisor
    and a remote one's both run it so.

    The command is killed at once when the thread that started it ends (its supervisor
    killed). A local run's (own_group) leads a process group of its own, so that what is left
    of it can be stopped whole when its supervisor has gone (supervision.stop_command; started
    is told its pid); a GPU machine's stays in the terminal's, since nothing there stops it."""
    global _command
    try:
        process = _command = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0 if own_group else None,
            preexec_fn=partial(_die_with, os.getpid()) if _prctl is not None else None,
        )
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) else _no_environment(env) or str(e)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"div: cannot start {masker.mask_args(command)[0]}: {why}\n")
        return 127
    if started is not None:
        started(process.pid)
    copy_output(log_path, process.stdout, masker, reread)
    code = process.wait()
    return 128 - code if code < 0 else code


def _no_environment(env: dict[str, str]) -> str:
    """Why no process can be given env, when it holds a name no environment can carry (an
    org's secret stored before names were checked everywhere); empty otherwise."""
    for name in env:
        if not name or "=" in name or "\0" in name:
            return services.BAD_SECRET_NAME.format(name=name)
    return ""


def _die_with(parent: int) -> None:
    """In the command's process, before it starts: SIGKILL when the thread that started it
    ends, and at once if its supervisor is already gone."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def copy_output(
    log_path: Path, output: BinaryIO, masker: Masker, reread: Callable[[], Masker]
) -> None:
    """The command's output into the run's log as it comes, masked: whatever a read returns
    goes out at once, but for the possible start of a secret (see StreamMasker).

    The org's secrets are read again (reread) every SECRETS_TTL seconds, as the ingester reads
    them, so a secret set while the run goes on is masked here as soon as in its telemetry. A
    database out of reach then (restarted, failed over) keeps the secrets read before, and is
    tried again at the next interval on a new connection: the command and its log go on.
    """
    stream = StreamMasker(masker)
    read_at, unreadable = time.monotonic(), False
    with open(log_path, "ab", buffering=0) as written:
        while data := output.read1(READ_BYTES):
            if time.monotonic() - read_at > SECRETS_TTL:
                read_at = time.monotonic()
                try:
                    stream.masker = reread()
                except SecretsKeyError as e:
                    # The secrets read before are still masked; new ones cannot be read.
                    if not unreadable:
                        written.write(f"div: {e}\n".encode())
                    unreadable = True
                except DatabaseError as e:
                    log.debug("the secrets of the log wait for the database: %s", e)
                    connection.close()
            written.write(stream.feed(data))
        written.write(stream.flush())


def read_command(stream: BinaryIO) -> list[str]:
    """The command a detached run's supervisor is given on its stdin (see detach)."""
    try:
        command = json.loads(stream.read())
    except ValueError:
        command = None
    if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise Refused(NO_COMMAND)
    return command


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
    """A signal handler: pass a stop on to the run's command and its process group, whose end
    is then recorded as any other (a run stopped by SIGTERM ends failed, with exit code 143)."""
    if _command is not None and _command.poll() is None:
        try:
            if os.getpgid(_command.pid) == _command.pid:  # its own group, not this one's
                os.killpg(_command.pid, signum)
            else:
                _command.send_signal(signum)
        except ProcessLookupError:
            pass


def _ingest(run_id: int, stop: threading.Event) -> None:
    try:
        ingester = Ingester(run_ids=[run_id])
        ingester.run_forever(stop, until_closed=True)
        # Stopped once the run has ended: store what is left and close its telemetry.
        while ingester.tail_once():
            pass
    finally:
        connection.close()


def detach(run: Run, command: list[str]) -> subprocess.Popen:
    """Supervise the run from a process of its own, which goes on after this one returns.

    The command goes to it on a pipe, since the database keeps it masked.
    """
    return supervisor(run.name, command)


def supervisor(name: str, given: object) -> subprocess.Popen:
    """`div supervise NAME` in a session of its own, what it needs given as JSON on its stdin
    (never on its command line, which ps shows)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "divergent", "supervise", name],
        cwd=settings.BASE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        process.stdin.write(json.dumps(given).encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # it ended before reading: the run is left as any whose supervisor died
    return process
