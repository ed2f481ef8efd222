"""div supervise: runs a detached run's command (div run --detach starts it)."""

from __future__ import annotations

import signal
import sys

import click

from telemetry import client_runs, queries, remote, runner
from telemetry.commands import RUN, command


@command(writes=False, hidden=True, help="Runs a created run's command (div run --detach).")
@click.argument("run", type=RUN)
@click.pass_context
def command(ctx, run):
    client = remote.client()
    if client is not None:  # a run made on a server: uploaded as it goes
        ctx.exit(client_runs.supervise_detached(client, run, sys.stdin.buffer))
    the_run = queries.run_named(run, user=queries.EVERY_RUN)
    argv = runner.read_command(sys.stdin.buffer)
    # Stopped, it stops the command and still records how the run ended.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, runner.forward)
    ctx.exit(runner.execute(the_run, argv))
