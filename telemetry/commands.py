"""What every `div` command shares: django-click, one-line errors, quiet pipes, a database.

A command is a django-click command made with `command` or `group` below. Whatever goes
wrong reaches the user as one line on stderr: a usage error (click's own exception types)
as `div COMMAND: what; div COMMAND --help lists the options`, exit 2; a refusal as
`div: what to change`, exit 1. No click usage block, no `CommandError:`, no traceback.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import click
from click.exceptions import NoArgsIsHelpError
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection, connections
from djclick.adapter import CommandAdapter, CommandRegistrator, GroupAdapter

from telemetry import migration_state, remote
from telemetry.comparison import NotAComparison, run_numbers
from telemetry.encryption import SecretsKeyError
from telemetry.errors import Refused
from telemetry.layout import LayoutError
from telemetry.logs import reader_gone
from telemetry.models import RUN_NAME

NOT_SET_UP = "{home} has no database yet; div migrate sets it up (div run and div serve do too)"
EMPTY_DATABASE = (
    "{database} has no tables yet; div migrate sets it up (div run and div serve do too)"
)
OUT_OF_DATE = "{database} was set up by an older div; div migrate brings it up to date"
SERVER_ONLY = (
    "{command} works where the database is, and this machine's div is a client of {url} "
    "(the token of {where}): run it on the server, or set DIVERGENT_TOKEN= to use this machine's"
)
CLIENT_ONLY = (
    "{command} uploads runs made from this machine to a server, and there is no token here: "
    "div login URL sets one"
)
# Where a command works: both (on the server's database, or over the API), or only one.
BOTH, SERVER, CLIENT = "both", "server", "client"
NOT_A_RUN = '"{value}" is not a run\'s name; name it like run-7 or 7'


class RunName(click.ParamType):
    """run-7 or 7, as every command that names a run takes it: the canonical run-7."""

    name = "run"

    def convert(self, value, param, ctx) -> str:
        match = RUN_NAME.fullmatch(value)
        if match is None:
            self.fail(NOT_A_RUN.format(value=value), param, ctx)
        return f"run-{int(match[1])}"


RUN = RunName()


class RunNames(RunName):
    """A run as RunName takes it, or several joined by commas (run-3,run-7): read by
    comparison.run_numbers (each run once, in the order given, at most 20), a tuple of their
    canonical names. A list is a tuple even when it names one run."""

    def convert(self, value, param, ctx) -> str | tuple[str, ...]:
        if isinstance(value, tuple) or "," not in value:
            return super().convert(value, param, ctx)
        try:
            return tuple(f"run-{number}" for number in run_numbers(value))
        except NotAComparison as e:
            self.fail(str(e), param, ctx)


RUNS = RunNames()


def usage_message(error: click.UsageError) -> str:
    """What was wrong with the words given, in one line, from click's exception types."""
    if isinstance(error, click.NoSuchOption):
        near = f" (did you mean {error.possibilities[0]}?)" if error.possibilities else ""
        return f"unrecognized arguments: {error.option_name}{near}"
    if isinstance(error, NoArgsIsHelpError):
        names = ", ".join(error.ctx.command.list_commands(error.ctx))
        return f"name one of its commands: {names}"
    if isinstance(error, click.MissingParameter) and error.param is not None:
        return f"{_named(error.param)} is missing"
    if isinstance(error, click.BadParameter) and error.param is not None:
        return f"{_named(error.param)}: {error.message}"
    return error.format_message()


def _named(param: click.Parameter) -> str:
    """--port for an option, RUN for an argument: as the usage line names it."""
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return param.human_readable_name.strip("[]").removesuffix("...")


class Port(click.ParamType):
    name = "port"

    def convert(self, value, param, ctx) -> int:
        text = str(value)
        if text.isascii() and text.isdigit() and int(text) <= 65535:
            return int(text)
        self.fail(f"{value} is not a port; use 1 to 65535, or 0 for any free one", param, ctx)


