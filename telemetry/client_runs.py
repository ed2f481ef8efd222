"""`div run` on a machine with a token: the run is made on the server, its command runs here.

The directory is shipped as for a local run (the same rules, into this machine's
DIVERGENT_HOME, in a folder of the server's: runs_of), the server makes the run
(`POST /api/runs/`: the layout is parsed there, a refusal is its one line), and the command
runs in the copy with DIVERGENT_TELEMETRY_PATH and the org's secrets. Its telemetry file and
masked log are uploaded as they grow (uploading.py); the run is ended on the server once every
byte is there.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from django.conf import settings

from telemetry import logs, processes, runner, services, uploading
from telemetry.errors import Refused
from telemetry.masking import Masker
from telemetry.models import RUN_NAME, run_number
from telemetry.remote import Client, ServerError, Unauthorized, Unreachable
from telemetry.uploading import Progress, State, Uploader

NOT_A_NAME = "the server at {url} named the run {name!r}, not run-N: is it a div serve?"
NO_LAUNCH = "div supervise reads the run's command and secrets on stdin; div run --detach starts it"


@dataclass
class ClientRun:
    """A run made on the server, whose files are in this machine's DIVERGENT_HOME."""

    name: str
    org: str
    folder: Path
    state: State
    secrets: dict[str, str]

    @property
    def telemetry_path(self) -> Path:
        return self.folder / "telemetry.jsonl"

    @property
    def log_path(self) -> Path:
        return self.folder / "log"

    @classmethod
    def here(
        cls, url: str, name: str, secrets: dict[str, str] | None = None, org: str = ""
    ) -> ClientRun:
        """A run made from this machine on the server at url, by its name; Refused when there
        is none here (saying which server it was made on, if another)."""
        folder = runs_of(url) / name
        try:
            state = State.load(folder)
        except (OSError, ValueError, TypeError):
            for other in made_here():
                if other.run == name and not other.ended:
                    raise Refused(_other_server(other, url)) from None
            raise Refused(
                uploading.NOT_HERE.format(run=name, home=settings.DIVERGENT_HOME)
            ) from None
        return cls(name, org, folder, state, dict(secrets or {}))


def runs_of(url: str) -> Path:
    """Where this machine keeps the runs it made on the server at url: a folder a server (like
    runs/https-telemetry.example.com/run-7/), so two servers' run-7 never share one."""
    parts = urlsplit(url)
    port = f"-{parts.port}" if parts.port else ""
    name = f"{parts.scheme}-{parts.hostname}{port}{parts.path}"
    return settings.RUNS_DIR / re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def made_here() -> list[State]:
    """Every run made from this machine, on any server, in the order they were made on each."""
    found = []
    for path in settings.RUNS_DIR.glob(f"*/run-*/{uploading.UPLOADS}/state.json"):
        folder = path.parent.parent
        try:
            state = State.load(folder)
        except (OSError, ValueError, TypeError):
            continue
        if RUN_NAME.fullmatch(folder.name) and folder == runs_of(state.url) / state.run:
            found.append(state)
    return sorted(found, key=lambda state: (state.url, run_number(state.run)))


def _other_server(state: State, url: str) -> str:
    return uploading.OTHER_SERVER.format(run=state.run, made=state.url, url=url)


