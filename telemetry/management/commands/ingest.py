"""div ingest: stores every open run's telemetry; div serve runs the same inside it."""

from __future__ import annotations

import signal
import threading

import click

from telemetry.commands import SERVER, command
from telemetry.ingest import Ingester, ingester_present


@command(
    where=SERVER,
    short_help="Store the telemetry of every open run.",
    help="Stores the telemetry of every run whose telemetry is not closed.",
)
@click.option("--once", is_flag=True, help="Store what is there and exit.")
def command(once):
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
