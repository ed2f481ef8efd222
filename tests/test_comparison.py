"""Which runs a comparison's address names, and what each trace is drawn at (pure, in
telemetry/comparison.py); and the address the page writes (rules.js, compareQuery) read back."""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry.comparison import (
    MOST_RUNS,
    NO_RUNS,
    NOT_COMPARED,
    NotAComparison,
    common_keys,
    run_numbers,
    shown_layout,
    trace_buckets,
)

CASES = json.loads((Path(__file__).parent / "cases" / "compare.json").read_text())


@pytest.mark.parametrize(
    "text, numbers",
    [
        ("run-3,run-7", [3, 7]),
        ("7,3", [7, 3]),  # in the order given
        ("run-3,3,run-7,run-3", [3, 7]),  # each run once, where it first came
        ("run-12", [12]),
        (",".join(f"run-{n}" for n in range(1, MOST_RUNS + 1)), list(range(1, MOST_RUNS + 1))),
        (",".join(["run-1"] * MOST_RUNS), [1]),
    ],
)
def test_a_list_names_its_runs_in_order_each_once(text, numbers):
    assert run_numbers(text) == numbers


NAME = " is not a run's name, like run-7"


@pytest.mark.parametrize(
    "text, error",
    [
        (None, NO_RUNS),
        ("", NO_RUNS),
        ("run-3,,run-7", '""' + NAME),
        ("run-3,", '""' + NAME),
        (" run-3", '" run-3"' + NAME),
        ("run-3;run-7", '"run-3;run-7"' + NAME),
        ("run-٣", '"run-٣"' + NAME),  # Arabic-Indic digits are not a run's number
        ("run-0x3", '"run-0x3"' + NAME),
        ("run-3,run-0", '"run-0"' + NAME),  # runs are numbered from 1
        ("0", '"0"' + NAME),
        ("run-" + "9" * 19, '"run-9999999999999999999"' + NAME),
        ("../run-3", '"../run-3"' + NAME),
        ("run-3\nrun-7", '"run-3\\nrun-7"' + NAME),  # on one line
        ("x" * 1000, '"' + "x" * 40 + '"' + NAME),  # no more than 40 of it
        (",".join(["run-1"] * (MOST_RUNS + 1)), "a comparison holds up to 20 runs"),
    ],
)
def test_a_list_that_names_no_comparison_is_refused_with_what_is_wrong(text, error):
    with pytest.raises(NotAComparison) as refused:
        run_numbers(text)

    assert str(refused.value) == error


def test_a_list_of_10_000_names_is_refused_before_any_is_read():
    names = ",".join(f"run-{n}" for n in range(10_000))

    started = time.perf_counter()
    with pytest.raises(NotAComparison, match="up to 20 runs"):
        run_numbers(names)
    assert time.perf_counter() - started < 0.01


@given(st.text(max_size=200))
def test_any_text_is_a_list_of_run_numbers_or_refused_in_one_line(text):
    try:
        numbers = run_numbers(text)
    except NotAComparison as e:
        assert "\n" not in str(e)
        return
    assert 1 <= len(numbers) <= MOST_RUNS
    assert len(set(numbers)) == len(numbers)


def test_the_layout_shown_is_the_first_runs_unless_another_compared_run_is_named():
    assert shown_layout(None, [3, 7]) == 3
    assert shown_layout("run-7", [3, 7]) == 7
    assert shown_layout("7", [3, 7]) == 7
    with pytest.raises(NotAComparison) as refused:
        shown_layout("run-9", [3, 7])
    assert str(refused.value) == NOT_COMPARED.format(name='"run-9"')


@pytest.mark.parametrize(
    "runs, buckets", [(1, 2000), (2, 1000), (3, 666), (10, 200), (MOST_RUNS, 200)]
)
def test_a_panel_of_n_runs_draws_about_what_one_runs_panel_draws(runs, buckets):
    assert trace_buckets(runs) == buckets


def test_the_keys_to_align_on_are_those_every_run_wrote_in_the_first_runs_order():
    keys = [
        ["step", "loss", "epoch", "tokens"],
        ["epoch", "loss", "step"],
        ["loss", "step", "epoch"],
    ]

    assert common_keys(keys) == ["step", "loss", "epoch"]
    assert common_keys([["step"], []]) == []


@pytest.mark.parametrize("case", CASES["query"], ids=lambda case: case["query"])
def test_the_address_the_page_writes_names_the_same_comparison(case):
    """node's side (tests/js/compare.test.js) writes `query` from runs, layout and x."""
    params = urllib.parse.parse_qs(case["query"].removeprefix("?"))
    numbers = run_numbers(params["runs"][0])

    assert [f"run-{n}" for n in numbers] == case["runs"]
    layout = params.get("layout", [None])[0]
    assert f"run-{shown_layout(layout, numbers)}" == (case["layout"] or case["runs"][0])
    assert params.get("x", [None])[0] == case["x"]
