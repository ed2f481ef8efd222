"""div supervise RUN: runs a detached run's command (div run --detach starts it)."""

from __future__ import annotations

import signal
import sys

from django.core.management.base import CommandError

from telemetry import runner, services
from telemetry.commands import DivCommand


class Command(DivCommand):
    help = "Runs a created run's command and records how it ended (used by div run --detach)."

    def add_arguments(self, parser):
        parser.add_argument("run")

    def handle(self, *args, run, **options):
        try:
            the_run = services.run_by_name(run)
            command = runner.read_command(sys.stdin.buffer)
        except (LookupError, ValueError) as e:
            raise CommandError(str(e)) from None
        # Stopped, it stops the command and still records how the run ended.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, runner.forward)
        sys.exit(runner.execute(the_run, command))
