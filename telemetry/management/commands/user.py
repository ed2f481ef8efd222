"""div user add USER [--org ORG ...]: a user, in their orgs, with a one-time login link."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from telemetry import services
from telemetry.commands import DivCommand

TAKEN = 'there is already a user "{name}"; div user link {name} prints a new login link'


class Command(DivCommand):
    help = "Makes a user (no password: a one-time login link) and adds them to orgs."
    migrates = True

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="add|link")
        adder = actions.add_parser("add", help="make a user and print a one-time login link")
        adder.add_argument("username")
        adder.add_argument(
            "--org",
            action="append",
            default=[],
            metavar="ORG",
            help=f"an org the user sees the runs of (default: {services.DEFAULT_ORG})",
        )
        adder.add_argument("--url", default=services.DEFAULT_URL, help="the server's address")
        linker = actions.add_parser("link", help="a new one-time login link for a user")
        linker.add_argument("username")
        linker.add_argument("--url", default=services.DEFAULT_URL, help="the server's address")

    def handle(self, *args, action, username, org=(), url, **options):
        users = get_user_model()
        if action == "add":
            if users.objects.filter(username=username).exists():
                raise CommandError(TAKEN.format(name=username))
            user = services.user_create(username=username, orgs=org or [services.DEFAULT_ORG])
        else:
            user = users.objects.filter(username=username).first()
            if user is None:
                raise CommandError(
                    f'there is no user "{username}"; div user add {username} makes one'
                )
        self.stdout.write(services.login_link(user=user, base=url))
