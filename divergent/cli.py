"""The `div` command: `div telemetry …` is `python manage.py telemetry …`."""

from __future__ import annotations

import os
import sys

USAGE = """\
usage: div <command> [options]

  div run DIR [--telemetry FILE] [--org ORG] [--detach] -- COMMAND...
                                 ship DIR and run COMMAND there, recording its telemetry
  div telemetry [RUN [KEY...]]   list runs, a run's keys, or its points (--csv, --json, -f)
  div log RUN [-f]               print a run's log
  div serve [--host H] [--port P] [--demo]
                                 the web app with its ingester
  div ingest [--once]            store the runs' telemetry (div serve does this itself)
  div secrets set|list|delete    an org's secrets, given to its runs and masked
  div org add ORG [--member USER]
                                 make an org, and add a user to it
  div user add USER              make a user and print a one-time login link

Every Django management command works too (div migrate, div createsuperuser, ...).
div <command> --help tells more.
"""


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("help", "-h", "--help"):
        sys.stdout.write(USAGE)
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "divergent.settings")
    import django
    from django.core.management import execute_from_command_line, get_commands

    django.setup()
    if not argv[0].startswith("-") and argv[0] not in get_commands():
        sys.stderr.write(f'div: there is no command "{argv[0]}"; div help lists them\n')
        sys.exit(2)
    execute_from_command_line(["div", *argv])


if __name__ == "__main__":
    main()
