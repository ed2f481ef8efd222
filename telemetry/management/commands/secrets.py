"""div secrets: an org's secrets, the value read from stdin, never from argv."""

from __future__ import annotations

import sys

import click

from telemetry import sources
from telemetry.commands import group


@group(
    short_help="Set, list and delete an org's secrets.",
    help="An org's secrets: given to its runs as environment variables, masked everywhere.",
)
def command():
    pass


@command.command(name="set", help="Set a secret, its value read from stdin, never from argv.")
@click.argument("org")
@click.argument("name")
def set_(org, name):
    # Bytes whatever the locale; what is not UTF-8 is kept as surrogates, for the service to refuse.
    value = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    # One trailing newline is echo's, not the secret's.
    sources.current().secret_put(org, name, value.removesuffix("\n"))


@command.command(name="list", help="The names of an org's secrets, never their values.")
@click.argument("org")
def list_(org):
    sys.stdout.write("".join(name + "\n" for name in sources.current().secret_names(org)))


@command.command(help="Delete a secret.")
@click.argument("org")
@click.argument("name")
def delete(org, name):
    sources.current().secret_delete(org, name)
