"""A key's values, sealed in chunks: one chunk per key per window of WINDOW points. Pure: no
Django, no I/O.

A window is a run's seqs `w * WINDOW + 1` to `(w + 1) * WINDOW`. Once the ingester has all of a
window's points it cuts them into one Column per key (its seqs and its values), and each column
is packed into a compact chunk: the values as 8-byte numbers, and the seqs as a first seq and a
stride when they are evenly spaced (a key on every point, or on every 10th), else as 2-byte
offsets into the window. Reading a key is then reading its chunks, an index range, whatever else
the run writes; docs/storage.md says why this layout and not another.

Numbers come back as they were written: an integer as an integer, a float as the same float.

>>> column = Column(range(1, 4), [100, 0.5, 2])
>>> unpack(0, pack(0, column)) == column
True
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add

from telemetry.lines import Number

WINDOW = 1024  # points a window holds. Stored chunks are cut at it: never change it.

FLOATS, INTS, MIXED = 0, 1, 2  # how a chunk's values are packed
_SWAP = sys.byteorder == "big"  # chunks are little-endian on every machine
_INT, _FLOAT = struct.Struct("<q"), struct.Struct("<d")

Seqs = range | list[int]
Values = list | array  # an array as read from a chunk: tolist() makes the numbers


def window_of(seq: int) -> int:
    return (seq - 1) // WINDOW


def window_start(window: int) -> int:
    """The window's first seq."""
    return window * WINDOW + 1


@dataclass
class Column:
    """One key's values in seq order, with the seq of each: a range when evenly spaced."""

    seqs: Seqs
    values: Values


@dataclass(frozen=True)
class Packed:
    """A column as a chunk row stores it."""

    count: int
    first: int  # the first seq
    stride: int  # between seqs when evenly spaced; 0 when `seqs` lists them
    seqs: bytes | None  # offsets into the window, 2 bytes each
    kind: int  # FLOATS, INTS or MIXED
    values: bytes
    low: float  # the lowest and highest value, rounded outwards: what a range of x looks up
    high: float


def cut(points: Iterable[tuple[int, dict[str, Number]]]) -> dict[str, Column]:
    """Points of consecutive seqs -> each key's column, keys in the order the points first
    carry them.

    >>> cut([(1, {"step": 10, "loss": 0.5}), (2, {"step": 20})])["step"]
    Column(seqs=range(1, 3), values=[10, 20])
    """
    points = list(points)
    if not points:
        return {}
    wide = len(points[0][1]) > WIDE
    return (_cut_by_shape if wide else _cut_by_number)(points)


WIDE = 8  # numbers a point carries past which grouping points by their keys pays


def _cut_by_number(points: list[tuple[int, dict[str, Number]]]) -> dict[str, Column]:
    """Each number laid over its key's cells: a list store a number, the least work a Python
    step a number can do."""
    start = points[0][0]
    size = points[-1][0] - start + 1
    cells: dict[str, list] = {}
    for seq, numbers in points:
        at = seq - start
        for key, value in numbers.items():
            column = cells.get(key)
            if column is None:
                column = cells[key] = [None] * size
            column[at] = value
    return {key: _gathered(column, start) for key, column in cells.items()}


def _cut_by_shape(points: list[tuple[int, dict[str, Number]]]) -> dict[str, Column]:
    """Points grouped by the keys they carry, in order, and each group turned into columns in
    C: a Python step a point, not a number, which a line of 64 numbers feels."""
    start = points[0][0]
    size = points[-1][0] - start + 1
    shapes: dict[tuple[str, ...], tuple[list[int], list[tuple]]] = {}
    for seq, numbers in points:
        shape = tuple(numbers)
        group = shapes.get(shape)
        if group is None:
            group = shapes[shape] = ([], [])
        group[0].append(seq - start)
        group[1].append(tuple(numbers.values()))
    parts: dict[str, list[tuple[list[int], tuple]]] = {}
    for shape, (places, rows) in shapes.items():
        for key, values in zip(shape, zip(*rows, strict=True), strict=True):
            parts.setdefault(key, []).append((places, values))
    found = {}
    for key, pieces in parts.items():
        if len(pieces) == 1:  # carried by the points of one shape alone
            places, values = pieces[0]
            found[key] = Column(evenly(list(map(add, places, repeat(start)))), list(values))
            continue
        column: list = [None] * size
        for places, values in pieces:
            deque(map(column.__setitem__, places, values), maxlen=0)
        found[key] = _gathered(column, start)
    return found