class DivCommandMixin:
    """run_from_argv is how Django's `manage.py` and `div` both start a command."""

    writes: bool | None = True  # writers set up the database first; readers only say it is
    # missing; None: the command needs no database
    where = BOTH
    use_argparse = False

    def run_from_argv(self, argv: list[str]) -> None:
        # What set-up loaded lives as long as the command: the collector need never scan it
        # again, which matters when div telemetry reads 200,000 points.
        gc.freeze()
        name = f"div {argv[1]}"
        try:
            code = self.main(args=argv[2:], prog_name=name, standalone_mode=False)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else name
            sys.stderr.write(f"{where}: {usage_message(e)}; {where} --help lists the options\n")
            code = 2
        except (click.ClickException, Refused, LayoutError, SecretsKeyError) as e:
            sys.stderr.write(f"div: {e}\n")
            code = getattr(e, "exit_code", 1)
        except DatabaseError as e:
            home = settings.DIVERGENT_HOME
            # One line, even of a driver's several ("...\n\tIs the server running ...").
            why = NOT_SET_UP.format(home=home) if _missing_table(e) else " ".join(str(e).split())
            sys.stderr.write(f"div: {why}\n")
            code = 1
        except BrokenPipeError:
            reader_gone(sys.stdout)
            code = 0
        except (KeyboardInterrupt, click.Abort):
            code = 130
        finally:
            connections.close_all()
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        # Here, once the words are parsed: --help needs no database. A client of a server has
        # none: it never connects to one, whatever DATABASE_URL says.
        if self.where == SERVER:
            server_only(ctx.command_path)
        client = remote.client()
        if client is None and self.where == CLIENT:
            raise Refused(CLIENT_ONLY.format(command=ctx.command_path))
        if client is None and self.writes is not None:
            database_ready(writes=self.writes)
        return super().invoke(ctx)


class DivCommand(DivCommandMixin, CommandAdapter):
    pass


class DivGroup(DivCommandMixin, GroupAdapter):
    pass


class command(CommandRegistrator):
    """@command(help=...) on a module's function makes it that `div` command."""

    cls = DivCommand

    def __init__(self, *, writes: bool | None = True, where: str = BOTH, **kwargs):
        super().__init__(**kwargs)
        self.writes = writes
        self.where = where

    def get_params(self, name):
        # Only --help: Django's --settings, --verbosity and the like mean nothing to div.
        return [click.help_option("-h", "--help", help="Show this and exit.")]

    def __call__(self, func):
        made = super().__call__(func)
        made.writes = self.writes
        made.where = self.where
        return made


class group(command):
    """@group(help=...): a command with sub-commands, like div secrets set|list|delete."""

    cls = DivGroup


def server_only(command: str) -> None:
    """Refused, in one line, on a machine whose div is a server's client."""
    client = remote.client()
    if client is not None:
        where = client.token_from
        raise Refused(SERVER_ONLY.format(command=command, url=client.url, where=where))


def database_ready(*, writes: bool) -> None:
    """A writer sets the database up (made, migrated) before it starts. A reader of a database
    that is missing, empty or older than this div says so before it changes anything: no file
    made or turned into a database, no home-id."""
    sqlite = connection.vendor == "sqlite"
    path = Path(connection.settings_dict["NAME"])
    if writes:
        if sqlite:
            path.parent.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        return
    # A 0-byte file is what an older div's reader left; opening it would make it a database.
    if sqlite and (not path.exists() or path.stat().st_size == 0):
        raise Refused(NOT_SET_UP.format(home=settings.DIVERGENT_HOME))
    missing = migration_state.unapplied()
    if missing is None and sqlite:
        raise Refused(NOT_SET_UP.format(home=settings.DIVERGENT_HOME))
    where = (
        f"the database in {settings.DIVERGENT_HOME}" if sqlite else migration_state.database_named()
    )
    if missing is None:
        raise Refused(EMPTY_DATABASE.format(database=where))
    if missing:
        raise Refused(OUT_OF_DATE.format(database=where))


def _missing_table(error: DatabaseError) -> bool:
    text = str(error)
    return "no such table" in text or ("relation" in text and "does not exist" in text)
