"""div org: orgs and their members."""

from __future__ import annotations

import click

from telemetry import services
from telemetry.commands import SERVER, group


@group(
    where=SERVER,
    short_help="Make an org and add users to it.",
    help="Orgs: a user sees only the runs of their orgs.",
)
def command():
    pass


@command.command(help="Make an org (if new), and add users to it.")
@click.argument("org")
@click.option("--member", "members", metavar="USER", multiple=True, help="A user to add.")
def add(org, members):
    services.org_add(name=org, members=list(members))
