"""div log: a run's log, as written."""

from __future__ import annotations

import sys

import click

from telemetry import sources
from telemetry.commands import RUN, command


@command(
    writes=False,
    short_help="Print a run's log; -f follows it.",
    help="Prints a run's log as written; with -f, until the run ends.",
)
@click.argument("run", type=RUN)
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the run ends.")
def command(run, follow):
    sources.current().log(run, sys.stdout.buffer, follow=follow)
