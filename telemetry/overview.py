"""Min/max buckets of a y key against an x key, kept up to date as points arrive. Pure: no
Django, no I/O.

A panel's first view of a 200,000-point key reads about 2,000 of these buckets instead of the
points, and draws the same honest chart downsample.min_max draws from the points: each bucket's
lowest and highest point in the order they came, the first and the last point of the series,
and a break wherever the key went missing between two of the points drawn.

A Level is a list of buckets of `size` points each (the last one filling). When a level would
hold more than `most` buckets, neighbours merge in pairs and the size doubles, so a level of any
length is between most/2 and most buckets. A bucket remembers, beside its lowest and highest
point, the widest step in x on each side of them; merging buckets, or drawing a level at fewer
buckets, keeps those exact, so a break in the line is drawn exactly where the points would draw
it. A bucket also sums its steps forward in x, from which the key's usual spacing is taken.

An Overview is the pair's fine level (up to FINE_MOST buckets: a panel, kept once the pair has
FINE_FROM points) and its coarse level (up to COARSE_MOST: a sparkline, and the usual spacing),
its first and last point, and whether its numbers are integers.

>>> o = Overview.empty()
>>> o.add([1, 2, 3, 4, 5, 6], [5, 1, 9, 2, 2, 8])
>>> o.coarse.size, o.points, o.view(2, o.coarse)
(8, 6, ([1, 2, 3, 6], [5, 1, 9, 8], 4))
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import sub

from telemetry.downsample import GAP_FACTOR
from telemetry.lines import Number

# A bucket's fields, in the order they are stored. *_I is the point's place in its bucket;
# SEG_A, SEG_B and SEG_C the widest step in x into a point up to the first of the two kept
# points, up to the second, and after it (the step into a bucket's first point comes from the
# point before it, in the bucket before).
COUNT, LO_I, LO_X, LO_Y, HI_I, HI_X, HI_Y, SEG_A, SEG_B, SEG_C, STEP_SUM, STEP_N = range(12)
FIELDS = 12

FINE_MOST = 4096  # buckets: a panel's first view reads ~2,000 to 4,000
FINE_SMALLEST = 32  # points a fine bucket holds at least: a short key is read as its points
COARSE_MOST = 128  # buckets: a sparkline's ~64
COARSE_SMALLEST = 8  # points: a sparkline of a short key shows its every lowest and highest
PART = 64  # fine buckets a stored part holds: a new window rewrites only the last part
# Points from which a pair keeps a fine level: it can then draw a first view of 2,000 buckets.
# A shorter series is drawn from its points, which cost little; a run of 250 keys keeps no fine
# level for keys that never get that long.
FINE_FROM = 2000 * FINE_SMALLEST

_SWAP = sys.byteorder == "big"

Xs = tuple[list, bool]  # steps into a run of x values, and whether they are all integers


@dataclass
class Level:
    size: int  # points a bucket holds
    most: int  # buckets a level holds at most
    buckets: list[list] = field(default_factory=list)
    points: int = 0
    changed_from: int = field(default=0, compare=False)  # the first bucket changed since stored

    def fold(self, xs: Sequence, ys: Sequence, steps: Sequence) -> None:
        """Take in points that come after the level's own: x, y and the step in x into each."""
        n = len(ys)
        total = self.points + n
        size = self.size
        while -(-total // size) > self.most:
            size *= 2
        if size != self.size:
            self.regroup(size)
        buckets = self.buckets
        self.changed_from = min(self.changed_from, max(0, len(buckets) - 1))
        i = 0
        if buckets and buckets[-1][COUNT] < size:
            i = min(size - int(buckets[-1][COUNT]), n)
            buckets[-1] = merge([buckets[-1], bucket(xs, ys, steps, 0, i)])
        while i < n:
            end = min(i + size, n)
            buckets.append(bucket(xs, ys, steps, i, end))
            i = end
        self.points = total

    def regroup(self, size: int) -> None:
        """Merge neighbours into buckets of `size` points: every bucket but the last is full, so
        the groups line up."""
        ratio = size // self.size
        self.buckets = [
            merge(self.buckets[i : i + ratio]) for i in range(0, len(self.buckets), ratio)
        ]
        self.size = size
        self.changed_from = 0

    def spacing(self) -> float | None:
        """The key's usual step forward in x: the median of its buckets' mean step, so that a
        stretch where the key went missing does not move it."""
        if sum(b[STEP_N] for b in self.buckets) < 2:
            return None
        means = sorted(b[STEP_SUM] / b[STEP_N] for b in self.buckets if b[STEP_N])
        return means[len(means) // 2]


def bucket(xs: Sequence, ys: Sequence, steps: Sequence, start: int, end: int) -> list:
    """The bucket of points start to end (not included)."""
    values = ys[start:end]
    lo_y = min(values)
    lo_i = values.index(lo_y)  # the first lowest, as downsample.min_max keeps
    hi_y = max(values)
    hi_i = values.index(hi_y)
    first, second = (lo_i, hi_i) if lo_i <= hi_i else (hi_i, lo_i)
    gaps = steps[start:end]
    least, most = min(gaps), max(gaps)
    if least == most:  # evenly spaced, as a step on every point is: each stretch's widest is it
        widest = most if most > 0 else 0
        segs = (widest, widest if second > first else 0, widest if second < end - start - 1 else 0)
        step_sum, step_n = (most * (end - start), end - start) if most > 0 else (0, 0)
    else:
        segs = (
            _widest(gaps[: first + 1]),
            _widest(gaps[first + 1 : second + 1]),
            _widest(gaps[second + 1 :]),
        )
        if least >= 0:  # x never went back here: every step but a 0 is forward
            step_sum, step_n = sum(gaps), len(gaps) - gaps.count(0)
        else:
            forward = list(filter((0.0).__lt__, gaps))
            step_sum, step_n = sum(forward), len(forward)
    return [
        end - start,
        lo_i,
        xs[start + lo_i],
        lo_y,
        hi_i,
        xs[start + hi_i],
        hi_y,
        *segs,
        step_sum,
        step_n,
    ]


def _widest(steps: Sequence) -> Number:
    widest = max(steps, default=0)
    return widest if widest > 0 else 0


def merge(group: Sequence[list]) -> list:
    """Neighbouring buckets as one: the first lowest and first highest of them all, and the
    widest steps either side of those two, which are among the buckets' own kept points."""
    if len(group) == 1:
        return group[0]
    lows = [b[LO_Y] for b in group]
    highs = [b[HI_Y] for b in group]
    t_lo = lows.index(min(lows))
    t_hi = highs.index(max(highs))
    offset = 0
    places = []
    for b in group:
        places.append(offset)
        offset += int(b[COUNT])
    lo_i = places[t_lo] + int(group[t_lo][LO_I])
    hi_i = places[t_hi] + int(group[t_hi][HI_I])
    first, second = (lo_i, hi_i) if lo_i <= hi_i else (hi_i, lo_i)
    segs = [0, 0, 0]
    step_sum = step_n = 0
    for b, place in zip(group, places, strict=True):
        low, high = int(b[LO_I]), int(b[HI_I])
        own_first, own_second = (low, high) if low <= high else (high, low)
        # Each of the bucket's three stretches ends at one of its kept points (or its end),
        # and the merged kept points are among those: which merged stretch it falls in is
        # told by where it ends.
        for end, widest in (
            (place + own_first, b[SEG_A]),
            (place + own_second, b[SEG_B]),
            (place + int(b[COUNT]) - 1, b[SEG_C]),
        ):
            which = 0 if end <= first else 1 if end <= second else 2
            if widest > segs[which]:
                segs[which] = widest
        step_sum += b[STEP_SUM]
        step_n += b[STEP_N]
    lo, hi = group[t_lo], group[t_hi]
    return [
        offset,
        lo_i,
        lo[LO_X],
        lo[LO_Y],
        hi_i,
        hi[HI_X],
        hi[HI_Y],
        segs[0],
        segs[1],
        segs[2],
        step_sum,
        step_n,
    ]


@dataclass
class Overview:
    fine: Level | None  # None until the pair has FINE_FROM points
    coarse: Level
    first: tuple | None = None  # the series' first point (x, y)
    last: tuple | None = None
    x_ints: bool = True  # every x so far an integer: drawn as integers
    y_ints: bool = True
    spacing: float | None = None  # the coarse level's, as of the last window stored

    @classmethod
    def empty(cls) -> Overview:
        return cls(None, Level(COARSE_SMALLEST, COARSE_MOST))

    @property
    def points(self) -> int:
        return self.coarse.points

    def wants_fine(self) -> bool:
        """Whether the pair has become long enough to keep a fine level, and has none yet."""
        return self.fine is None and self.points >= FINE_FROM

    def begin_fine(self, xs: Sequence, ys: Sequence) -> None:
        """The fine level of every point the pair has (in seq order), made at once: the same
        buckets as if it had been kept from the first point."""
        self.fine = Level(FINE_SMALLEST, FINE_MOST)
        self.fine.fold(xs, ys, [0, *map(sub, xs[1:], xs[:-1])])

    def count(self, n: int) -> None:
        """Take in n more points without their buckets, when its head alone was read."""
        self.coarse.points += n

    def add(
        self, xs: Sequence, ys: Sequence, *, fine: bool = True, known: Xs | None = None
    ) -> None:
        """Take in the pair's next points, in seq order (into the coarse level alone when it
        was read alone, for a sparkline). `known`: what steps() said of these same xs for
        another pair."""
        if not ys:
            return
        steps, x_ints = known or self.steps(xs)
        if fine and self.fine is not None:
            self.fine.fold(xs, ys, steps)
        self.coarse.fold(xs, ys, steps)
        if self.first is None:
            self.first = (xs[0], ys[0])
        self.last = (xs[-1], ys[-1])
        self.x_ints = self.x_ints and x_ints
        self.y_ints = self.y_ints and set(map(type, ys)) == {int}

    def steps(self, xs: Sequence) -> Xs:
        """The step in x into each of these points, and whether they are all integers."""
        before = xs[0] if self.last is None else self.last[0]
        return [xs[0] - before, *map(sub, xs[1:], xs[:-1])], set(map(type, xs)) == {int}

    def settle(self) -> tuple[bytes, list[tuple[int, bytes]], int, bytes]:
        """What to store once new points are in: the head (with the spacing gaps are now judged
        by), the fine parts that changed, how many parts there are, and the coarse level."""
        parts: list[tuple[int, bytes]] = []
        count = 0
        if self.fine is not None:  # gaps are judged by the overview once it draws the series
            self.spacing = self.coarse.spacing()
            parts = self.parts(self.fine.changed_from // PART)
            self.fine.changed_from = len(self.fine.buckets)
            count = -(-len(self.fine.buckets) // PART)
        return self.head(), parts, count, pack_buckets(self.coarse.buckets)

    def gap(self) -> float | None:
        """How far apart in x two points may be and still be joined, as downsample.gap_threshold
        says, from the usual spacing."""
        return None if self.spacing is None else GAP_FACTOR * self.spacing

    def serves(self, buckets: int) -> bool:
        """Whether the fine level can draw `buckets` buckets: it holds at least as many, and
        there are more points than the chart would send whole."""
        if self.fine is None:
            return False
        return self.points > 2 * buckets and -(-self.points // self.fine.size) >= buckets

    def view(
        self, buckets: int, level: Level | None = None, gap: float | None = None
    ) -> tuple[list, list, int]:
        """(xs, ys, drawn): the level drawn at `buckets` buckets (at most), with None between
        two drawn points that a step wider than the gap lies between."""
        level = level or self.fine
        gap = math.inf if gap is None else gap
        stored = level.buckets
        m = len(stored)
        if m > buckets:
            bounds = [m * j // buckets for j in range(buckets + 1)]
            groups = [merge(stored[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        else:
            groups = stored
        xs: list = [self.first[0]]
        ys: list = [self.first[1]]
        drawn = 1
        at = 0  # the place in the series of the last point drawn
        widest = 0  # the widest step since it
        place = 0
        for b in groups:
            lo_i, hi_i = place + int(b[LO_I]), place + int(b[HI_I])
            if lo_i <= hi_i:
                kept = ((lo_i, b[LO_X], b[LO_Y], b[SEG_A]), (hi_i, b[HI_X], b[HI_Y], b[SEG_B]))
            else:
                kept = ((hi_i, b[HI_X], b[HI_Y], b[SEG_A]), (lo_i, b[LO_X], b[LO_Y], b[SEG_B]))
            for i, x, y, before in kept:
                if before > widest:
                    widest = before
                if i != at:
                    if widest > gap:
                        xs.append(None)
                        ys.append(None)
                    xs.append(x)
                    ys.append(y)
                    drawn += 1
                    at, widest = i, 0
            if b[SEG_C] > widest:
                widest = b[SEG_C]
            place += int(b[COUNT])
        if at != place - 1:
            if widest > gap:
                xs.append(None)
                ys.append(None)
            xs.append(self.last[0])
            ys.append(self.last[1])
            drawn += 1
        return _as_written(xs, self.x_ints), _as_written(ys, self.y_ints), drawn

    # ---- stored --------------------------------------------------------------------------

    def head(self) -> bytes:
        """Everything but the buckets, as one small blob."""
        first = self.first or (0, 0)
        last = self.last or (0, 0)
        fine = self.fine or Level(0, FINE_MOST)
        numbers = [
            fine.size,
            fine.points,
            self.coarse.size,
            self.coarse.points,
            *first,
            *last,
            (self.first is not None) | self.x_ints << 1 | self.y_ints << 2,
            math.nan if self.spacing is None else self.spacing,
        ]
        return _pack(numbers)

    def parts(self, start: int = 0) -> list[tuple[int, bytes]]:
        """The fine buckets as stored parts of PART buckets, from the part numbered start."""
        buckets = self.fine.buckets
        return [
            (i // PART, pack_buckets(buckets[i : i + PART]))
            for i in range(start * PART, len(buckets), PART)
        ]

    @classmethod
    def stored(cls, head: bytes, parts: Sequence[bytes], coarse: bytes) -> Overview:
        (fine_size, fine_points, coarse_size, coarse_points, *ends, flags, spacing) = _unpack(head)
        fine = [b for part in parts for b in unpack_buckets(part)]
        overview = cls(
            Level(int(fine_size), FINE_MOST, fine, int(fine_points), len(fine))
            if fine_size
            else None,
            Level(int(coarse_size), COARSE_MOST, unpack_buckets(coarse), int(coarse_points)),
            spacing=None if math.isnan(spacing) else spacing,
            x_ints=bool(int(flags) & 2),
            y_ints=bool(int(flags) & 4),
        )
        if int(flags) & 1:
            x_ints, y_ints = overview.x_ints, overview.y_ints
            overview.first = (_one(ends[0], x_ints), _one(ends[1], y_ints))
            overview.last = (_one(ends[2], x_ints), _one(ends[3], y_ints))
        return overview


_BUCKET = struct.Struct(f"<{FIELDS}d")  # a bucket: 12 little-endian doubles


def pack_buckets(buckets: Sequence[list]) -> bytes:
    pack = _BUCKET.pack
    return b"".join([pack(*b) for b in buckets])


def unpack_buckets(blob: bytes) -> list[list]:
    return list(map(list, _BUCKET.iter_unpack(blob)))


def _pack(numbers: Iterable) -> bytes:
    packed = array("d", numbers)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes) -> list[float]:
    numbers = array("d", blob)
    if _SWAP:
        numbers.byteswap()
    return numbers.tolist()


def _one(value: float, ints: bool) -> Number:
    return int(value) if ints else value


def _as_written(values: list, ints: bool) -> list:
    """Stored as 8-byte floats; a key of integers is drawn as integers."""
    if not ints:
        return values
    return [None if v is None else int(v) for v in values]


def pairs(panels: Sequence[dict]) -> list[tuple[str, str | None]]:
    """The (y, x) pairs some panel draws, in the panels' order: those are kept as overviews.

    >>> pairs([{"x": "step", "y": ["loss", "eval.loss"]}, {"x": "step", "y": ["loss"]}])
    [('loss', 'step'), ('eval.loss', 'step')]
    """
    found: dict[tuple[str, str | None], None] = {}
    for panel in panels:
        for y in panel["y"]:
            found[(y, panel["x"])] = None
    return list(found)