def _gathered(column: list, start: int) -> Column:
    """A key's cells over consecutive seqs from start, None where it has no value, as a Column."""
    if None not in column:
        return Column(range(start, start + len(column)), column)
    there = [value is not None for value in column]
    seqs = list(compress(range(start, start + len(column)), there))
    return Column(evenly(seqs), list(compress(column, there)))


def evenly(seqs: list[int]) -> Seqs:
    """The seqs as a range when they are evenly spaced, else as they are."""
    first = seqs[0]
    if len(seqs) == 1:
        return range(first, first + 1)
    spaced = range(first, seqs[-1] + 1, seqs[1] - first)
    return spaced if len(spaced) == len(seqs) and list(spaced) == seqs else seqs


def joined(before: Column, after: Column) -> Column:
    """A window's column continued: what a window sealed part-full (its run's telemetry closed,
    then opened again) holds, followed by the points that came after."""
    seqs = [*before.seqs, *after.seqs]
    return Column(evenly(seqs), _listed(before.values) + _listed(after.values))


def pack(window: int, column: Column) -> Packed:
    seqs, values = column.seqs, column.values
    stride, offsets = 0, None
    if isinstance(seqs, range):
        stride = seqs.step
    else:
        start = window_start(window)
        offsets = _bytes(array("H", [seq - start for seq in seqs]))
    types = set(map(type, values))
    if types == {float}:
        kind, packed = FLOATS, _bytes(array("d", values))
    elif types == {int}:
        kind, packed = INTS, _bytes(array("q", values))
    else:
        # A key written as 0 once and as floats after: each value keeps its own type.
        is_int = bytes(type(value) is int for value in values)
        words = b"".join(
            _INT.pack(v) if t else _FLOAT.pack(v) for v, t in zip(values, is_int, strict=True)
        )
        kind, packed = MIXED, words + is_int
    return Packed(
        count=len(values),
        first=seqs[0],
        stride=stride,
        seqs=offsets,
        kind=kind,
        values=packed,
        low=_outward(min(values), -math.inf),
        high=_outward(max(values), math.inf),
    )


def unpack(window: int, packed: Packed) -> Column:
    count, first = packed.count, packed.first
    if packed.seqs is None:
        seqs: Seqs = range(first, first + packed.stride * count, packed.stride)
    else:
        start = window_start(window)
        seqs = [start + offset for offset in _array("H", packed.seqs)]
    blob = packed.values
    # Left as arrays: a reader that wants a few of the values takes them without the rest.
    values: Values
    if packed.kind == FLOATS:
        values = _array("d", blob)
    elif packed.kind == INTS:
        values = _array("q", blob)
    else:
        words, is_int = blob[: 8 * count], blob[8 * count :]
        ints, floats = _array("q", words), _array("d", words)
        values = [a if t else b for a, b, t in zip(ints, floats, is_int, strict=True)]
    return Column(seqs, values)


def cells(column: Column | None, window: int, low: int, end: int) -> list:
    """The column's values at the window's places low to end (not included), None where the
    key has none. A key on every point is sliced as it is."""
    if covers(column, window, low, end):
        first = column.seqs.start - window_start(window)
        return _listed(column.values[low - first : end - first])
    return spread(column, window)[low:end]


