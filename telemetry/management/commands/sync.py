"""div sync: what a server still lacks of runs made from this machine, sent."""

from __future__ import annotations

import click

from telemetry import client_runs, remote
from telemetry.commands import CLIENT, RUN, command


@command(
    writes=None,
    where=CLIENT,
    short_help="Upload what the server lacks of runs made here.",
    help=(
        "Uploads what the server still lacks of runs made from this machine (all of them, or "
        "those named) and how they ended: after the server or the network was away."
    ),
)
@click.argument("runs", nargs=-1, type=RUN)
@click.pass_context
def command(ctx, runs):
    ctx.exit(client_runs.sync(remote.client(), list(runs)))
