"""Which DIVERGENT_HOME this process works in: an id made once in each home and kept there.

A run records the id of the home that holds its files (`div run` here, or a server that
uploads are appended to), and an ingester takes the lease of a run only when the run's home
is its own: two homes sharing one database never read, or close, each other's runs.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings

HOME_ID_FILE = "home-id"

_known: dict[Path, str] = {}


def home_id() -> str:
    """This home's id, made the first time it is asked for: two processes starting at once
    keep the same one (written aside, then linked in)."""
    home = Path(settings.DIVERGENT_HOME)
    if home in _known:
        return _known[home]
    path = home / HOME_ID_FILE
    try:
        made = path.read_text().strip()
    except FileNotFoundError:
        made = ""
    if not made:
        home.mkdir(parents=True, exist_ok=True)
        draft = home / f".{HOME_ID_FILE}.{os.getpid()}"
        draft.write_text(secrets.token_hex(16) + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
        made = path.read_text().strip()
    _known[home] = made
    return made


def these() -> list[str]:
    """The homes whose runs this home looks after: its own, and "" for runs made before homes
    were recorded (holds() tells which of those are here)."""
    return [home_id(), ""]


def holds(run) -> bool:
    """Whether this home holds the run's files: it is recorded as this home's, or it was made
    before homes were recorded and its folder is here."""
    return run.home == home_id() or (not run.home and run.folder.is_dir())
