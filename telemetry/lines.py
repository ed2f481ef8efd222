"""The rules of one telemetry line: raw bytes in, a point's numbers or the reason it was dropped.

Pure: no Django, no I/O. The ingester, the API and the tests all call `read_line`, so the spec's
"Writing it" and "What is not kept" are written here once.

>>> read_line(b'{"step": 120, "eval": {"loss": 0.4}, "note": "warmup", "lr": NaN}')
Line(numbers={'step': 120, 'eval.loss': 0.4}, passed_over=('lr',), bad_keys=(), secret_keys=())
>>> read_line(b'[1, 2]')
<Reason.NOT_OBJECT: 'not_object'>
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from telemetry.layout import KEY_PATTERN

MAX_LINE_BYTES = 4096
# A UTF-8 byte-order mark, which Windows tools (PowerShell's utf8, Notepad) write at the start of
# a file. Only there is it stepped over, by the ingester, which alone knows where the file
# starts; anywhere else a line that begins with one is not JSON, and is dropped as such.
BOM = b"\xef\xbb\xbf"
MAX_NUMBERS = 64
MAX_KEYS = 256
MAX_POINTS = 200_000

Number = int | float
# Integers the databases store as integers; wider ones are kept as floats, as orjson reads them.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


class Reason(enum.StrEnum):
    """Why a line, or a key of a line, was not kept. The values are stored: never rename them."""

    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    TOO_LONG = "too_long"
    TOO_MANY_NUMBERS = "too_many_numbers"
    BAD_KEY = "bad_key"
    SECRET_KEY = "secret_key"  # a key that spelt a secret, left out by the masker
    TOO_MANY_KEYS = "too_many_keys"
    TOO_MANY_POINTS = "too_many_points"
    # Not a line: the telemetry path could not be read (a directory, a FIFO, a link out of the
    # run's folder, no permission), counted once each time it becomes so.
    UNREADABLE = "unreadable"
    # Not a line: a rotated file was gone (deleted, compressed, moved away) before the ingester
    # read it to its end, counted once a file; whatever it held past the offset is unread.
    ROTATED_AWAY = "rotated_away"


@dataclass(frozen=True)
class Notice:
    one: str
    many: str
    advice: str


# The wording of every notice, once: the log says `one` the first time a reason comes up,
# and `div telemetry` repeats the counts with `many`.
NOTICES = {
    Reason.NOT_JSON: Notice(
        "dropped a line that is not JSON",
        "dropped {n} lines that are not JSON",
        "write one JSON object per line",
    ),
    Reason.NOT_OBJECT: Notice(
        "dropped a line that is not a JSON object",
        "dropped {n} lines that are not JSON objects",
        "write one JSON object per line",
    ),
    Reason.TOO_LONG: Notice(
        "dropped a line over 4 KiB",
        "dropped {n} lines over 4 KiB",
        "keep each line to 4,096 bytes",
    ),
    Reason.TOO_MANY_NUMBERS: Notice(
        "dropped a line with more than 64 numbers",
        "dropped {n} lines with more than 64 numbers",
        "split the numbers across lines",
    ),
    Reason.BAD_KEY: Notice(
        "left out a key that is not letters, digits, _ and - between dots",
        "left out {n} keys that are not letters, digits, _ and - between dots",
        "write train.loss, not train/loss",
    ),
    Reason.SECRET_KEY: Notice(
        "left out a key that holds a secret's value",
        "left out {n} keys that hold a secret's value",
        "keep secrets out of key names",
    ),
    Reason.TOO_MANY_KEYS: Notice(
        "left out a key past the run's 256",
        "left out {n} keys past the run's 256",
        "write fewer distinct keys",
    ),
    Reason.TOO_MANY_POINTS: Notice(
        "dropped a line past the run's 200,000 points",
        "dropped {n} lines past the run's 200,000 points",
        "write a point less often",
    ),
    Reason.UNREADABLE: Notice(
        "could not read the telemetry file",
        "could not read the telemetry file {n} times",
        "make DIVERGENT_TELEMETRY_PATH a regular file in the run's folder",
    ),
    Reason.ROTATED_AWAY: Notice(
        "lost what was unread of a rotated telemetry file",
        "lost what was unread of {n} rotated telemetry files",
        "keep rotated files beside it, uncompressed, until they are read",
    ),
}


def notice(reason: Reason | str, count: int = 1) -> str:
    """The one-line notice for a reason: the log's first mention, or div telemetry's count."""
    words = NOTICES[Reason(reason)]
    said = words.one if count == 1 else words.many.format(n=f"{count:,}")
    return f"telemetry: {said}; {words.advice}"


@dataclass(frozen=True)
class Line:
    """What a line keeps: its numbers by dotted key, in the order written."""

    numbers: dict[str, Number]
    # Keys whose value was NaN or +-Infinity: passed over, but counted against the key.
    passed_over: tuple[str, ...] = ()
    # Keys left out of the point for their name, like train/loss.
    bad_keys: tuple[str, ...] = ()
    # Keys left out because they held a secret's value, masked (the masker's read_line).
    secret_keys: tuple[str, ...] = ()


def read_line(raw: bytes) -> Line | Reason:
    """One line, without its newline, as a Line, or the Reason it is dropped whole."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if len(raw) > MAX_LINE_BYTES:
        return Reason.TOO_LONG
    finite = True  # orjson reads no NaN or Infinity: only the standard parser may
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # Python's json writes NaN and Infinity, and orjson refuses them (and numbers that
        # overflow to infinity): the standard parser accepts both, on valid UTF-8 only.
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return Reason.NOT_JSON
        finite = False
    if not isinstance(value, dict):
        return Reason.NOT_OBJECT

    leaves: list[tuple[str, Number]] = []
    _flatten(value, "", leaves)
    if len(leaves) > MAX_NUMBERS:
        return Reason.TOO_MANY_NUMBERS

    numbers: dict[str, Number] = {}
    passed_over: list[str] = []
    bad_keys: list[str] = []
    for key, number in leaves:
        if key not in _CARRIABLE:
            if not KEY_PATTERN.fullmatch(key):
                bad_keys.append(key)
                continue
            if len(_CARRIABLE) < _CARRIABLE_MOST:
                _CARRIABLE.add(key)
        if not finite and type(number) is float and not math.isfinite(number):
            passed_over.append(key)
        else:
            numbers[key] = number
    return Line(numbers, tuple(passed_over), tuple(bad_keys))


