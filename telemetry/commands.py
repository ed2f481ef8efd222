"""What every `div` command shares: django-click, one-line errors, quiet pipes, a database.

A command is a django-click command made with `command` or `group` below. Whatever goes
wrong reaches the user as one line on stderr: a usage error (click's own exception types)
as `div COMMAND: what; div COMMAND --help lists the options`, exit 2; a refusal as
`div: what to change`, exit 1. No click usage block, no `CommandError:`, no traceback.
"""

from __future__ import annotations

import gc
import os
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import click
from click.exceptions import NoArgsIsHelpError
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, connections
from djclick.adapter import CommandAdapter, CommandRegistrator, GroupAdapter

from divergent.streams import StdoutFailed
from telemetry import homes, migration_state, remote
from telemetry.comparison import NotAComparison, run_numbers
from telemetry.encryption import SecretsKeyError
from telemetry.errors import Refused
from telemetry.layout import LayoutError
from telemetry.logs import reader_gone
from telemetry.models import RUN_NAME
from telemetry.names import SHOWN_PATH, one_line, shown

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
NOT_A_RUN = "{value} is not a run's name; name it like run-7 or 7"
USAGE = "{where}: {what}; {where} --help lists the options"
CANNOT_WRITE = "div: cannot write to stdout ({why})"
NOT_A_PORT = "{value} is not a port; use 1 to 65535, or 0 for any free one"
NOT_A_HOST = (
    "{value} is not an address of this machine{why}; name one, like 127.0.0.1, or 0.0.0.0 "
    "for all of them"
)
NO_PATH = '"" names no {kind}; name {which}, like {like}'
NOT_A_DIRECTORY = "{path} is not a directory; name {which}, like {like}"


class RunName(click.ParamType):
    """run-7 or 7, as every command that names a run takes it: the canonical run-7."""

    name = "run"

    def convert(self, value, param, ctx) -> str:
        match = RUN_NAME.fullmatch(value)
        if match is None:
            self.fail(NOT_A_RUN.format(value=shown(value)), param, ctx)
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
        return f"name one of its commands: {_commands(error.ctx)}"
    if isinstance(error, click.NoSuchCommand) and error.ctx is not None:
        name = shown(error.command_name)
        return f"there is no command {name}; name one of its commands: {_commands(error.ctx)}"
    if isinstance(error, click.BadOptionUsage) and error.ctx is not None:
        option = _option(error.ctx.command, error.option_name)
        if option is not None and (option.is_flag or option.count):
            return f"{error.option_name} takes no value"
        if option is not None:
            return f"{error.option_name} needs {_values(option.nargs)}"
    if isinstance(error, click.MissingParameter) and error.param is not None:
        return f"{_named(error.param)} is missing"
    if isinstance(error, click.BadParameter) and error.param is not None:
        return f"{_named(error.param)}: {error.message}"
    return error.format_message().rstrip(".")  # the line goes on after it


def _commands(ctx: click.Context) -> str:
    return ", ".join(ctx.command.list_commands(ctx))


def _option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _values(count: int) -> str:
    return "a value" if count == 1 else f"{count} values"


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
        # A number as it was written, as JSON would show it; any other text quoted.
        number = re.fullmatch(r"-?[0-9]{1,20}", text)
        self.fail(NOT_A_PORT.format(value=text if number else shown(text)), param, ctx)


