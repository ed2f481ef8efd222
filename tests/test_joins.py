"""Several runs' points joined on x (pure, in telemetry/joins.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.joins import Join, join, joined_x


@pytest.mark.parametrize(
    "runs, widths, every, rows",
    [
        # A Trainer's loss line and eval_loss line at one step are one row.
        (
            [[(100, 2.3, None), (100, None, 1.9)], [(100, 2.1, 1.8)]],
            [2, 2],
            False,
            [(100, 2.3, 1.9, 2.1, 1.8)],
        ),
        # A run that wrote step 100 twice (a restart) keeps both values, in seq order; the
        # other run's one value is on the first row, not repeated on the second.
        (
            [[(100, 2.3), (200, 1.1), (100, 2.0)], [(100, 9.0)]],
            [1, 1],
            False,
            [(100, 2.3, 9.0), (100, 2.0, None), (200, 1.1, None)],
        ),
        # Rows sorted by x as numbers, ints and floats alike; a run with no point there has
        # an empty cell, never a zero.
        (
            [[(10, 1), (2.5, 2)], [(3, 3), (10.0, 4)]],
            [1, 1],
            False,
            [(2.5, 2, None), (3, None, 3), (10, 1, 4)],
        ),
        # A point carrying none of the keys adds nothing; a point without x is left out.
        ([[(1, None), (None, 5), (2, 6)], [(1, 7)]], [1, 1], False, [(1, None, 7), (2, 6, None)]),
        # The whole CSV: a point that carries only x is a row of its own too...
        ([[(1, None), (2, 6)], []], [1, 0], True, [(1, None), (2, 6)]),
        # ...and at an x that has values, it is their row: nothing is made up.
        (
            [[(1, 5), (1, None)], [(1, None), (1, None)]],
            [1, 1],
            True,
            [(1, 5, None), (1, None, None)],
        ),
        # No runs with points: no rows.
        ([[], []], [2, 1], False, []),
    ],
)
def test_rows_are_joined_on_x(runs, widths, every, rows):
    assert join(runs, widths=widths, every=every) == rows


def test_points_without_x_are_counted_for_their_run():
    joined = Join([1, 1])
    joined.add(0, [(None, 1.0), (None, None), (1, 2.0)])  # the second had nothing to give
    joined.add(1, [(None, 3.0)])

    assert joined.left_out == [1, 1]
    every = Join([1], every=True)
    every.add(0, [(None, None)])  # in the whole CSV every point was to be a row
    assert every.left_out == [1]


@pytest.mark.parametrize(
    "asked, written, x",
    [
        (None, [["step", "loss"], ["loss", "step"]], "step"),
        (None, [["step", "loss"], ["loss"]], None),  # their places in the runs: seq
        ("epoch", [["step"], ["step"]], "epoch"),
        ("epoch", [["step"], []], "epoch"),  # asked for, whoever wrote it
    ],
)
def test_runs_are_joined_on_step_only_when_every_run_wrote_it(asked, written, x):
    assert joined_x(asked, written) == x


def test_while_following_a_row_waits_until_every_run_going_has_passed_its_x():
    joined = Join([1, 1])
    joined.add(0, [(1, 0.5), (2, 0.4)])
    assert joined.ready() == []  # the other run has written nothing yet

    joined.add(1, [(1, 0.9)])
    assert joined.ready() == []  # both are at 1: another point at 1 could still come
    joined.add(1, [(1, 0.8), (3, 0.7)])
    assert joined.ready() == [(1, 0.5, 0.9), (1, None, 0.8)]

    joined.end(0)
    assert joined.ready() == [(2, 0.4, None)]  # run 0 has ended; run 1 has passed 2
    joined.add(1, [(2, 0.6)])  # back to an x already printed: printed again, never dropped
    assert joined.ready() == [(2, None, 0.6)]
    assert joined.rest() == [(3, None, 0.7)]


# ---- properties ------------------------------------------------------------------------------

xs = st.one_of(st.none(), st.integers(0, 6), st.sampled_from([1.0, 2.5, 4.0]))
values = st.one_of(st.none(), st.integers(-5, 5), st.floats(-1, 1, allow_nan=False))


@st.composite
def runs_of_rows(draw):
    widths = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    runs = [draw(st.lists(st.tuples(xs, *[values] * width), max_size=12)) for width in widths]
    return widths, runs


def printed_cells(rows, offset: int, width: int) -> dict:
    """(x, column) -> a run's values printed at x in that column, top to bottom."""
    found: dict = {}
    for row in rows:
        for c in range(width):
            if row[1 + offset + c] is not None:
                found.setdefault((row[0], c), []).append(row[1 + offset + c])
    return found


