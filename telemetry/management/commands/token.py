"""div token: API tokens, for div on other machines (div login) and scripts."""

from __future__ import annotations

import sys

import click

from telemetry import sources, tables
from telemetry.commands import group

USER_HELP = "Whose token (on the server; a client has only its own user's)."


@group(
    short_help="Make, list and revoke API tokens.",
    help="API tokens: each does what its user can. The server keeps only a hash of each.",
)
def command():
    pass


@command.command(help="Make a token and print it, this once.")
@click.option("--user", help=USER_HELP)
@click.option("--name", help="What to call it, like laptop (default: token-1, token-2, ...).")
def create(user, name):
    sys.stdout.write(sources.current().token_create(user, name) + "\n")


@command.command(name="list", help="The tokens: name, when made and last used; never the token.")
@click.option("--user", help=USER_HELP)
def list_(user):
    sys.stdout.write(tables.tokens_table(sources.current().tokens(user)))


@command.command(help="Revoke a token: it stops working at once.")
@click.argument("name")
@click.option("--user", help=USER_HELP)
def revoke(name, user):
    sources.current().token_revoke(user, name)
