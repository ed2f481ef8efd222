"""A run's account of its lines: "A run keeps at most 256 keys and 200,000 points", key stats,
and "What is dropped is counted"."""

from __future__ import annotations

import json
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.lines import Line, Reason, read_line
from telemetry.tally import Tally


def fed(*lines: bytes | dict) -> Tally:
    """A tally fed these lines, as written to the file (a dict is written with json.dumps)."""
    tally = Tally()
    for line in lines:
        raw = json.dumps(line).encode() if isinstance(line, dict) else line
        tally.add(read_line(raw))
    return tally


def stats_of(tally: Tally, key: str) -> tuple:
    stats = tally.keys[key]
    return stats.count, stats.last, stats.min, stats.max


def test_each_line_with_a_number_becomes_the_next_point():
    tally = fed({"step": 100, "loss": 2.31}, {"step": 200, "loss": 0.5}, {"step": 300})
    assert tally.points == 3
    assert tally.new_points == [
        (1, {"step": 100, "loss": 2.31}),
        (2, {"step": 200, "loss": 0.5}),
        (3, {"step": 300}),
    ]
    assert tally.drops == {}


def test_a_key_counts_its_points_and_keeps_its_last_lowest_and_highest_value():
    tally = fed(
        {"step": 100, "loss": 2.31},
        {"step": 200, "loss": 0.0398, "eval_loss": 1.88},
        {"step": 300, "loss": 0.0412},
    )
    assert stats_of(tally, "step") == (3, 300, 100, 300)
    assert stats_of(tally, "loss") == (3, 0.0412, 0.0398, 2.31)
    assert stats_of(tally, "eval_loss") == (1, 1.88, 1.88, 1.88)


def test_keys_are_numbered_in_the_order_they_first_arrived():
    tally = fed({"step": 1, "loss": 2.0}, {"eval": {"loss": 1.9}, "step": 2}, {"lr": 0.1})
    assert [(s.name, s.order) for s in tally.keys.values()] == [
        ("step", 1),
        ("loss", 2),
        ("eval.loss", 3),
        ("lr", 4),
    ]


def test_key_stats_keep_ints_as_ints():
    tally = fed({"step": 100}, {"step": 50})
    assert stats_of(tally, "step") == (2, 50, 50, 100)
    assert all(type(v) is int for v in stats_of(tally, "step"))


def test_a_negative_value_is_the_lowest():
    assert stats_of(fed({"x": 0}, {"x": -3.5}, {"x": 2}), "x") == (3, 2, -3.5, 2)


def test_a_line_with_no_kept_number_adds_no_point_and_no_drop():
    tally = fed({"step": 1}, {"note": "warming up", "done": False, "hist": [1, 2]}, {}, {"step": 2})
    assert tally.points == 2
    assert [seq for seq, _ in tally.new_points] == [1, 2]
    assert tally.drops == {}


def test_a_line_whose_only_number_is_nan_adds_no_point_and_no_drop():
    tally = fed({"step": 1, "loss": 0.5}, b'{"loss": NaN}')
    assert tally.points == 1
    assert tally.drops == {}


def test_a_dropped_line_adds_no_point_and_is_counted_by_reason():
    tally = fed(
        {"step": 1},
        b"not json",
        b"[1, 2]",
        b"also not json",
        json.dumps({f"k{i}": i for i in range(65)}).encode(),
        b'{"pad": "' + b"x" * 5000 + b'"}',
        {"step": 2},
    )
    assert tally.points == 2
    assert tally.drops == {
        Reason.NOT_JSON: 2,
        Reason.NOT_OBJECT: 1,
        Reason.TOO_MANY_NUMBERS: 1,
        Reason.TOO_LONG: 1,
    }


def test_each_key_left_out_for_its_name_is_counted_and_the_point_kept():
    tally = fed({"step": 1, "train/loss": 0.5, "a..b": 1}, {"step": 2, "train/loss": 0.4})
    assert tally.drops == {Reason.BAD_KEY: 3}
    assert tally.new_points == [(1, {"step": 1}), (2, {"step": 2})]
    assert list(tally.keys) == ["step"]


