"""The `div` command: `div telemetry …` is `python manage.py telemetry …`.

Every div command is a django-click command of the telemetry app; `div --help` is click's
help for all of them. Django's own commands work too (div migrate, div createsuperuser), and
their errors are one line like any div command's.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import click

from divergent import streams
from telemetry.names import one_line, shown

NO_SUCH_COMMAND = "div: there is no command {name}; div help lists them"
HELP = "Records the numbers training runs write, draws them live, prints them."
EPILOG = "Every Django management command works too (div migrate, div createsuperuser, ...)."
PACKAGE = "divergent-telemetry"
NO_SETTINGS = (
    "div: DJANGO_SETTINGS_MODULE='{name}' {what}; "
    "unset it, and div uses its own settings (divergent.settings)"
)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # A closed stdout (`>&-`) stops only the printing; its failures are told apart.
    streams.ready()
    name = os.environ.setdefault("DJANGO_SETTINGS_MODULE", "divergent.settings")
    # Another Django project's, left set in the shell, is one line, not Django's traceback.
    if not importable(name):
        stop(NO_SETTINGS.format(name=name, what="names no module that can be imported"))
    import django
    from django.apps import apps
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured as e:
        # Settings fail loudly, in one line that names the variable to fix.
        stop(f"div: {e}")
    except ImportError as e:
        if name == "divergent.settings":
            raise  # div's own: a fault to see whole
        stop(NO_SETTINGS.format(name=name, what=f"names settings div cannot load ({e})"))
    if not apps.is_installed("telemetry"):
        stop(NO_SETTINGS.format(name=name, what="names settings that are not div's"))
    from django.core.management import get_commands, load_command_class

    from telemetry.commands import outcome

    if argv[:1] == ["help"]:
        argv = [*argv[1:], "--help"]  # div help telemetry is div telemetry --help
    app = get_commands().get(argv[0]) if argv else None
    if app == "telemetry":
        load_command_class(app, argv[0]).run_from_argv(["div", *argv])
    if app is not None:
        sys.exit(outcome(lambda: django_command(app, argv), f"div {argv[0]}"))
    sys.exit(outcome(lambda: top_level(argv)))


def stop(line: str) -> None:
    sys.stderr.write(one_line(line) + "\n")
    sys.exit(1)


def importable(module: str) -> bool:
    """Whether the module can be found, without running it; "" is left to Django to say."""
    try:
        return not module or importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a name like "a..b"
        return False


def top_level(argv: list[str]) -> int:
    """div, div --help, div --version; any other word is not a div command."""
    word = argv[0] if argv else "--help"
    if word in ("-h", "--help"):
        click.echo(div_group().get_help(click.Context(div_group(), info_name="div")))
    elif word == "--version":
        click.echo(f"div {version()}")
    elif word.startswith("-"):
        raise click.NoSuchOption(word, possibilities=["--help", "--version"])
    else:
        sys.stderr.write(one_line(NO_SUCH_COMMAND.format(name=shown(word))) + "\n")
        return 2
    return 0


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(PACKAGE)
    except PackageNotFoundError:  # a checkout not installed with make
        return "(not installed: make installs it)"


def django_command(app: str, argv: list[str]) -> None:
    """One of Django's own commands, as Django's `manage.py` runs it, but its words parsed
    with errors raised as click's (one line, exit 2) rather than argparse's usage block."""
    from django.conf import settings
    from django.core.management import load_command_class
    from django.core.management.base import handle_default_options

    from telemetry import homes
    from telemetry.commands import database_configured, server_only

    # They work on the database: none is a client's. On a home not made yet SQLite makes its
    # file, not its folder. The div commands see to their own.
    server_only(f"div {argv[0]}")
    database_configured()
    homes.folder_made(settings.DIVERGENT_HOME)
    command = load_command_class(app, argv[0])
    parser = command.create_parser("div", argv[0])
    parser.error = _usage_error
    options = parser.parse_args(argv[1:])
    handle_default_options(options)
    given = vars(options)
    command.execute(*given.pop("args", ()), **given)


def _usage_error(message: str):
    raise click.UsageError(message)


def div_group() -> click.Group:
    """The div commands as one click group, for its help: each with its one-line description."""
    from django.core.management import get_commands, load_command_class

    commands = {}
    for name, app in get_commands().items():
        if app == "telemetry":
            found = load_command_class(app, name)
            if isinstance(found, click.Command) and not found.hidden:
                commands[name] = found
    version = click.Option(["--version"], is_flag=True, help="Print div's version and exit.")
    return click.Group("div", commands=commands, help=HELP, epilog=EPILOG, params=[version])


if __name__ == "__main__":
    main()