class Host(click.ParamType):
    """An address of this machine to listen on, or a name that resolves to one."""

    name = "host"

    def convert(self, value, param, ctx) -> str:
        why = ""
        try:
            if value:
                socket.getaddrinfo(value, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
                return value
        except socket.gaierror as e:
            why = f" ({e.strerror.lower()})" if e.strerror else ""
        except (UnicodeError, ValueError):  # a label too long for a name, a NUL in it
            pass
        self.fail(NOT_A_HOST.format(value=shown(value), why=why), param, ctx)


class GivenPath(click.ParamType):
    """A path, never "": Path("") is ".", and `div run "" -- CMD` would ship where it stands.
    A directory's is one, as click.Path(exists=True) would have it: a usage error, else."""

    name = "path"

    def __init__(self, kind: str, which: str, like: str):
        self.kind, self.which, self.like = kind, which, like

    def convert(self, value, param, ctx) -> Path:
        if isinstance(value, Path):
            return value
        said = {"which": self.which, "like": self.like}
        if not value:
            self.fail(NO_PATH.format(kind=self.kind, **said), param, ctx)
        if self.kind == "directory" and not os.path.isdir(value):
            self.fail(NOT_A_DIRECTORY.format(path=shown(value, SHOWN_PATH), **said), param, ctx)
        return Path(value)


class NamedInErrors:
    """A command whose usage errors name it (div user add), not whatever runs it (div user)."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            # click's parser raises without a context; a group's would be filled in later.
            e.ctx = e.ctx or ctx
            raise


class DivCommandMixin(NamedInErrors):
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
            code = outcome(
                lambda: self.main(args=argv[2:], prog_name=name, standalone_mode=False), name
            )
        finally:
            connections.close_all()
        sys.exit(code)

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


class DivSubcommand(NamedInErrors, click.Command):
    """A command of a group, like div user add."""


class DivGroup(DivCommandMixin, GroupAdapter):
    command_class = DivSubcommand


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


def outcome(command: Callable[[], object], name: str = "div") -> int:
    """Runs a command (a div command, or one of Django's as `name`), and returns its exit code:
    whatever goes wrong told in one line on stderr. A reader of stdout that went away (`| head
    -1`) ends it quietly, 0, as it does `cat`; any other failure to write stdout is one line."""
    code = None
    try:
        code = _attempt(command, name)
        sys.stdout.flush()  # what is still buffered fails here, where it can be told
    except StdoutFailed as e:
        reader_gone(sys.stdout)  # and what is left buffered goes nowhere at exit
        if code:
            return code  # it had failed already, and said so
        if e.reader_gone:
            return 0
        _say(CANNOT_WRITE.format(why=e))
        return 1
    return code


def _attempt(command: Callable[[], object], name: str) -> int:
    try:
        code = command()
    except click.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else name
        _say(USAGE.format(where=where, what=usage_message(e)))
        return 2
    except (
        click.ClickException,
        Refused,
        LayoutError,
        SecretsKeyError,
        ImproperlyConfigured,  # a file in DIVERGENT_HOME that settings read (secret_key)
        CommandError,  # Django's commands
    ) as e:
        _say(f"div: {e}")
        return getattr(e, "exit_code", getattr(e, "returncode", 1))
    except DatabaseError as e:
        home = settings.DIVERGENT_HOME
        # One line, even of a driver's several ("...\n\tIs the server running ...").
        why = NOT_SET_UP.format(home=home) if _missing_table(e) else " ".join(str(e).split())
        _say(f"div: {why}")
        return 1
    except (KeyboardInterrupt, click.Abort):
        return 130
    except SystemExit as e:  # argparse's --help, in Django's commands
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    return code if isinstance(code, int) else 0


def _say(line: str) -> None:
    """An error, on one line whatever values it shows."""
    sys.stderr.write(one_line(line) + "\n")
    sys.stderr.flush()


def secret_key_ready() -> None:
    """The key sessions and login links are signed with, read (or made) first: a key file
    that cannot be read stops the command before it makes a user it cannot link to, or
    serves pages whose every login would fail."""
    str(settings.SECRET_KEY)


def database_configured() -> None:
    """The database named can be used: DATABASE_URL, when set, is one (divergent/settings.py
    leaves it unread until a command needs the database)."""
    if settings.DATABASE_ERROR:
        raise Refused(settings.DATABASE_ERROR)


def database_ready(*, writes: bool) -> None:
    """A writer sets the database up (made, migrated) before it starts. A reader of a database
    that is missing, empty or older than this div says so before it changes anything: no file
    made or turned into a database, no home-id."""
    database_configured()
    sqlite = connection.vendor == "sqlite"
    path = Path(connection.settings_dict["NAME"])
    if writes:
        if sqlite:
            chosen_by = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "DIVERGENT_HOME"
            homes.folder_made(path.parent, chosen_by)
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