def covers(column: Column | None, window: int, low: int, end: int) -> bool:
    """Whether the key has a value at each of the window's places low to end: its cells() then
    hold no None, and a printer need not look for one."""
    if column is None or not isinstance(column.seqs, range) or column.seqs.step != 1:
        return False
    first = column.seqs.start - window_start(window)
    return first <= low and end <= first + len(column.seqs)


def spread(column: Column | None, window: int) -> list:
    """The column laid over its window: WINDOW cells, None where the key has no value."""
    cells: list = [None] * WINDOW
    if column is None:
        return cells
    start = window_start(window)
    seqs = column.seqs
    if isinstance(seqs, range):
        first = seqs.start - start
        cells[first : first + seqs.step * len(seqs) : seqs.step] = column.values
    else:
        for seq, value in zip(seqs, column.values, strict=True):
            cells[seq - start] = value
    return cells


def against(x: Column | None, y: Column, window: int) -> tuple[list, list]:
    """y's values and x's value at each of them, leaving off where x has none; x None draws
    against the seq. Evenly spaced keys pair up by slicing, without a Python step per value,
    and x's values where y has none are never made into numbers."""
    if x is None:
        return list(y.seqs), _listed(y.values)
    if x.seqs == y.seqs:  # a key on every point against step on every point, say
        return _listed(x.values), _listed(y.values)
    if isinstance(x.seqs, range) and isinstance(y.seqs, range):
        xr, yr = x.seqs, y.seqs
        skip, into = divmod(yr.start - xr.start, xr.step)
        every, off_beat = divmod(yr.step, xr.step)
        if not into and not off_beat and skip >= 0 and yr[-1] <= xr[-1]:
            # An eval on every 10th point against step on every point: x sliced at y's seqs.
            end = skip + every * (len(yr) - 1) + 1
            return _listed(x.values[skip:end:every]), _listed(y.values)
    cells = spread(x, window)
    start = window_start(window)
    seqs = y.seqs
    if isinstance(seqs, range):
        first = seqs.start - start
        xs = cells[first : first + seqs.step * len(seqs) : seqs.step]
    else:
        xs = [cells[seq - start] for seq in seqs]
    ys = _listed(y.values)
    if None in xs:
        there = [value is not None for value in xs]
        return list(compress(xs, there)), list(compress(ys, there))
    return xs, ys


def _listed(values: Values) -> list:
    return values.tolist() if isinstance(values, array) else values


def _outward(value: Number, direction: float) -> float:
    """A float no further in than the value, so a range lookup never misses it."""
    as_float = float(value)
    if type(value) is int and as_float != value and (as_float < value) != (direction < 0):
        return math.nextafter(as_float, direction)
    return as_float


def _bytes(numbers: array) -> bytes:
    if _SWAP:
        numbers.byteswap()
    return numbers.tobytes()


def _array(code: str, blob: bytes) -> array:
    numbers = array(code, blob)
    if _SWAP:
        numbers.byteswap()
    return numbers


def within(column: Column, low: int, high: int) -> Column:
    """The column's seqs from low to high, and their values."""
    seqs = column.seqs
    start = bisect_left(seqs, low)
    end = bisect_right(seqs, high)
    if start == 0 and end == len(seqs):
        return column
    return Column(seqs[start:end], column.values[start:end])


def points_of(
    columns: dict[int, Column], names: dict[int, str], low: int, high: int
) -> list[tuple[int, dict[str, Number]]]:
    """Whole points from low to high, out of their keys' columns (by key number, the order the
    run first wrote them). Every seq of a sealed window is a point with one number at least."""
    rows: list[dict] = [{} for _ in range(high - low + 1)]
    for key_no in sorted(columns):
        column = within(columns[key_no], low, high)
        name = names[key_no]
        for seq, value in zip(column.seqs, column.values, strict=True):
            rows[seq - low][name] = value
    return list(enumerate(rows, low))
