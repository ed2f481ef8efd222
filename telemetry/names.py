"""What may name an org or a user (a slug), and what names a run. Pure: no Django, no I/O; the
services, the models and the comparison call it.

>>> slug("acme", "an org")
'acme'
"""

from __future__ import annotations

import re

from telemetry.errors import Refused

SLUG = re.compile(r"[A-Za-z0-9_-]{1,100}")
NOT_A_SLUG = '"{value}" cannot name {kind}; use up to 100 letters, digits, _ and -, like {like}'


def slug(value: str, kind: str, like: str = "acme") -> str:
    """The name, or Refused saying what a name may be."""
    if not SLUG.fullmatch(value):
        raise Refused(NOT_A_SLUG.format(value=value, kind=kind, like=like))
    return value


RUN_NAME = re.compile(r"(?:run-)?([0-9]{1,18})")


def run_number(name: str) -> int | None:
    """run-7 or 7 -> 7; None for any other text (ASCII digits only: "run-²" is not 2), and for
    run-0: runs are numbered from 1, so it names none, wherever it is written."""
    match = RUN_NAME.fullmatch(name)
    return (int(match[1]) or None) if match else None
