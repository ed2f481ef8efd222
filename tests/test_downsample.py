"""min/max buckets that keep every spike, and smoothing that follows the distance in x."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import downsample
from telemetry.downsample import min_max, smooth

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
numbers = st.one_of(st.integers(min_value=-(10**12), max_value=10**12), finite)
weights = st.floats(min_value=0.001, max_value=0.999)


# ---- min_max -----------------------------------------------------------------------------


def test_a_bucket_keeps_its_lowest_and_highest_in_the_order_they_came():
    xs = list(range(1, 9))
    ys = [5, 9, 1, 5, 5, 0, 7, 5]

    assert min_max(xs, ys, buckets=2) == ([1, 2, 3, 6, 7, 8], [5, 9, 1, 0, 7, 5])


def test_a_single_spike_survives_a_long_flat_series():
    ys = [1.0] * 100_000
    ys[61_234] = 1e9
    xs = list(range(100_000))

    kept_x, kept_y = min_max(xs, ys, buckets=2000)

    assert len(kept_y) <= 2 * 2000 + 2
    assert kept_x[kept_y.index(1e9)] == 61_234


def test_a_series_of_no_more_than_twice_the_buckets_is_sent_whole():
    assert min_max([1, 2, 3, 4], [4, 3, 2, 1], buckets=2) == ([1, 2, 3, 4], [4, 3, 2, 1])
    assert min_max([], [], buckets=2) == ([], [])


@st.composite
def series(draw, min_size=0):
    ys = draw(st.lists(numbers, min_size=min_size, max_size=400))
    return list(range(len(ys))), ys


@given(series(min_size=1), st.integers(min_value=1, max_value=60))
def test_min_max_keeps_the_shape_of_any_series(drawn, buckets):
    xs, ys = drawn

    kept_x, kept_y = min_max(xs, ys, buckets)

    assert len(kept_x) == len(kept_y) <= 2 * buckets + 2
    # A subsequence of the input, in order, each kept x with its own y.
    assert kept_x == sorted(set(kept_x))
    assert kept_y == [ys[x] for x in kept_x]
    # The line spans the run, and its extremes are on it.
    assert (kept_x[0], kept_x[-1]) == (xs[0], xs[-1])
    assert min(kept_y) == min(ys)
    assert max(kept_y) == max(ys)


@given(st.data())
def test_min_max_is_the_identity_for_a_series_no_longer_than_twice_the_buckets(data):
    xs, ys = data.draw(series())
    buckets = data.draw(st.integers(min_value=max(1, (len(ys) + 1) // 2), max_value=300))

    assert min_max(xs, ys, buckets) == (xs, ys)


# ---- smooth ------------------------------------------------------------------------------


def classic_ema(ys: list[float], weight: float) -> list[float]:
    """The debiased EMA of evenly spaced points, as TensorBoard draws it."""
    average, out = 0.0, []
    for i, y in enumerate(ys, 1):
        average = weight * average + (1 - weight) * y
        out.append(average / (1 - weight**i))
    return out


def ema_with_decays(ys: list[float], decays: list[float]) -> list[float]:
    """A debiased EMA where each point decays the average by its own factor."""
    average = debias = 0.0
    out = []
    for y, decay in zip(ys, decays, strict=True):
        average = average * decay + y * (1 - decay)
        debias = debias * decay + (1 - decay)
        out.append(average / debias)
    return out


@st.composite
def even(draw, min_size=1):
    ys = draw(st.lists(finite, min_size=min_size, max_size=200))
    start = draw(st.integers(min_value=-1000, max_value=1000))
    step = draw(st.integers(min_value=1, max_value=100))
    return [start + step * i for i in range(len(ys))], ys


@given(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=100, unique=True).map(sorted),
    finite,
    weights,
)
def test_a_constant_series_stays_constant(xs, value, weight):
    assert smooth(xs, [value] * len(xs), weight) == pytest.approx([value] * len(xs))


@given(even(), weights)
def test_the_smoothed_line_starts_at_the_first_value(drawn, weight):
    xs, ys = drawn

    assert smooth(xs, ys, weight)[0] == pytest.approx(ys[0])


@given(even(), weights)
def test_evenly_spaced_points_get_the_classic_debiased_ema(drawn, weight):
    xs, ys = drawn

    assert smooth(xs, ys, weight) == pytest.approx(classic_ema(ys, weight), rel=1e-6, abs=1e-3)


@given(even(min_size=2), weights)
def test_evenly_spaced_points_smooth_the_same_whatever_the_spacing(drawn, weight):
    # "With evenly spaced x it is the familiar weight-per-step EMA": a run logging every 10th
    # step smooths as one logging every step.
    xs, ys = drawn
    wider = [x * 2 for x in xs]

    assert smooth(wider, ys, weight) == pytest.approx(smooth(xs, ys, weight), rel=1e-9, abs=1e-6)


def test_a_point_twice_as_far_from_its_neighbour_decays_the_average_twice_as_much():
    # Gaps of 2, 1, 0.5 and 0.5: on average 1, the step the weight is for.
    xs = [0, 2, 3, 3.5, 4]
    ys = [4.0, 1.0, 3.0, 2.0, 5.0]
    w = 0.6

    assert smooth(xs, ys, w) == pytest.approx(ema_with_decays(ys, [w, w**2, w, w**0.5, w**0.5]))


def test_logging_every_step_then_every_tenth_smooths_the_same_way_throughout():
    # Ten steps of 1, then four of 10: each x-unit decays the average by the same factor.
    xs = [*range(10), 10, 20, 30, 40, 50]
    ys = [float(i % 3) for i in range(len(xs))]
    w = 0.9
    per_unit = w ** (1 / (50 / 14))  # the weight is for the typical gap

    decays = [w] + [per_unit ** (b - a) for a, b in zip(xs, xs[1:], strict=False)]
    assert smooth(xs, ys, w) == pytest.approx(ema_with_decays(ys, decays))


@pytest.mark.parametrize("weight", [0, 0.0])
def test_no_smoothing_returns_the_values_as_they_are(weight):
    assert smooth([1, 2, 3], [3.0, 1.0, 2.0], weight) == [3.0, 1.0, 2.0]


def test_smoothing_nothing_gives_nothing():
    assert smooth([], [], 0.6) == []


def test_a_point_at_the_same_x_as_the_one_before_still_moves_the_average():
    # A run drawn against epoch writes many points per epoch: none of them may be thrown away.
    smoothed = smooth([0, 0, 1], [0.0, 6.0, 0.0], 0.5)

    assert smoothed[1] > 0


# Where a key's line breaks


def test_a_series_at_its_usual_spacing_has_no_holes():
    xs = list(range(0, 1000, 50))
    assert downsample.gaps(xs, downsample.gap_threshold(xs)) == []


def test_a_stretch_with_the_key_missing_is_a_hole_and_a_break():
    xs = [*range(1, 51), *range(81, 101)]
    ys = [1.0] * len(xs)

    holes = downsample.gaps(xs, downsample.gap_threshold(xs))
    broken_x, broken_y = downsample.with_breaks(xs, ys, holes)

    assert holes == [(50, 81)]
    assert broken_x == [*range(1, 51), None, *range(81, 101)]
    assert broken_y.count(None) == 1


def test_a_downsampled_series_breaks_at_the_same_hole():
    xs = [*range(0, 100_000), *range(150_000, 200_000)]
    ys = [float(x % 7) for x in xs]
    holes = downsample.gaps(xs, downsample.gap_threshold(xs))

    small_x, small_y = downsample.with_breaks(*downsample.min_max(xs, ys, 100), holes)

    assert small_x.count(None) == 1
    at = small_x.index(None)
    assert small_x[at - 1] <= 99_999 and small_x[at + 1] >= 150_000
    assert all(x is None or x < 100_000 or x >= 150_000 for x in small_x)


def test_too_few_points_have_no_usual_spacing_and_never_break():
    assert downsample.gap_threshold([1, 100]) is None
    assert downsample.with_breaks([1, 100], [1, 2], downsample.gaps([1, 100], None)) == (
        [1, 100],
        [1, 2],
    )
