"""div login: this machine's div talks to a server, with a token read from stdin."""

from __future__ import annotations

import getpass
import os
import sys

import click

from telemetry import remote
from telemetry.commands import command

SHADOWED = "div: DIVERGENT_TOKEN is set and wins over {path}; unset it to use what was kept"


@command(
    writes=None,
    short_help="Use a server's API from here, with a token.",
    help=(
        "Checks a token (read from stdin) against the server at URL, then keeps both in "
        "~/.config/divergent/config.toml (mode 0600): every div command then works against "
        "that server, with no database here."
    ),
)
@click.argument("url")
def command(url):
    # Never from argv, which ps shows; a terminal is asked without echo.
    token = getpass.getpass("Token: ") if sys.stdin.isatty() else sys.stdin.readline()
    me, path = remote.login(url, token.strip())
    orgs = ", ".join(me.get("orgs") or []) or "none yet"
    click.echo(
        f"Logged in to {url.rstrip('/')} as {me.get('username')} (orgs: {orgs}); kept in {path}"
    )
    if os.environ.get("DIVERGENT_TOKEN") is not None:
        sys.stderr.write(SHADOWED.format(path=path) + "\n")
