"""Series for the chart: min/max buckets that keep every spike, and smoothing that respects x.

Pure: no Django, no I/O. The API calls these on a key's full-resolution series.

>>> min_max([1, 2, 3, 4, 5, 6], [5, 1, 9, 2, 2, 8], buckets=2)
([1, 2, 3, 4, 6], [5, 1, 9, 2, 8])
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from operator import sub

BUCKETS = 2000


def min_max(
    xs: Sequence[float], ys: Sequence[float], buckets: int = BUCKETS
) -> tuple[list[float], list[float]]:
    """At most about 2 * buckets points: each bucket's lowest and highest, in their order.

    Buckets hold equal numbers of points, so a spike in a dense stretch is kept as surely as
    one in a sparse stretch; the first and last points are always kept, so the line spans the run.
    """
    n = len(ys)
    if n <= 2 * buckets:
        return list(xs), list(ys)
    keep: list[int] = [0]
    for b in range(buckets):
        start, end = n * b // buckets, n * (b + 1) // buckets
        chunk = ys[start:end]
        low = start + chunk.index(min(chunk))
        high = start + chunk.index(max(chunk))
        for i in sorted({low, high}):
            if i != keep[-1]:
                keep.append(i)
    if keep[-1] != n - 1:
        keep.append(n - 1)
    return [xs[i] for i in keep], [ys[i] for i in keep]


def smooth(xs: Sequence[float], ys: Sequence[float], weight: float) -> list[float]:
    """An exponential moving average whose decay follows the distance in x.

    With evenly spaced x it is the familiar `weight`-per-step EMA (debiased, so the line starts
    at the first value); a point twice as far from its neighbour decays the average twice as much,
    so a run that logs every step, then every 10th, smooths the same way throughout.
    """
    if not ys or weight <= 0:
        return list(ys)
    span = xs[-1] - xs[0]
    typical = span / (len(xs) - 1) if len(xs) > 1 and span > 0 else 1.0
    out: list[float] = []
    average = 0.0
    debias = 0.0
    previous = xs[0]
    for x, y in zip(xs, ys, strict=True):
        gap = abs(x - previous) / typical
        # Points at one x (many a point per epoch) each count as a step of their own.
        decay = weight**gap if out and gap > 0 else weight
        average = average * decay + y * (1 - decay)
        debias = debias * decay + (1 - decay)
        out.append(average / debias if debias else y)
        previous = x
    return out


def on_log_scale(
    xs: Sequence[float], ys: Sequence[float]
) -> tuple[list[float], list[float], list[float]]:
    """(xs, ys) of the points a log axis can show, and the xs of those it cannot: 0 and below
    are left off and counted, never drawn as a tick off the bottom edge.

    >>> on_log_scale([1, 2, 3], [0.5, 0, 2])
    ([1, 3], [0.5, 2], [2])
    """
    if all(y > 0 for y in ys):
        return list(xs), list(ys), []
    kept = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0]
    off = [x for x, y in zip(xs, ys, strict=True) if not y > 0]
    return [x for x, _ in kept], [y for _, y in kept], off


GAP_FACTOR = 5
GAP_SAMPLE = 10_000


def gap_threshold(xs: Sequence[float]) -> float | None:
    """How far apart two of a key's points may be in x and still be joined: five times the
    key's usual spacing. Wider apart, the key went missing there (a stretch of NaN, a pause),
    and its line breaks rather than draw through the hole. An eval written every 50 steps is
    spaced 50 apart as a rule, so it stays one line.

    >>> gap_threshold([1, 2, 3, 4, 100])
    5.0
    """
    stride = max(1, len(xs) // GAP_SAMPLE)
    sample = xs[::stride]
    steps = sorted(b - a for a, b in pairwise(sample) if b > a)
    if len(steps) < 2:
        return None
    return GAP_FACTOR * steps[len(steps) // 2] / stride


def gaps(xs: Sequence[float], threshold: float | None) -> list[tuple[float, float]]:
    """The (x before, x after) of each hole in a full-resolution series."""
    if threshold is None:
        return []
    steps = list(map(sub, xs[1:], xs[:-1]))
    if not steps or max(steps) <= threshold:  # as a rule: a key missing nowhere, found in C
        return []
    return [(xs[i], xs[i + 1]) for i, step in enumerate(steps) if step > threshold]


def with_breaks(
    xs: Sequence[float], ys: Sequence[float], holes: list[tuple[float, float]]
) -> tuple[list, list]:
    """The series with None between the two points either side of each hole: Plotly leaves
    the line undrawn there. Works on a downsampled series too, where the points either side
    of a hole may be further from it.

    >>> with_breaks([1, 2, 9, 10], [5, 6, 7, 8], [(2, 9)])
    ([1, 2, None, 9, 10], [5, 6, None, 7, 8])
    """
    if not holes or not xs:
        return list(xs), list(ys)
    out_x, out_y = [xs[0]], [ys[0]]
    j = 0
    for k in range(1, len(xs)):
        before, x = xs[k - 1], xs[k]
        while j < len(holes) and holes[j][1] <= before:
            j += 1
        if j < len(holes) and before <= holes[j][0] and holes[j][1] <= x:
            out_x.append(None)
            out_y.append(None)
        out_x.append(x)
        out_y.append(ys[k])
    return out_x, out_y
