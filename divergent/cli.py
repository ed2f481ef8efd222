"""The `div` command: `div telemetry …` is `python manage.py telemetry …`.

Every div command is a django-click command of the telemetry app; `div --help` is click's
help for all of them. Django's own commands work too (div migrate, div createsuperuser).
"""

from __future__ import annotations

import os
import sys

import click

NO_SUCH_COMMAND = 'div: there is no command "{name}"; div help lists them'
HELP = "Records the numbers training runs write, draws them live, prints them."
EPILOG = "Every Django management command works too (div migrate, div createsuperuser, ...)."


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "divergent.settings")
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured as e:
        # Settings fail loudly, in one line that names the variable to fix.
        sys.stderr.write(f"div: {e}\n")
        sys.exit(1)
    from django.core.management import execute_from_command_line, get_commands

    if not argv or argv[0] in ("help", "-h", "--help"):
        click.echo(div_group().get_help(click.Context(div_group(), info_name="div")))
        return
    app = get_commands().get(argv[0])
    if not argv[0].startswith("-") and app is None:
        sys.stderr.write(NO_SUCH_COMMAND.format(name=argv[0]) + "\n")
        sys.exit(2)
    if app != "telemetry":
        # Django's own commands (div migrate, div createsuperuser) work on the database: none
        # is a client's. On a home not made yet SQLite makes its file, not its folder. The div
        # commands see to their own.
        from django.conf import settings

        from telemetry.commands import server_only
        from telemetry.errors import Refused

        try:
            server_only(f"div {argv[0]}")
        except Refused as e:
            sys.stderr.write(f"div: {e}\n")
            sys.exit(1)
        settings.DIVERGENT_HOME.mkdir(parents=True, exist_ok=True)
    execute_from_command_line(["div", *argv])


def div_group() -> click.Group:
    """The div commands as one click group, for its help: each with its one-line description."""
    from django.core.management import get_commands, load_command_class

    commands = {}
    for name, app in get_commands().items():
        if app == "telemetry":
            found = load_command_class(app, name)
            if isinstance(found, click.Command) and not found.hidden:
                commands[name] = found
    return click.Group("div", commands=commands, help=HELP, epilog=EPILOG)


if __name__ == "__main__":
    main()
