"""div serve: daphne, websockets and the ingester in one process (telemetry/server.py)."""

from __future__ import annotations

import click

from telemetry import server
from telemetry.commands import SERVER, Host, Port, command, secret_key_ready


@command(
    where=SERVER,
    short_help="Serve the web app, with its ingester.",
    help="Serves the web app, with the ingester running inside it.",
)
@click.option(
    "--host", type=Host(), default="127.0.0.1", show_default=True, help="The address to listen on."
)
@click.option(
    "--port",
    type=Port(),
    default=8000,
    show_default=True,
    help="The port to listen on; 0 picks a free one.",
)
@click.option("--demo", is_flag=True, help="Start a demo run streaming telemetry.")
def command(host, port, demo):
    secret_key_ready()
    server.serve(host, port, with_demo=demo, say=lambda line: click.echo(line))
