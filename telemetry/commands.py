"""What every `div` command shares: one-line errors, quiet pipes, a database that is set up."""

from __future__ import annotations

import gc
import os
import sys

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, handle_default_options
from django.db import DatabaseError, connections

from telemetry.encryption import SecretsKeyError

NOT_SET_UP = "the database is not set up yet; div migrate sets it up"


class DivCommand(BaseCommand):
    requires_system_checks: list = []
    # Commands that write set up the database themselves; readers only say it is missing.
    migrates = False

    def run_from_argv(self, argv: list[str]) -> None:
        # What set-up loaded lives as long as the command: the collector need never scan it
        # again, which matters when div telemetry reads 200,000 points.
        gc.freeze()
        # Not Django's: a usage error or a failure is one line on stderr, never a traceback.
        parser = self.create_parser(argv[0], argv[1])
        name = f"div {argv[1]}"
        try:
            options = parser.parse_args(argv[2:])
            cmd_options = vars(options)
            args = cmd_options.pop("args", ())
            handle_default_options(options)
            self.execute(*args, **cmd_options)
        except CommandError as e:
            message = str(e)
            if message.startswith("Error: "):  # argparse's, about the words given
                sys.stderr.write(f"{name}: {message[7:]}; {name} --help lists the options\n")
                sys.exit(2)
            sys.stderr.write(f"div: {message}\n")
            sys.exit(e.returncode)
        except SecretsKeyError as e:
            sys.stderr.write(f"div: {e}\n")
            sys.exit(1)
        except DatabaseError as e:
            sys.stderr.write(f"div: {NOT_SET_UP if _missing_table(e) else e}\n")
            sys.exit(1)
        except BrokenPipeError:
            # The reader went away (div telemetry … | head): stop quietly, as cat does.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except KeyboardInterrupt:
            sys.exit(130)
        finally:
            connections.close_all()

    def execute(self, *args, **options):
        if self.migrates:
            database_set_up()
        return super().execute(*args, **options)


def database_set_up() -> None:
    call_command("migrate", interactive=False, verbosity=0)


def _missing_table(error: DatabaseError) -> bool:
    text = str(error)
    return "no such table" in text or ("relation" in text and "does not exist" in text)