def test_each_key_left_out_for_holding_a_secret_is_counted_under_its_own_reason():
    tally = Tally()
    tally.add(Line({"step": 1}, bad_keys=("a/b",), secret_keys=("***", "eval.***")))
    assert tally.drops == {Reason.BAD_KEY: 1, Reason.SECRET_KEY: 2}
    assert tally.first_drops == [Reason.BAD_KEY, Reason.SECRET_KEY]


def test_the_257th_key_is_left_out_and_counted():
    lines = [{f"k{i}": i for i in range(start, start + 64)} for start in range(0, 256, 64)]
    tally = fed(*lines)
    assert len(tally.keys) == 256
    assert tally.drops == {}

    tally.add(read_line(b'{"k0": 1000, "k256": 1, "step": 7}'))
    assert len(tally.keys) == 256
    assert "k256" not in tally.keys and "step" not in tally.keys
    assert tally.drops == {Reason.TOO_MANY_KEYS: 2}
    # The point is kept with the keys the run already has.
    assert tally.new_points[-1] == (5, {"k0": 1000})
    assert stats_of(tally, "k0") == (2, 1000, 0, 1000)


def test_a_line_made_only_of_keys_past_256_adds_no_point():
    tally = fed(*({f"k{i}": i for i in range(s, s + 64)} for s in range(0, 256, 64)))
    tally.add(read_line(b'{"extra": 1}'))
    assert tally.points == 4
    assert tally.drops == {Reason.TOO_MANY_KEYS: 1}


def test_point_200001_is_dropped_and_counted():
    tally = Tally()
    for step in range(1, 200_001):
        tally.add(Line({"step": step}))
    assert tally.points == 200_000
    assert tally.drops == {}

    tally.add(read_line(b'{"step": 200001, "loss": 0.1}'))
    assert tally.points == 200_000
    assert len(tally.new_points) == 200_000
    assert tally.new_points[-1] == (200_000, {"step": 200_000})
    assert tally.drops == {Reason.TOO_MANY_POINTS: 1}
    assert stats_of(tally, "step") == (200_000, 200_000, 1, 200_000)
    assert "loss" not in tally.keys
    assert tally.first_drops == [Reason.TOO_MANY_POINTS]


def test_a_line_without_a_number_past_200000_points_is_not_a_drop():
    tally = Tally(points=200_000)
    tally.add(read_line(b'{"note": "done"}'))
    assert tally.drops == {}


def test_a_nan_is_counted_against_its_key_with_the_seq_where_it_first_happened():
    tally = fed(
        {"step": 1, "loss": 2.0},
        {"step": 2, "loss": 1.0},
        b'{"step": 3, "loss": NaN}',
        b'{"step": 4, "loss": Infinity}',
        {"step": 5, "loss": 0.5},
    )
    loss = tally.keys["loss"]
    assert loss.passed_over == 2
    assert loss.first_passed_seq == 3
    # The values passed over are not values: the stats are the finite ones.
    assert stats_of(tally, "loss") == (3, 0.5, 0.5, 2.0)


