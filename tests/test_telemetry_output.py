"""`div telemetry` saying what is true: every point in a whole-run CSV, and the values a key
passed over repeated on stderr as the tab shows them."""

from __future__ import annotations

import pytest

from telemetry import services
from tests.personas import Telemetry


@pytest.fixture
def run_with(div):
    """A run of the org default whose telemetry file holds these lines, ingested."""

    def make(*lines) -> str:
        telemetry = Telemetry(
            services.run_create(org=services.org_get_or_create(), command=["train"])
        )
        telemetry.write(*lines)
        telemetry.finish()
        return telemetry.run.name

    return make


def test_a_whole_run_csv_has_a_row_for_a_point_that_carries_only_x(div, run_with):
    name = run_with(
        {"step": 5, "loss": 0.5, "lr": 0.1, "acc": 0.9, "gnorm": 1.5},
        {"step": 6, "loss": float("inf")},  # kept as {"step": 6}
        {"step": 7, "loss": 0.25},
    )

    every = div("telemetry", name, "--csv")
    lines = div("telemetry", name, "--json").stdout.splitlines()

    assert every.stdout == "step,loss,lr,acc,gnorm\n5,0.5,0.1,0.9,1.5\n6,,,,\n7,0.25,,,\n"
    assert lines[1] == '{"seq": 2, "data": {"step": 6}}'
    assert len(lines) == every.stdout.count("\n") - 1  # a CSV row for every point


def test_csv_with_keys_still_has_only_the_points_that_carry_one(div, run_with):
    name = run_with({"step": 5, "loss": 0.5}, {"step": 6, "loss": float("nan")})

    assert div("telemetry", name, "loss", "--csv").stdout == "step,loss\n5,0.5\n"


def test_a_key_whose_values_were_all_nan_says_so_on_stderr(div, run_with):
    name = run_with(
        {"step": 5, "loss": 0.5},
        {"step": 6, "loss": 0.4, "acc": float("nan")},
        {"step": 7, "loss": float("inf"), "acc": float("-inf")},
    )

    table = div("telemetry", name)

    assert table.stdout == (
        "key   count  last     min      max\n"
        "step  3      7        5        7\n"
        "loss  2      0.4      0.4      0.5\n"
        "acc   0                        \n"
    )
    assert table.stderr == (
        "telemetry: loss: 1 value passed over as NaN or Infinity, first at step 7\n"
        "telemetry: acc: 2 values passed over as NaN or Infinity, first at step 6\n"
    )


def test_passed_over_values_are_placed_by_the_x_the_points_are_printed_against(div, run_with):
    name = run_with({"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": float("nan")})

    by_epoch = div("telemetry", name, "loss", "--x", "epoch")
    by_place = div("telemetry", name)

    assert by_epoch.stderr.endswith(
        "telemetry: loss: 1 value passed over as NaN or Infinity, first at epoch 2\n"
    )
    assert by_place.stderr == (
        "telemetry: loss: 1 value passed over as NaN or Infinity, first at point 2\n"
    )
