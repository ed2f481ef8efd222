"""div log RUN [-f]"""

from __future__ import annotations

from django.core.management.base import CommandError

from telemetry import runner, services
from telemetry.commands import DivCommand


class Command(DivCommand):
    help = "Prints a run's log, masked; with -f, follows it until the run ends."

    def add_arguments(self, parser):
        parser.add_argument("run", help="run-7 or 7")
        parser.add_argument("-f", "--follow", action="store_true", help="until the run ends")

    def handle(self, *args, run, follow=False, **options):
        try:
            the_run = services.run_by_name(run)
        except LookupError as e:
            raise CommandError(str(e)) from None
        runner.follow_log(the_run, self.stdout._out, follow=follow)