def test_a_nan_on_a_line_with_no_other_number_is_placed_at_the_point_before_it():
    tally = fed({"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}, b'{"loss": NaN}')
    assert tally.keys["loss"].first_passed_seq == 2


def test_the_first_reason_of_each_kind_is_listed_once():
    tally = fed(b"nope", b"[1]", b"nope again", {"a/b": 1})
    assert tally.first_drops == [Reason.NOT_JSON, Reason.NOT_OBJECT, Reason.BAD_KEY]


def test_a_reason_seen_in_an_earlier_batch_is_not_listed_again():
    tally = fed(b"nope")
    assert tally.first_drops == [Reason.NOT_JSON]
    tally.settle()
    tally.add(read_line(b"nope again"))
    tally.add(read_line(b"[1]"))
    assert tally.first_drops == [Reason.NOT_OBJECT]
    assert tally.drops == {Reason.NOT_JSON: 2, Reason.NOT_OBJECT: 1}


def test_a_reason_already_counted_in_a_loaded_tally_is_not_listed_again():
    tally = Tally(drops={Reason.NOT_JSON: 4})
    tally.add(read_line(b"nope"))
    assert tally.first_drops == []
    assert tally.drops == {Reason.NOT_JSON: 5}


def test_settle_forgets_the_batch_but_not_the_account():
    tally = fed({"step": 1}, b"nope")
    tally.settle()
    assert (tally.new_points, tally.changed, tally.first_drops) == ([], set(), [])
    assert tally.points == 1 and tally.drops == {Reason.NOT_JSON: 1}
    tally.add(read_line(b'{"step": 2}'))
    assert tally.new_points == [(2, {"step": 2})]
    assert tally.changed == {"step"}


# Hypothesis: the run's limits and stats hold for any lines

key_pool = st.integers(min_value=0, max_value=400).map(lambda i: f"k{i}")
values = st.integers(min_value=-(10**6), max_value=10**6) | st.floats(
    allow_nan=False, allow_infinity=False
)
lines = st.one_of(
    st.dictionaries(key_pool, values, max_size=64).map(Line),
    st.dictionaries(key_pool, values, max_size=3).map(
        lambda d: Line(d, passed_over=("nan_key",), bad_keys=("a/b",))
    ),
    st.sampled_from(list(Reason)),
)


def assert_the_account_adds_up(tally: Tally, max_keys: int, max_points: int) -> None:
    assert len(tally.keys) <= max_keys
    assert tally.points <= max_points
    seqs = [seq for seq, _ in tally.new_points]
    assert seqs == list(range(1, len(seqs) + 1))
    assert tally.points == len(seqs)
    for name, stats in tally.keys.items():
        carried = [data[name] for _, data in tally.new_points if name in data]
        assert stats.count == len(carried)
        if carried:
            assert (stats.last, stats.min, stats.max) == (carried[-1], min(carried), max(carried))
    for _, data in tally.new_points:
        assert data and set(data) <= set(tally.keys)
    assert all(count > 0 for count in tally.drops.values())
    assert sorted(tally.first_drops) == sorted(tally.drops)


@settings(max_examples=100)
@given(st.lists(lines, max_size=40))
def test_a_run_never_keeps_more_than_256_keys(fed_lines):
    tally = Tally()
    for line in fed_lines:
        tally.add(line)
    assert_the_account_adds_up(tally, 256, 200_000)


@settings(max_examples=100)
@given(st.lists(lines, max_size=40), st.integers(1, 10), st.integers(1, 10))
def test_a_run_never_passes_its_limits_with_the_limits_made_small(fed_lines, max_keys, max_points):
    tally = Tally()
    with (
        mock.patch("telemetry.tally.MAX_KEYS", max_keys),
        mock.patch("telemetry.tally.MAX_POINTS", max_points),
    ):
        for line in fed_lines:
            points, drops, known = tally.points, dict(tally.drops), list(tally.keys)
            tally.add(line)
            if isinstance(line, Reason):
                assert tally.points == points
                assert tally.drops[line] == drops.get(line, 0) + 1
                continue
            if line.numbers and points >= max_points:
                assert tally.points == points
                assert (
                    tally.drops[Reason.TOO_MANY_POINTS] == drops.get(Reason.TOO_MANY_POINTS, 0) + 1
                )
                continue
            room = max_keys - len(known)
            new = [key for key in line.numbers if key not in known][: max(room, 0)]
            kept = {k: v for k, v in line.numbers.items() if k in known or k in new}
            if kept:
                assert tally.new_points[-1] == (points + 1, kept)
            else:
                assert tally.points == points
            left_out = len(line.numbers) - len(kept)
            too_many = tally.drops.get(Reason.TOO_MANY_KEYS, 0)
            assert too_many >= drops.get(Reason.TOO_MANY_KEYS, 0) + left_out
    assert_the_account_adds_up(tally, max_keys, max_points)
