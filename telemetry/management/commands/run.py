"""div run DIR [--telemetry FILE] [--org ORG] [--detach] -- COMMAND..."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from django.core.management.base import CommandError
from django.db import transaction

from telemetry import runner, services
from telemetry.commands import DivCommand
from telemetry.layout import LayoutError
from telemetry.models import Org
from telemetry.shipping import ShipError

REFUSED = "the API refused the run: {why}"
NO_COMMAND = "give the command to run after --, like: div run . -- python train.py"
NOT_A_DIRECTORY = "{path} is not a directory; name the directory to ship"
NO_ORG = 'there is no org "{name}"; div org add {name} makes it'


class Command(DivCommand):
    help = "Ships DIR and runs COMMAND there, recording its log and telemetry."
    migrates = True

    def add_arguments(self, parser):
        parser.add_argument(
            "directory", help="the directory to ship; its telemetry.toml lays out the tab"
        )
        parser.add_argument(
            "command", nargs="*", metavar="-- COMMAND", help="what to run, after --"
        )
        parser.add_argument("--telemetry", type=Path, metavar="FILE", help="another layout file")
        parser.add_argument("--org", help=f"the run's org (default: {services.DEFAULT_ORG})")
        parser.add_argument("--detach", action="store_true", help="print the run's name and return")

    def run_from_argv(self, argv):
        # Everything after the first -- is the command, whatever options it has of its own.
        self.after_dashes = argv[argv.index("--") + 1 :] if "--" in argv else []
        super().run_from_argv(argv[: argv.index("--")] if "--" in argv else argv)

    def handle(self, *args, directory, command, telemetry=None, org=None, detach=False, **options):
        directory = Path(directory)
        command = [*command, *getattr(self, "after_dashes", [])]
        if not command:
            raise CommandError(NO_COMMAND)
        if not directory.is_dir():
            raise CommandError(NOT_A_DIRECTORY.format(path=directory))
        if org is not None and not Org.objects.filter(name=org).exists():
            raise CommandError(NO_ORG.format(name=org))
        try:
            source, origin = services.layout_read(directory=directory, telemetry=telemetry)
            # One transaction: a refused layout leaves no run, and no default org made for it.
            with transaction.atomic():
                run = services.run_create(
                    org=services.org_get_or_create(name=org or services.DEFAULT_ORG),
                    command=command,
                    layout_source=source,
                    layout_origin=origin,
                    files_from=directory,
                )
        except LayoutError as e:
            raise CommandError(REFUSED.format(why=e)) from None
        except ShipError as e:
            raise CommandError(str(e)) from None
        out = self.stdout._out
        out.write(run.name + "\n")
        out.flush()
        if detach:
            runner.detach(run)
            return

        ended = {}
        supervising = threading.Thread(target=lambda: ended.update(code=runner.execute(run)))
        supervising.start()
        runner.follow_log(run, out, follow=True, alive=supervising.is_alive)
        supervising.join()
        sys.exit(ended.get("code", 1))
