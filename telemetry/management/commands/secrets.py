"""div secrets set ORG NAME (value on stdin) | list ORG | delete ORG NAME"""

from __future__ import annotations

import re
import sys

from django.core.management.base import CommandError

from telemetry import services
from telemetry.commands import DivCommand
from telemetry.models import Org, Secret

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BAD_NAME = "{name} cannot be an environment variable; use letters, digits and _, like HF_TOKEN"
EMPTY = 'no value on stdin; pipe it in, like: printf %s "$TOKEN" | div secrets set ORG NAME'
NO_SECRET = 'org {org} has no secret "{name}"'


class Command(DivCommand):
    help = "An org's secrets: given to its runs as environment variables, masked everywhere."
    migrates = True

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="set|list|delete")
        setter = actions.add_parser("set", help="read the value from stdin, never from argv")
        setter.add_argument("org")
        setter.add_argument("name")
        lister = actions.add_parser("list", help="names only")
        lister.add_argument("org")
        deleter = actions.add_parser("delete")
        deleter.add_argument("org")
        deleter.add_argument("name")

    def handle(self, *args, action, org, name=None, **options):
        if action == "set":
            if not NAME.fullmatch(name):
                raise CommandError(BAD_NAME.format(name=name))
            value = sys.stdin.read()
            # One trailing newline is echo's, not the secret's.
            value = value[:-1] if value.endswith("\n") else value
            if not value:
                raise CommandError(EMPTY)
            try:
                services.secret_set(
                    org=services.org_get_or_create(name=org), name=name, value=value
                )
            except services.SecretRefused as e:
                raise CommandError(str(e)) from None
            return
        the_org = Org.objects.filter(name=org).first()
        if action == "list":
            names = (
                Secret.objects.filter(org=the_org).order_by("name").values_list("name", flat=True)
            )
            self.stdout.write("".join(n + "\n" for n in names), ending="")
        elif the_org is None or not services.secret_delete(org=the_org, name=name):
            raise CommandError(NO_SECRET.format(org=org, name=name))
