"""div ingest [--once]: stores every open run's telemetry; div serve runs the same inside it."""

from __future__ import annotations

import signal
import threading

from telemetry.commands import DivCommand
from telemetry.ingest import Ingester, ingester_present


class Command(DivCommand):
    help = "Tails the telemetry file of every run whose telemetry is not closed."
    migrates = True

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="drain what is there and exit")

    def handle(self, *args, once=False, **options):
        ingester = Ingester()
        with ingester_present():
            if once:
                while ingester.tail_once():
                    pass
                return
            stop = threading.Event()
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
            ingester.run_forever(stop)