def launch(
    client: Client, *, directory: Path, command: list[str], telemetry: Path | None, org: str | None
) -> ClientRun:
    """Ship the directory here, then make the run on the server; a refusal of either leaves
    nothing made on either side."""
    if not command:
        raise Refused(services.NO_COMMAND)
    if not directory.is_dir():
        raise Refused(services.NOT_A_DIRECTORY.format(path=directory))
    with services.launch_refusals(directory):
        source, origin = services.layout_read(directory=directory, telemetry=telemetry)
        plan = services.ship_plan(directory=directory)
        partial = services.folder_prepare(plan=plan, source=directory)
    try:
        made = client.api().send(
            "POST",
            "/api/runs/",
            {
                "org": org,
                "command": command,
                "layout": {"source": source, "origin": origin},
                "host": processes.this_host(),
                "pid": os.getpid(),
            },
            again=False,  # never two runs for one `div run`
        )
        name, given = made.get("name"), made.get("secrets")
        given = given if isinstance(given, dict) else {}
        secrets = {k: v for k, v in given.items() if isinstance(k, str) and isinstance(v, str)}
        if not isinstance(name, str) or not RUN_NAME.fullmatch(name) or name[:4] != "run-":
            raise Refused(NOT_A_NAME.format(url=client.url, name=name))  # never a path
        folder = runs_of(client.url) / name
        folder.parent.mkdir(parents=True, exist_ok=True)
        if folder.exists():
            _set_aside(folder, client.url)
        os.rename(partial, folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    run = ClientRun(name, made.get("org", ""), folder, State(client.url, name), secrets)
    run.state.save(folder)
    if plan.notes:
        with open(run.log_path, "a", encoding="utf-8") as log:
            log.write("".join(note + "\n" for note in plan.notes))
        for note in plan.notes:
            services.ship_log.warning("%s", note)
    return run


SET_ASIDE = (
    "the server at {url} made {run} again (its database since reset, or another server "
    "answering there): what this machine had of the earlier {run}, not all sent, is kept in "
    "{aside}"
)


def _set_aside(folder: Path, url: str) -> None:
    """The folder of an earlier run of the same name on the same server: removed if the server
    took all of it, else kept whole beside it (never from under a process still uploading it)
    and said so; what is not sent is never lost."""
    try:
        ended = State.load(folder).ended
    except (OSError, ValueError, TypeError):
        ended = False
    if ended:
        shutil.rmtree(folder)
        return
    with uploading.holding(folder, folder.name):
        aside = next(
            path
            for n in itertools.count(1)
            if not (path := folder.with_name(f"{folder.name}.earlier-{n}")).exists()
        )
        os.rename(folder, aside)
    sys.stderr.write(f"div: {SET_ASIDE.format(url=url, run=folder.name, aside=aside)}\n")


def supervise(client: Client, run: ClientRun, command: list[str], out=None) -> int:
    """Run the command here, uploading as it goes, then report how it ended; its exit code.
    With out (attached), the log is printed there as it is written."""
    with uploading.holding(run.folder, run.name):
        uploader = Uploader(
            run.folder,
            client.api(),
            run.state,
            supervising=True,
            progress=Progress(run.name),
            secrets=run.secrets,
        )
        notes = runner.short_secret_notes(run.secrets, run.org)
        if notes:
            with open(run.log_path, "a", encoding="utf-8") as log:
                log.write(notes)
        stop = threading.Event()
        sending = threading.Thread(target=uploader.follow, args=(stop,), daemon=True)
        sending.start()

        def execute() -> int:
            return runner.run_command(
                command,
                cwd=run.folder / "files",
                env=runner.environment(run.name, run.telemetry_path, run.secrets),
                log_path=run.log_path,
                masker=Masker(run.secrets.values()),
                reread=uploader.masker,
            )

        interrupted: list[KeyboardInterrupt] = []
        code = execute() if out is None else _attached(run.log_path, execute, out, interrupted)
        run.state.exit_code = code
        run.state.save(run.folder)
        stop.set()
        sending.join()
        # Detached, the end is tried until the server takes it or refuses it for good.
        sent = uploader.finish(patience=None if out is None else uploading.ATTACHED_PATIENCE)
    if not sent and out is None:
        # A detached supervisor's stderr goes nowhere: the run's log says it, once `div sync`
        # is free to send the rest (the lock is let go).
        with open(run.log_path, "a", encoding="utf-8") as log:
            log.write(uploader.kept() + "\n")
    if interrupted:
        raise interrupted[0]  # exit 130, as a local div run does, once the end is sent
    return code


# The command is in the terminal's group, which a Ctrl-C reaches whole: only what is sent to
# div run alone (`kill PID`, a scheduler stopping the job) is passed on, as a local run does.
PASSED_ON = (signal.SIGTERM, signal.SIGHUP)


def _attached(log_path: Path, execute, out: logs.Printer, interrupted: list) -> int:
    """The command in a thread, its log printed here as written until it ends. Ctrl-C stops
    the printing; the command had it too, and its end is still recorded and sent. SIGTERM and
    SIGHUP are passed on to the command, whose end is recorded and sent as any other."""
    ended: dict[str, int] = {}
    done = threading.Event()  # not Thread.join: a join cut short by Ctrl-C may never return

    def command() -> None:
        try:
            ended["code"] = execute()
        finally:
            done.set()

    threading.Thread(target=command).start()
    try:
        with runner.passing_on_signals(PASSED_ON), open(log_path, "rb") as log:
            while True:
                going = not done.is_set()
                data = log.read()
                if data:
                    out.write(data)
                if not going:
                    break
                done.wait(logs.LOG_POLL)
    except KeyboardInterrupt as e:
        interrupted.append(e)
        done.wait()
    return ended.get("code", 1)


def detach(run: ClientRun, command: list[str]) -> subprocess.Popen:
    """Supervise the run from a process of its own (`div supervise`), which goes on after this
    one returns; the command and the secrets go to it on a pipe. If it never starts, the
    server finds the run silent, and lost."""
    return runner.supervisor(run.name, {"command": command, "secrets": run.secrets, "org": run.org})


def supervise_detached(client: Client, name: str, given: BinaryIO) -> int:
    """What `div supervise` does on a client: the run `div run --detach` made, to its end."""
    try:
        launch = json.loads(given.read())
        command, secrets, org = launch["command"], launch["secrets"], launch["org"]
    except (ValueError, KeyError, TypeError):
        raise Refused(NO_LAUNCH) from None
    run = ClientRun.here(client.url, name, secrets, org)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, runner.forward)
    return supervise(client, run, command)