# Names already found carriable: a run writes the same few keys on every line, and matching
# each against KEY_PATTERN again costs as much as reading the line. Bounded, whatever comes.
_CARRIABLE: set[str] = set()
_CARRIABLE_MOST = 4096


def _flatten(obj: dict, prefix: str, leaves: list[tuple[str, Number]]) -> None:
    # Iterative, in the order written: a 4 KiB line can nest deeper than Python's recursion
    # limit. Strings, booleans, nulls and arrays are passed over; bool is an int to Python,
    # so the type is checked exactly.
    stack = [(prefix, iter(obj.items()))]
    while stack:
        prefix, items = stack[-1]
        for key, value in items:
            kind = type(value)
            if kind is float:
                leaves.append((prefix + key, value))
            elif kind is int:
                leaves.append(
                    (prefix + key, value if INT_MIN <= value <= INT_MAX else _wide(value))
                )
            elif kind is dict:
                stack.append((prefix + key + ".", iter(value.items())))
                break
        else:
            stack.pop()


def _wide(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # past any float: passed over, like 1e400
        return math.inf if value > 0 else -math.inf


def format_number(value: Number | None) -> str:
    """A number as written: an integer as an integer, a float in Python's shortest repr;
    nothing for a value that is missing, never a zero."""
    return "" if value is None else repr(value)


def format_row(values: Iterable[Number | None]) -> list[str]:
    """format_number over a row, inlined: `div telemetry` calls it for every point."""
    return ["" if value is None else repr(value) for value in values]