def written_cells(run, width: int) -> dict:
    """(x, column) -> the run's values at x for that column, in seq order."""
    found: dict = {}
    for x, *cells in run:
        for c in range(width):
            if x is not None and cells[c] is not None:
                found.setdefault((x, c), []).append(cells[c])
    return found


def rows_needed(runs, widths, x, every: bool) -> int:
    """The longest column at x; in the whole CSV, at least a run's points there of x alone."""
    counts = [
        sum(1 for row in run if row[0] == x and row[1 + c] is not None)
        for run, width in zip(runs, widths, strict=True)
        for c in range(width)
    ]
    if every:
        counts += [
            sum(1 for row in run if row[0] == x and row.count(None) == width)
            for run, width in zip(runs, widths, strict=True)
        ]
    return max(counts, default=0)


@settings(max_examples=300, deadline=None)
@given(runs_of_rows(), st.booleans())
def test_every_value_is_printed_once_at_its_x_in_seq_order(drawn, every):
    widths, runs = drawn
    rows = join(runs, widths=widths, every=every)

    assert [row[0] for row in rows] == sorted(row[0] for row in rows)
    assert all(len(row) == 1 + sum(widths) for row in rows)
    offset = 0
    for width, run in zip(widths, runs, strict=True):
        assert printed_cells(rows, offset, width) == written_cells(run, width)
        offset += width
    # Each x has the rows its longest column needs, no more: nothing is cross-multiplied.
    for x in {row[0] for run in runs for row in run if row[0] is not None}:
        assert sum(1 for row in rows if row[0] == x) == rows_needed(runs, widths, x, every)


@settings(max_examples=300, deadline=None)
@given(runs_of_rows(), st.data())
def test_following_prints_the_same_values_as_reading_the_runs_whole(drawn, data):
    """Points arriving in any stretches, runs ending in any order: every value is printed, at
    its x, in seq order, and every row ready while following is sorted and final."""
    widths, runs = drawn
    whole = join(runs, widths=widths)
    joined = Join(widths)
    printed: list = []
    cursors = [0] * len(runs)
    while any(cursor < len(run) for cursor, run in zip(cursors, runs, strict=True)):
        run = data.draw(st.sampled_from([i for i, r in enumerate(runs) if cursors[i] < len(r)]))
        upto = data.draw(st.integers(cursors[run] + 1, len(runs[run])))
        joined.add(run, runs[run][cursors[run] : upto])
        cursors[run] = upto
        if cursors[run] == len(runs[run]) and data.draw(st.booleans()):
            joined.end(run)
        printed += joined.ready()
    for run in range(len(runs)):
        joined.end(run)
    printed += joined.ready()
    assert joined.rest() == []

    offset = 0
    for width in widths:
        assert printed_cells(printed, offset, width) == printed_cells(whole, offset, width)
        offset += width
    at = [[row[0] for row in run if row[0] is not None] for run in runs]
    monotonic = all(xs == sorted(xs) for xs in at)
    if monotonic:  # x only goes up in each run, as it does in training: the very same rows
        assert printed == whole
