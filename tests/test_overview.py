"""Overviews: min/max buckets kept as points arrive, drawing the chart the points would draw."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry import overview
from telemetry.downsample import GAP_FACTOR, min_max
from telemetry.overview import (
    FINE_FROM,
    FINE_MOST,
    FINE_SMALLEST,
    Level,
    Overview,
    bucket,
    merge,
)

ints = st.integers(min_value=-(10**6), max_value=10**6)
floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def series(draw, min_size=1, max_size=600, values=ints):
    """x rising by a usual step, with now and then a key gone missing for a while (a hole);
    values from a few drawn ones, ties and all. Each point's step and value are picked by a
    seeded random, not drawn one by one: 600 points' worth of draws an input made the
    too_slow health check fail on a busy machine."""
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    step = draw(st.sampled_from([1, 10, 50]))
    x = draw(st.integers(min_value=0, max_value=100))
    pool = draw(st.lists(values, min_size=1, max_size=24))
    pick = draw(st.randoms(use_true_random=True))
    xs = []
    for _ in range(n):
        xs.append(x)
        x += step * pick.choice([1, 1, 1, 1, 1, 1, 1, 1, 2, 30])
    return xs, [pick.choice(pool) for _ in range(n)]


def splits(draw, n: int) -> list[int]:
    """Where the points arrive in batches."""
    cuts = draw(st.lists(st.integers(min_value=0, max_value=n), max_size=6))
    return sorted({0, n, *cuts})


def folded(xs, ys, cuts, *, smallest=1, most=16) -> Overview:
    """An overview fed in batches, with small levels so that short series regroup often."""
    o = Overview(Level(smallest, most), Level(1, 4))
    for a, b in zip(cuts, cuts[1:], strict=False):
        o.add(xs[a:b], ys[a:b])
    return o


def drawn_from_points(xs, ys, bounds, gap):
    """What the honest chart draws from the full series, buckets given as point bounds: each
    bucket's first lowest and first highest in order, the first and last point, and None
    between two drawn points with a step wider than the gap between them."""
    keep = [0]
    for a, b in zip(bounds, bounds[1:], strict=False):
        chunk = ys[a:b]
        for i in sorted({a + chunk.index(min(chunk)), a + chunk.index(max(chunk))}):
            if i != keep[-1]:
                keep.append(i)
    if keep[-1] != len(ys) - 1:
        keep.append(len(ys) - 1)
    out_x, out_y = [xs[keep[0]]], [ys[keep[0]]]
    for before, after in zip(keep, keep[1:], strict=False):
        if any(xs[i] - xs[i - 1] > gap for i in range(before + 1, after + 1)):
            out_x.append(None)
            out_y.append(None)
        out_x.append(xs[after])
        out_y.append(ys[after])
    return out_x, out_y, len(keep)


def point_bounds(level: Level, buckets: int) -> list[int]:
    m = len(level.buckets)
    groups = [m * j // buckets for j in range(buckets + 1)] if m > buckets else range(m + 1)
    return [min(level.points, g * level.size) for g in groups]


@settings(max_examples=300)
@given(st.data())
def test_an_overview_draws_what_the_points_draw_at_the_same_buckets(data):
    xs, ys = data.draw(series(values=ints | floats))
    cuts = splits(data.draw, len(ys))
    buckets = data.draw(st.integers(min_value=1, max_value=20))
    gap = data.draw(st.sampled_from([None, 5, 60, 400]))

    o = folded(xs, ys, cuts)

    expected = drawn_from_points(
        xs, ys, point_bounds(o.fine, buckets), math.inf if gap is None else gap
    )
    assert o.view(buckets, gap=gap) == expected


@given(st.data())
def test_the_coarse_level_draws_what_the_points_draw_too(data):
    xs, ys = data.draw(series())
    o = folded(xs, ys, splits(data.draw, len(ys)))

    expected = drawn_from_points(xs, ys, point_bounds(o.coarse, 3), 40)
    assert o.view(3, o.coarse, 40) == expected


@given(st.data())
def test_points_in_any_batches_make_the_same_buckets(data):
    xs, ys = data.draw(series())

    whole = folded(xs, ys, [0, len(ys)])
    batched = folded(xs, ys, splits(data.draw, len(ys)))

    assert batched.fine == whole.fine
    assert batched.coarse == whole.coarse
    assert (
        (batched.first, batched.last)
        == (whole.first, whole.last)
        == ((xs[0], ys[0]), (xs[-1], ys[-1]))
    )


@given(series(min_size=2), st.data())
def test_merging_neighbouring_buckets_is_the_bucket_of_their_points(drawn, data):
    xs, ys = drawn
    steps = [0, *(b - a for a, b in zip(xs, xs[1:], strict=False))]
    cut = data.draw(st.integers(min_value=1, max_value=len(ys) - 1))

    parts = [bucket(xs, ys, steps, 0, cut), bucket(xs, ys, steps, cut, len(ys))]

    assert merge(parts) == bucket(xs, ys, steps, 0, len(ys))


def grown(xs: list, ys: list, batch: int = 1024) -> Overview:
    """An overview fed a window at a time, as the ingester seals them: its fine level begun,
    from every point so far, once it wants one."""
    o = Overview.empty()
    for start in range(0, len(ys), batch):
        o.add(xs[start : start + batch], ys[start : start + batch])
        if o.wants_fine():
            o.begin_fine(xs[: start + batch], ys[: start + batch])
    return o


def test_a_fine_level_is_kept_from_64000_points_as_if_kept_from_the_first():
    xs = list(range(300_000))
    ys = [x % 13 for x in xs]

    o = grown(xs, ys, batch=7_000)

    always = Level(FINE_SMALLEST, FINE_MOST)
    always.fold(xs, ys, [0] + [1] * (len(xs) - 1))
    assert o.points == 300_000
    assert o.fine == always
    assert FINE_MOST // 2 < len(o.fine.buckets) <= FINE_MOST
    assert o.fine.size == 128
    assert overview.COARSE_MOST // 2 < len(o.coarse.buckets) <= overview.COARSE_MOST


def test_a_short_series_keeps_no_fine_level_and_is_drawn_from_its_points():
    o = grown(list(range(FINE_FROM - 1)), [0.0] * (FINE_FROM - 1))

    assert o.fine is None and not o.serves(10)
    head, parts, count, _ = o.settle()
    assert (parts, count) == ([], 0)


def test_a_single_spike_survives_a_long_flat_series():
    ys = [1.0] * 100_000
    ys[61_234] = 1e9

    xs, kept, drawn = grown(list(range(100_000)), ys).view(2000)

    assert drawn == len(kept) <= 2 * 2000 + 2
    assert xs[kept.index(1e9)] == 61_234
    assert (xs[0], xs[-1]) == (0, 99_999)


def test_the_usual_spacing_is_not_moved_by_where_the_key_went_missing():
    # A hole of 150,000 steps among 100,000 points ten steps apart.
    xs = [*range(0, 500_000, 10), *range(650_000, 1_150_000, 10)]
    o = grown(xs, [1.0] * len(xs))
    o.settle()

    assert o.spacing == 10
    assert o.gap() == GAP_FACTOR * 10
    xs, ys, _ = o.view(2000, gap=o.gap())
    assert xs.count(None) == 1
    assert xs[xs.index(None) - 1] < 500_000 <= 650_000 <= xs[xs.index(None) + 1]


def test_an_overview_is_stored_and_read_back_as_it_was():
    o = grown(list(range(1, 70_001)), [1 / i for i in range(1, 70_001)])
    head, parts, count, coarse = o.settle()

    back = Overview.stored(head, [blob for _, blob in parts], coarse)

    assert count == len(parts) == -(-len(o.fine.buckets) // overview.PART)
    assert back.view(100, gap=back.gap()) == o.view(100, gap=o.gap())
    assert (back.first, back.last, back.spacing) == ((1, 1.0), (70_000, 1 / 70_000), 1)
    assert back.fine == o.fine and back.coarse == o.coarse


def test_integers_are_drawn_as_integers_and_floats_as_floats():
    o = Overview.empty()
    o.add([10, 20, 30], [1, 3, 2.5])
    head, parts, _, coarse = o.settle()

    back = Overview.stored(head, [blob for _, blob in parts], coarse)
    xs, ys, _ = back.view(10, back.coarse)

    assert xs == [10, 20, 30] and all(type(x) is int for x in xs)
    assert ys == [1.0, 3.0, 2.5] and all(type(y) is float for y in ys)


def test_a_series_drawn_whole_below_twice_the_buckets_is_not_served_from_the_overview():
    o = grown(list(range(FINE_FROM)), [0.0] * FINE_FROM)

    assert o.serves(2000) and not o.serves(2001) and not o.serves(FINE_FROM // 2)
    o.add(list(range(FINE_FROM, 100_000)), [0.0] * (100_000 - FINE_FROM))
    assert o.serves(3000) and not o.serves(3200)  # 3,125 buckets of 32 points


def test_min_max_and_an_overview_keep_the_same_extremes():
    ys = [math.sin(i / 50) * (1 + i % 97) for i in range(80_000)]
    xs = list(range(80_000))

    _, from_points = min_max(xs, ys, 500)
    _, from_buckets, _ = grown(xs, ys).view(500)

    assert max(from_buckets) == max(from_points) == max(ys)
    assert min(from_buckets) == min(from_points) == min(ys)
