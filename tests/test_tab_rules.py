"""The Python side of each rule the tab mirrors in static/telemetry/rules.js, on the cases the
node tests run too (tests/cases/tab_rules.json; `node --test tests/js/` is the other side)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telemetry.downsample import gaps, on_log_scale
from telemetry.layout import point_x
from telemetry.tables import passed_over_note
from telemetry.tally import KeyStats

CASES = json.loads((Path(__file__).parent / "cases" / "tab_rules.json").read_text())


@pytest.mark.parametrize("case", CASES["point_x"])
def test_the_x_a_panel_uses_is_layout_point_x(case):
    assert point_x(case["x"], case["seq"], case["data"]) == case["want"]


@pytest.mark.parametrize("case", CASES["reduce"])
def test_which_value_a_stat_card_shows_is_what_the_key_stats_keep(case):
    stats = KeyStats("key", order=1)
    for value in case["values"]:
        stats.take(value)

    assert getattr(stats, case["reduce"]) == case["want"]


@pytest.mark.parametrize("case", CASES["breaks"])
def test_where_a_line_breaks_is_downsample_gaps(case):
    assert gaps(case["xs"], case["gap"]) == [tuple(pair) for pair in case["want"]]


@pytest.mark.parametrize("case", CASES["log_scale"])
def test_what_a_log_scale_leaves_off_is_downsample_on_log_scale(case):
    assert on_log_scale(case["xs"], case["ys"]) == (
        case["want_xs"],
        case["want_ys"],
        case["left_off"],
    )


@pytest.mark.parametrize("case", CASES["passed_over"])
def test_what_a_panel_note_says_of_nan_is_what_div_telemetry_says(case):
    assert passed_over_note(case["key"], case["count"], case["x"], case["at"]) == case["want"]
