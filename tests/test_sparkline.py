"""A row's sparkline kept batch by batch draws what its points drawn at once would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from telemetry.overview import Overview
from telemetry.sparkline import Spark, view


def drawn_at_once(points: list[tuple[int, dict]]) -> tuple[list, list] | None:
    summary = Overview.empty()
    pairs = [(d["step"], d["loss"]) for _, d in points if "loss" in d and "step" in d]
    summary.add([x for x, _ in pairs], [y for _, y in pairs])
    return view(summary)


point = st.fixed_dictionaries(
    {"step": st.integers(0, 10**6)},
    optional={"loss": st.floats(-1e6, 1e6, allow_nan=False)},
)


@given(
    st.lists(point, min_size=0, max_size=400).map(
        lambda ds: [(seq, d) for seq, d in enumerate(sorted(ds, key=lambda d: d["step"]), 1)]
    ),
    st.lists(st.integers(1, 60), min_size=1, max_size=20),
)
def test_batches_of_any_size_draw_the_same_line_as_all_the_points_at_once(points, sizes):
    spark = Spark(("loss", "step"))
    at = 0
    for size in sizes * 20:
        if at >= len(points):
            break
        spark.take(None, 0, points[: at + size])  # the points not sealed yet, growing
        at += size
    spark.take(None, 0, points)

    assert spark.line() == drawn_at_once(points)


def test_a_sealed_window_starts_it_again_from_the_overview_without_changing_the_overview():
    points = [(s, {"step": s, "loss": 1 / s}) for s in range(1, 41)]
    sealed = Overview.empty()
    sealed.add(list(range(1, 31)), [1 / s for s in range(1, 31)])
    before = sealed.coarse.buckets[-1][:]
    spark = Spark(("loss", "step"))
    spark.take(None, 0, points[:30])

    assert spark.take(sealed, 30, points[30:])
    assert spark.line() == drawn_at_once(points)
    assert sealed.coarse.buckets[-1] == before and sealed.points == 30


def test_a_key_with_no_points_draws_nothing_rather_than_a_line_at_zero():
    spark = Spark(("loss", "step"))

    spark.take(None, 0, [(1, {"step": 1}), (2, {"acc": 0.5}), (3, {"loss": 2.0})])

    assert spark.line() is None  # the one loss has no step: nothing to draw
