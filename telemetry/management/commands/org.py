"""div org add ORG [--member USER]"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from telemetry import services
from telemetry.commands import DivCommand
from telemetry.models import Membership

NO_USER = 'there is no user "{name}"; div user add {name} makes one'


class Command(DivCommand):
    help = "Makes an org, and adds a user to it: a user sees only their orgs' runs."
    migrates = True

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="add")
        adder = actions.add_parser("add")
        adder.add_argument("org")
        adder.add_argument("--member", metavar="USER", action="append", default=[])

    def handle(self, *args, action, org, member=(), **options):
        the_org = services.org_get_or_create(name=org)
        for username in member:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(NO_USER.format(name=username))
            Membership.objects.get_or_create(org=the_org, user=user)
