"""What may name an org or a user (a slug), what names a run, and how an error shows a name it
was given. Pure: no Django, no I/O; the services, the models, the comparison and the `div`
commands call it.

>>> slug("acme", "an org")
'acme'
>>> shown("bob\\n")
'"bob\\\\n"'
"""

from __future__ import annotations

import json
import re

from telemetry.errors import Refused

SLUG = re.compile(r"[A-Za-z0-9_-]{1,100}")
NOT_A_SLUG = "{value} cannot name {kind}; use up to 100 letters, digits, _ and -, like {like}"


def slug(value: str, kind: str, like: str = "acme") -> str:
    """The name, or Refused saying what a name may be."""
    if not SLUG.fullmatch(value):
        raise Refused(NOT_A_SLUG.format(value=shown(value), kind=kind, like=like))
    return value


RUN_NAME = re.compile(r"(?:run-)?([0-9]{1,18})")


def run_number(name: str) -> int | None:
    """run-7 or 7 -> 7; None for any other text (ASCII digits only: "run-²" is not 2), and for
    run-0: runs are numbered from 1, so it names none, wherever it is written."""
    match = RUN_NAME.fullmatch(name)
    return (int(match[1]) or None) if match else None


SHOWN_PATH = 200  # the characters of a path an error shows: paths are longer than names


def shown(name: str, most: int = 40) -> str:
    """A name as an error shows it: quoted, its first `most` characters, escaped onto one line."""
    return json.dumps(name[:most], ensure_ascii=False)


# What would break a line or steer the terminal: control characters (a newline, a carriage
# return, an escape sequence's ESC) and the Unicode line and paragraph separators.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """An error as one line: whatever would break it or steer the terminal escaped as JSON
    escapes it (\\n, \\u001b), for the messages that show a value unquoted."""
    return _BREAKS.sub(lambda m: json.dumps(m[0])[1:-1], text)
