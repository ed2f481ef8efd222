"""div user: users, who log in with one-time links."""

from __future__ import annotations

import click

from divergent.settings import http_url
from telemetry import services
from telemetry.commands import SERVER, group, secret_key_ready

URL_HELP = "The server's address (default: DIVERGENT_URL, else where div serve last served)."


@group(
    where=SERVER,
    short_help="Make a user; print a one-time login link.",
    help="Users: no passwords; each logs in with a one-time link.",
)
def command():
    secret_key_ready()


@command.command(help="Make a user and print a one-time login link.")
@click.argument("username")
@click.option(
    "--org",
    "orgs",
    metavar="ORG",
    multiple=True,
    help=f"An org whose runs the user sees (default: {services.DEFAULT_ORG}).",
)
@click.option("--url", help=URL_HELP)
def add(username, orgs, url):
    click.echo(services.user_add(username=username, orgs=list(orgs), base=checked(url)))


@command.command(help="Print a new one-time login link for a user.")
@click.argument("username")
@click.option("--url", help=URL_HELP)
def link(username, url):
    click.echo(services.user_link(username=username, base=checked(url)))


def checked(url: str | None) -> str | None:
    """--url held to DIVERGENT_URL's rule, as div login holds its URL: a link that opens."""
    return None if url is None else http_url("--url", url)
