"""A key's values in chunks: packed compactly and read back exactly as they were written."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry import chunks
from telemetry.chunks import WINDOW, Column, against, cut, pack, points_of, unpack, within
from telemetry.lines import INT_MAX, INT_MIN
from tests.strategies import examples

numbers = st.one_of(
    st.integers(min_value=INT_MIN, max_value=INT_MAX),
    st.floats(allow_nan=False, allow_infinity=False),
)
windows = st.integers(min_value=0, max_value=300)


def as_written(values: list) -> list[str]:
    """What div telemetry prints: ints as ints, floats in their shortest repr, -0.0 included."""
    return [repr(v) for v in values]


@st.composite
def columns(draw, values=numbers):
    window = draw(windows)
    start = chunks.window_start(window)
    offsets = draw(st.lists(st.integers(0, WINDOW - 1), min_size=1, unique=True))
    seqs = chunks.evenly(sorted(start + o for o in offsets))
    return window, Column(seqs, draw(st.lists(values, min_size=len(seqs), max_size=len(seqs))))


@given(columns())
def test_a_column_is_read_back_as_written(drawn):
    window, column = drawn

    back = unpack(window, pack(window, column))

    assert list(back.seqs) == list(column.seqs)
    assert as_written(back.values) == as_written(column.values)


@given(columns(values=st.integers(min_value=INT_MIN, max_value=INT_MAX)))
def test_a_column_of_integers_is_8_bytes_a_value_and_a_range_of_seqs_needs_none(drawn):
    window, column = drawn

    packed = pack(window, column)

    assert len(packed.values) == 8 * len(column.values)
    assert (packed.seqs is None) == isinstance(column.seqs, range)


def test_evenly_spaced_seqs_are_a_range_and_others_a_list():
    assert chunks.evenly([10, 20, 30]) == range(10, 31, 10)
    assert chunks.evenly([7]) == range(7, 8)
    assert chunks.evenly([1, 2, 4]) == [1, 2, 4]


@given(windows, st.lists(numbers, min_size=1))
def test_the_lowest_and_highest_are_never_inside_the_values(window, values):
    values = values[:WINDOW]
    column = Column(
        range(chunks.window_start(window), chunks.window_start(window) + len(values)), values
    )

    packed = pack(window, column)

    assert packed.low <= min(values) and packed.high >= max(values)


def test_an_integer_past_what_a_float_holds_is_still_inside_its_bounds():
    big = 2**62 + 1
    packed = pack(0, Column(range(1, 2), [big]))
    assert packed.low <= big <= packed.high


@st.composite
def windows_of_points(draw):
    """A window and its points from its start, up to a whole window, each carrying some of four
    keys: stretches of points of one shape (which keys, in which order), the values taken in
    turn from a few drawn numbers. Drawn point by point, a window of 1,024 is more than
    Hypothesis lets one input draw (it is thrown away), and the too_slow health check failed
    on a cold example database."""
    window = draw(st.integers(0, 20))
    start = chunks.window_start(window)
    size = draw(st.integers(1, WINDOW))
    keys = ["step", "loss", "eval.loss", "lr"]
    shapes = st.lists(st.sampled_from(keys), min_size=1, unique=True)
    stretches = draw(st.lists(st.tuples(shapes, st.integers(1, WINDOW)), min_size=1, max_size=8))
    carried = [shape for shape, times in stretches for _ in range(times)]
    values = draw(st.lists(numbers, min_size=1, max_size=16))
    points = []
    for i, seq in enumerate(range(start, start + size)):
        shape = carried[i % len(carried)]
        turn = i * len(keys)
        points.append((seq, {key: values[(turn + j) % len(values)] for j, key in enumerate(shape)}))
    return window, points


def test_the_windows_drawn_reach_a_whole_window_of_points_whose_keys_come_and_go():
    windows = [points for _, points in examples(windows_of_points())]

    assert sum(len(points) > WINDOW // 2 for points in windows) >= 20
    assert max(len(points) for points in windows) > WINDOW - 8
    assert max(len({tuple(data) for _, data in points}) for points in windows) > 2


@pytest.mark.parametrize("wide", [0, 1000], ids=["by shape", "by number"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=windows_of_points())
def test_points_cut_into_columns_are_put_back_together_as_they_were(wide, drawn, monkeypatch):
    monkeypatch.setattr(chunks, "WIDE", wide)
    window, points = drawn
    found = cut(points)
    order = {name: i for i, name in enumerate(found, 1)}

    back = points_of(
        {order[name]: column for name, column in found.items()},
        {i: name for name, i in order.items()},
        points[0][0],
        points[-1][0],
    )

    def written(found):
        return [(seq, {key: repr(value) for key, value in data.items()}) for seq, data in found]

    assert written(back) == written(points)


@given(windows_of_points())
def test_a_key_against_another_keeps_only_the_points_carrying_both(drawn):
    window, points = drawn
    found = cut(points)

    for y in found:
        for x in [None, *found]:
            expected = [
                (seq if x is None else data[x], data[y])
                for seq, data in points
                if y in data and (x is None or x in data)
            ]
            xs, ys = against(found[x] if x else None, found[y], window)
            assert list(zip(xs, ys, strict=True)) == expected


def test_a_column_is_cut_to_a_range_of_seqs():
    column = Column(range(5, 50, 5), list(range(9)))

    assert within(column, 7, 31) == Column(range(10, 35, 5), [1, 2, 3, 4, 5])
    assert within(column, 0, 100) is column
    assert within(Column([3, 9, 11], [1, 2, 3]), 4, 11) == Column([9, 11], [2, 3])


@given(
    st.integers(0, 5),
    st.integers(1, 4),
    st.integers(0, 30),
    st.integers(1, 40),
    st.integers(0, 30),
    st.integers(1, 12),
)
def test_evenly_spaced_keys_pair_up_as_their_points_do(window, x_step, x_from, y_every, y_from, n):
    start = chunks.window_start(window)
    xs = range(start + x_from, start + WINDOW, x_step)
    ys = range(start + y_from, min(start + WINDOW, start + y_from + y_every * n), y_every)
    x = unpack(window, pack(window, Column(xs, [seq * 10 for seq in xs])))
    y = unpack(window, pack(window, Column(ys, [seq / 2 for seq in ys])))

    pairs = against(x, y, window)

    assert pairs == ([seq * 10 for seq in ys if seq in xs], [seq / 2 for seq in ys if seq in xs])


@given(windows_of_points(), st.data())
def test_a_keys_cells_are_its_values_at_each_place_or_none(drawn, data):
    window, points = drawn
    start = chunks.window_start(window)
    found = cut(points)
    low = data.draw(st.integers(0, WINDOW))
    end = data.draw(st.integers(low, WINDOW))
    carried = {seq: numbers for seq, numbers in points}

    for key in [*found, "nowhere"]:
        got = chunks.cells(found.get(key), window, low, end)
        expected = [carried.get(start + at, {}).get(key) for at in range(low, end)]
        assert [repr(v) for v in got] == [repr(v) for v in expected]
