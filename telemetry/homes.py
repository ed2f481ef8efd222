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
from telemetry.errors import Refused

HOME_ID_FILE = "home-id"

# What to do when the id cannot be read: a new one leaves the runs made here before to no home.
LOST = (
    "restore it, or remove it and a new id is made (the runs made here before then belong to "
    "no home: their telemetry is no longer read)"
)

CANNOT_MAKE = "cannot make {folder} ({why}); point {variable} at a folder this user can write"

_known: dict[Path, str] = {}


def folder_made(folder: Path, variable: str = "DIVERGENT_HOME") -> None:
    """The folder (the home, or the one the database file is in), made if missing; Refused
    naming the variable that chose it when it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise Refused(CANNOT_MAKE.format(folder=folder, why=why, variable=variable)) from None


def home_id() -> str:
    """This home's id, made the first time it is asked for."""
    home = Path(settings.DIVERGENT_HOME)
    if home not in _known:
        _known[home] = made_once(home / HOME_ID_FILE, lambda: secrets.token_hex(16), advice=LOST)
    return _known[home]


def these() -> list[str]:
    """The homes whose runs this home looks after: its own, and "" for runs made before homes
    were recorded (holds() tells which of those are here)."""
    return [home_id(), ""]


def holds(run) -> bool:
    """Whether this home holds the run's files: it is recorded as this home's, or it was made
    before homes were recorded and its folder is here."""
    return run.home == home_id() or (not run.home and run.folder.is_dir())
