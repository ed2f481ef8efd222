"""What the ingester holds between batches to store a run's points by key. Pure: no Django, no I/O.

Points are stored whole as they arrive (a row a point: the cheapest write there is) until their
window of chunks.WINDOW points is complete. The window is then sealed: cut into one chunk per
key, and taken into the overview of every (y, x) pair the run's panels draw, as
layout.panels_for decides from the keys written so far. When the run's telemetry closes, its
last window is sealed however full it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from telemetry import chunks
from telemetry.chunks import Column
from telemetry.layout import panels_for
from telemetry.lines import Number
from telemetry.overview import Overview, pairs
from telemetry.sparkline import Spark

Pair = tuple[str, str | None]
Window = tuple[int, dict[str, Column]]  # a window's number and its keys' columns


@dataclass
class Sealing:
    layout: dict
    sealed: int = 0  # the last seq sealed; later points are stored whole
    unsealed: list[tuple[int, dict[str, Number]]] = field(default_factory=list)
    overviews: dict[Pair, Overview] = field(default_factory=dict)
    # The dashboard row's sparkline, kept as points arrive (sparkline.py): the ingester's own.
    spark: Spark | None = None

    def take(self, points: Sequence[tuple[int, dict]], *, close: bool) -> list[Window]:
        """Hold the batch's points; return the windows complete now (every window, on close),
        cut into columns, and forget their points."""
        self.unsealed.extend(points)
        if not self.unsealed:
            return []
        last = self.unsealed[-1][0]
        upto = last if close else last - last % chunks.WINDOW
        count = upto - self.sealed
        if count <= 0:
            return []
        ready, self.unsealed = self.unsealed[:count], self.unsealed[count:]
        self.sealed = upto
        windows = []
        start = 0
        while start < count:
            window = chunks.window_of(ready[start][0])
            end = min(count, start + chunks.WINDOW - (ready[start][0] - 1) % chunks.WINDOW)
            windows.append((window, chunks.cut(ready[start:end])))
            start = end
        return windows

    def fold(self, windows: Sequence[Window], keys: list[str]) -> tuple[list[Pair], list[Pair]]:
        """Take sealed windows into the overviews of the pairs drawn now (keys: every key
        written so far, in order of first arrival); returns the pairs whose overview changed
        (new ones included) and those no panel draws any more."""
        written = set(keys)
        # A panel may name a key no point has written yet: its overview begins when it is.
        wanted = [
            (y, x)
            for y, x in pairs(panels_for(self.layout, keys))
            if y in written and (x is None or x in written)
        ]
        gone = [pair for pair in self.overviews if pair not in wanted]
        for pair in gone:
            del self.overviews[pair]
        changed = []
        shared: dict = {}  # the same xs for keys written on the same points: made once
        for pair in wanted:
            y, x = pair
            xs: list = []
            ys: list = []
            shape = [x]
            for window, columns in windows:
                column = columns.get(y)
                if column is None or (x is not None and x not in columns):
                    continue
                a, b = chunks.against(columns[x] if x is not None else None, column, window)
                xs += a
                ys += b
                shape.append(column.seqs if isinstance(column.seqs, range) else id(column.seqs))
            summary = self.overviews.get(pair)
            if summary is None:
                # New: no earlier window carries both keys, or the panels would have drawn it.
                summary = self.overviews[pair] = Overview.empty()
            elif not ys:
                continue
            if ys:
                key = (tuple(shape), summary.last[0] if summary.last else None)
                known = shared.get(key)
                if known is None:
                    known = shared[key] = summary.steps(xs)
                summary.add(xs, ys, known=known)
            changed.append(pair)
        return changed, gone
