"""Which DIVERGENT_HOME this process works in: an id made once in each home and kept there.

A run records the id of the home that holds its files (`div run` here, or a server that
uploads are appended to), and an ingester takes the lease of a run only when the run's home
is its own: two homes sharing one database never read, or close, each other's runs.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from django.conf import settings

from divergent.settings import made_once

HOME_ID_FILE = "home-id"

_known: dict[Path, str] = {}


def home_id() -> str:
    """This home's id, made the first time it is asked for."""
    home = Path(settings.DIVERGENT_HOME)
    if home not in _known:
        _known[home] = made_once(home / HOME_ID_FILE, lambda: secrets.token_hex(16))
    return _known[home]


def these() -> list[str]:
    """The homes whose runs this home looks after: its own, and "" for runs made before homes
    were recorded (holds() tells which of those are here)."""
    return [home_id(), ""]


def holds(run) -> bool:
    """Whether this home holds the run's files: it is recorded as this home's, or it was made
    before homes were recorded and its folder is here."""
    return run.home == home_id() or (not run.home and run.folder.is_dir())
