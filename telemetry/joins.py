"""Several runs' points as one table, joined on x: `div telemetry run-3,run-7 loss`. Pure: no
Django, no I/O.

Each run hands its points in seq order as rows: (x, the value of each of its columns), None
where a point lacks a key. The table's rows are sorted by x. At one x, each run's column holds
that run's values there in seq order, and the x has as many rows as the longest of them, the
i-th value of each column on the i-th row. So a Trainer's loss line and its eval_loss line at
step 100 are one row, a run that wrote step 100 twice (restarted from a checkpoint) keeps both
values, and nothing is ever dropped or multiplied:

>>> trainer = [(100, 2.3, None), (100, None, 1.9), (200, 0.4, None)]
>>> restarted = [(100, 2.1), (300, 0.3), (100, 2.0)]
>>> for row in join([trainer, restarted], widths=[2, 1]):
...     print(row)
(100, 2.3, 1.9, 2.1)
(100, None, None, 2.0)
(200, 0.4, None, None)
(300, None, None, 0.3)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from telemetry.comparison import common_keys
from telemetry.layout import panel_x
from telemetry.lines import Number

Row = tuple  # (x, the value of each column): a row of queries.column_batches' columns


def joined_x(asked: str | None, written: Sequence[Sequence[str]]) -> str | None:
    """The key several runs are joined on: the one asked for; else step when every run wrote
    it; else None, the points' places in their runs. One run's x is chosen the same way.

    >>> joined_x(None, [["step", "loss"], ["loss", "step"]]), joined_x(None, [["step"], []])
    ('step', None)
    >>> joined_x("epoch", [["step"], ["step"]])
    'epoch'
    """
    return panel_x({"x": None}, {"x": asked}, common_keys(written))


class Join:
    """The rows of several runs joined on x, as their points arrive.

    `widths` is how many columns each run has; with `every` (the whole-run CSV), a point that
    carries only x is a row of its own too, as a run's whole CSV keeps it.

    While runs are followed, `ready` hands out the rows no point still to come can join: those
    at an x that every run still going has written a point past (a run that has ended has
    passed every x). A run that later goes back to an x already printed (a restart) has its
    new values printed at that x when they are ready, never dropped.

    >>> j = Join([1, 1])
    >>> j.add(0, [(1, 0.5), (2, 0.4), (3, 0.3)])
    >>> j.add(1, [(1, 0.9), (2, 0.8)])
    >>> j.ready()
    [(1, 0.5, 0.9)]
    >>> j.end(1)
    >>> j.ready()
    [(2, 0.4, 0.8)]
    >>> j.rest()
    [(3, 0.3, None)]
    """

    def __init__(self, widths: Sequence[int], *, every: bool = False):
        self.widths = list(widths)
        self.every = every
        # For each run: x -> its row there, or the list of its rows there (seq order).
        self.held: list[dict[Number, Row | list[Row]]] = [{} for _ in self.widths]
        # The furthest x each run has written a point at: a row below every one is ready.
        self.reached: list[float] = [-math.inf] * len(self.widths)
        # For each run: the points without x, which cannot be joined, that had a row to give.
        self.left_out = [0] * len(self.widths)

    def add(self, run: int, rows: Iterable[Row]) -> None:
        """A run's next rows, in seq order."""
        held, reached, every = self.held[run], self.reached[run], self.every
        width = self.widths[run]
        for row in rows:
            x, nones = row[0], row.count(None)
            if x is None:
                if every or nones <= width:  # it had a row to give: it counts as left out
                    self.left_out[run] += 1
                continue
            empty = nones == width  # it carries none of the columns' keys
            if x > reached:
                reached = x
            if empty and not every:
                continue  # a point of none of the keys asked for adds nothing, as for one run
            found = held.get(x)
            if found is None:
                held[x] = row
            elif type(found) is list:
                found.append(row)
            else:
                held[x] = [found, row]
        self.reached[run] = reached

    def end(self, run: int) -> None:
        """The run has ended: it will write at no x again."""
        self.reached[run] = math.inf

    def ready(self) -> list[tuple]:
        """The rows no point still to come can join, sorted by x; taken out of the join."""
        return self._take(min(self.reached))

    def rest(self) -> list[tuple]:
        """Every row still held, sorted by x: what there is once the runs are read."""
        return self._take(None)

    def _take(self, below: float | None) -> list[tuple]:
        if below is None:
            xs = set().union(*self.held)
        else:
            xs = {x for held in self.held for x in held if x < below}
        blanks = [(None,) * width for width in self.widths]
        rows: list[tuple] = []
        for x in sorted(xs):
            entries = [held.pop(x, None) for held in self.held]
            row = [x]
            for entry, blank in zip(entries, blanks, strict=True):
                if entry is None:
                    row += blank
                elif type(entry) is tuple:
                    row += entry[1:]
                else:
                    break
            else:  # each run has one row here, or none: the whole x is one row
                rows.append(tuple(row))
                continue
            rows += self._rows(x, entries)
        return rows

    def _rows(self, x: Number, entries: list) -> list[tuple]:
        """The rows at an x where a run has several: the i-th value of each column on the
        i-th row, as many rows as the longest column (or, with every, as a run's points of
        x alone)."""
        columns: list[list[Number]] = []
        most = 0
        for entry, width in zip(entries, self.widths, strict=True):
            found = [] if entry is None else entry if type(entry) is list else [entry]
            for c in range(1, width + 1):
                column = [row[c] for row in found if row[c] is not None]
                columns.append(column)
                most = max(most, len(column))
            if self.every:
                most = max(most, sum(1 for row in found if row.count(None) == width))
        return [
            (x, *(column[i] if i < len(column) else None for column in columns))
            for i in range(most)
        ]


def join(runs: Sequence[Iterable[Row]], *, widths: Sequence[int], every: bool = False):
    """The rows of runs read whole, joined on x and sorted by it."""
    joined = Join(widths, every=every)
    for run, rows in enumerate(runs):
        joined.add(run, rows)
    return joined.rest()
