"""Series for the chart: min/max buckets that keep every spike, and smoothing that respects x.

Pure: no Django, no I/O. The API calls these on a key's full-resolution series.

>>> min_max([1, 2, 3, 4, 5, 6], [5, 1, 9, 2, 2, 8], buckets=2)
([1, 2, 3, 4, 6], [5, 1, 9, 2, 8])
"""

from __future__ import annotations

from collections.abc import Sequence

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