def sync(client: Client, names: list[str]) -> int:
    """`div sync [RUN]`: send what the server lacks of runs made from this machine, and how
    they ended; progress on a terminal. The runs named, or every run here not yet ended on
    any server. Each that cannot be made whole is one line, and the others are still sent;
    a failure of the server's own (out of reach, failing, the token refused) stops it all.
    Its exit code: 0 when every one of them is whole on the server."""
    if names:
        wanted = [(name, client.url) for name in names]
    else:
        here = [state for state in made_here() if not state.ended]
        wanted = [(s.run, s.url) for s in sorted(here, key=lambda s: s.url != client.url)]
    whole = True
    for name, url in wanted:
        try:
            if url != client.url:
                raise Refused(uploading.OTHER_SERVER.format(run=name, made=url, url=client.url))
            run = ClientRun.here(client.url, name)
            whole &= run.state.ended or _sync_one(client, run)
        except (Unreachable, ServerError, Unauthorized):
            raise
        except Refused as e:
            sys.stderr.write(f"div: {e}\n")
            whole = False
    return 0 if whole else 1


def _sync_one(client: Client, run: ClientRun) -> bool:
    with uploading.holding(run.folder, run.name):
        progress = Progress(run.name)
        uploader = Uploader(
            run.folder, client.api(), run.state, supervising=False, progress=progress
        )
        pending = uploader.pending()
        if run.state.exit_code is None and not pending:
            return True  # all it wrote is there: it stays lost on the server, as it is
        progress.begin(pending)
        if run.state.exit_code is None:
            uploader.send(final=True)
            progress.end(keep=True)
            sys.stderr.write(f"div: {uploading.NO_END.format(run=run.name)}\n")
            return False
        uploader.end()
        progress.end(keep=True)
        return True
