"""div run: ship a directory and run a command there, recording its log and telemetry."""

from __future__ import annotations

import sys
from functools import partial

import click

from telemetry import client_runs, logs, remote, runner, services
from telemetry.commands import GivenPath, command


@command(
    help="Ships DIR and runs COMMAND there, recording its log and telemetry.",
    short_help="Ship DIR and run COMMAND, recording its telemetry.",
)
@click.argument("directory", type=GivenPath("directory", "the one to ship", ". or ./project"))
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND...")
@click.option(
    "--telemetry",
    type=GivenPath("file", "the layout file", "./telemetry.toml"),
    metavar="FILE",
    help="Another layout file than DIR/telemetry.toml.",
)
@click.option("--org", help=f"The run's org (default: {services.DEFAULT_ORG}).")
@click.option("--detach", is_flag=True, help="Print the run's name and return.")
@click.pass_context
def command(ctx, directory, command, telemetry, org, detach):
    client = remote.client()  # with a token, the run is made on the server and runs here
    launch = services.run_launch if client is None else partial(client_runs.launch, client)
    run = launch(directory=directory, command=list(command), telemetry=telemetry, org=org)
    # The run's name first, then its log: `div run … | head -1` takes the name, and the run
    # goes on to the end whether anyone still reads or not.
    out = logs.Printer(sys.stdout.buffer)
    out.write(f"{run.name}\n".encode())
    if detach:
        (runner.detach if client is None else client_runs.detach)(run, list(command))
        return
    if client is None:
        ctx.exit(runner.run_attached(run, out, list(command)))
    ctx.exit(client_runs.supervise(client, run, list(command), out))
