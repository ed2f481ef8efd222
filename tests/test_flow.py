"""telemetry/flow.py: points cut into pages of bytes, and the window of unacknowledged ones."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry.flow import PAGE_BYTES, Window, new_token, pages, points_message


def wide(seq: int, keys: int = 64) -> tuple[int, dict]:
    return seq, {f"key_{k:02d}": seq + k / 7 for k in range(keys)}


def test_points_are_cut_into_pages_of_at_most_the_limit_each_point_once_in_order():
    points = [wide(seq) for seq in range(1, 301)]

    cut = list(pages(points, limit=10_000))

    assert len(cut) > 10
    assert all(len(body) <= 10_000 for body, _ in cut)
    seen = [p["seq"] for body, _ in cut for p in json.loads(body)]
    assert seen == list(range(1, 301))
    assert [last for _, last in cut] == [json.loads(body)[-1]["seq"] for body, _ in cut]


def test_a_point_bigger_than_the_limit_is_a_page_of_its_own():
    cut = list(pages([wide(1), wide(2)], limit=10))

    assert [last for _, last in cut] == [1, 2]


def test_a_message_of_a_page_is_at_most_page_bytes():
    points = [wide(seq) for seq in range(1, 2001)]

    sizes = [len(points_message(body, new_token())) for body, _ in pages(points)]

    assert len(sizes) > 5 and max(sizes) <= PAGE_BYTES
    assert min(sizes[:-1]) > PAGE_BYTES - 2000  # full, but for less than a point


def test_no_points_no_pages():
    assert list(pages([])) == []


@given(st.lists(st.integers(min_value=0, max_value=64), max_size=60), st.integers(10, 5000))
def test_pages_hold_every_point_once_in_order_whatever_their_sizes(sizes, limit):
    points = [wide(seq, keys) for seq, keys in enumerate(sizes, start=1)]

    cut = list(pages(points, limit=limit))

    assert [p["seq"] for body, _ in cut for p in json.loads(body)] == list(range(1, len(sizes) + 1))
    assert all(len(body) <= limit or len(json.loads(body)) == 1 for body, _ in cut)


def test_a_points_message_is_the_json_the_tab_reads():
    body, _ = next(pages([(1, {"loss": 0.5}), (2, {"loss": 3e-4})]))

    assert json.loads(points_message(body, "tok")) == {
        "type": "points",
        "points": [{"seq": 1, "data": {"loss": 0.5}}, {"seq": 2, "data": {"loss": 3e-4}}],
        "ack": "tok",
    }


def test_tokens_cannot_be_guessed_from_each_other():
    tokens = {new_token() for _ in range(1000)}

    assert len(tokens) == 1000


def test_a_window_has_room_until_its_limit_and_an_ack_frees_that_message_and_the_ones_before():
    window = Window(limit=100)
    window.sent("a", 40, last=10)
    window.sent("b", 40, last=20)
    assert window.room()
    window.sent("c", 40, last=30)
    assert not window.room()

    assert window.ack("b")

    assert (window.unacked, window.drawn, window.room()) == (40, 20, True)
    assert [t for t, _, _ in window.in_flight] == ["c"]


@pytest.mark.parametrize("token", ["x", "a"])
def test_an_ack_for_nothing_in_flight_frees_nothing(token):
    window = Window(limit=100)
    window.sent("b", 40, last=20)
    if token == "a":
        window.sent("a", 10, last=30)
        assert window.ack("a")  # a, and b before it

    assert not window.ack(token)
    assert window.unacked == (40 if token == "x" else 0)


def test_a_tab_is_behind_when_the_run_is_more_than_max_behind_past_what_it_has_drawn():
    window = Window()
    window.drawn = 1000

    assert not window.behind(1500, max_behind=500)
    assert window.behind(1501, max_behind=500)
