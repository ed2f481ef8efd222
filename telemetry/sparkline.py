"""A dashboard row's sparkline, kept by the ingester as points arrive. Pure: no Django, no I/O.

A row draws its layout's first key against its x (listing.sparkline_pair) at about SPARK_BUCKETS
min/max buckets: the pair's coarse level as the sealed windows left it (overview.py), with the
points not sealed yet taken in as each batch brings them. The ingester keeps one Spark a run
between batches and stores what it draws with each batch, so a page of 50 rows reads 50 small
rows, never a live run's points.

>>> spark = Spark(("loss", "step"))
>>> points = [(1, {"step": 10, "loss": 3}), (2, {"loss": 2}), (3, {"step": 30, "loss": 1})]
>>> spark.take(None, 0, points)
True
>>> spark.line()
([10, 30], [3, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from telemetry.downsample import GAP_FACTOR
from telemetry.overview import Level, Overview

SPARK_BUCKETS = 64

Pair = tuple[str, str | None]


@dataclass
class Spark:
    pair: Pair
    sealed: int = -1  # the sealed seq its coarse level was copied at; -1: not yet
    taken: int = 0  # the last seq taken in
    summary: Overview = field(default_factory=Overview.empty)

    def take(self, sealed_overview: Overview | None, sealed: int, unsealed: Sequence) -> bool:
        """Be up to date with a run whose sealed points are summed up in `sealed_overview` (the
        pair's, or None) up to seq `sealed`, and whose later points are `unsealed` (seq, data),
        in order. True when the line may have changed."""
        rebuilt = sealed != self.sealed
        if rebuilt:
            # A window was sealed: start again from the overview, which now holds its points.
            self.summary = coarse_copy(sealed_overview)
            self.sealed = self.taken = sealed
        y, x = self.pair
        xs: list = []
        ys: list = []
        for seq, data in unsealed:
            if seq > self.taken and y in data:
                at = seq if x is None else data.get(x)
                if at is not None:
                    xs.append(at)
                    ys.append(data[y])
        if unsealed:
            self.taken = max(self.taken, unsealed[-1][0])
        self.summary.add(xs, ys, fine=False)
        return rebuilt or bool(ys)

    def line(self) -> tuple[list, list] | None:
        """(xs, ys) as a row draws them, None between two points the key went missing between;
        None when the pair has no point yet."""
        return view(self.summary)


def coarse_copy(overview: Overview | None) -> Overview:
    """The overview's coarse level and ends alone, to take points into without changing it."""
    if overview is None:
        return Overview.empty()
    level = overview.coarse
    return Overview(
        None,
        Level(level.size, level.most, [list(b) for b in level.buckets], level.points),
        first=overview.first,
        last=overview.last,
        x_ints=overview.x_ints,
        y_ints=overview.y_ints,
        spacing=overview.spacing,
    )


def view(summary: Overview, buckets: int = SPARK_BUCKETS) -> tuple[list, list] | None:
    """A summary's coarse level drawn at `buckets` buckets, breaks judged by its own spacing."""
    if summary.first is None:
        return None
    spacing = summary.coarse.spacing()
    gap = None if spacing is None else GAP_FACTOR * spacing
    xs, ys, _ = summary.view(buckets, summary.coarse, gap)
    return xs, ys
