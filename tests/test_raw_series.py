"""?raw=1 sends every point, up to a bound: past 200,000 points an answer is a 400 that says
to ask for a range or for buckets, so no client can make the server hold a run's every key."""

from __future__ import annotations

import pytest
from django.test import Client

pytest_plugins = ["tests.personas"]

POINTS = 100_001  # two keys of these are more than a raw answer holds; one is not
REFUSED = (
    "raw=1 sends at most 200,000 points, and these keys have more: ask for a range of x"
    " (low, high), or leave raw out for min/max buckets"
)


@pytest.fixture
def long_run(make_run, alice):
    telemetry = make_run()
    with open(telemetry.run.telemetry_path, "w") as f:
        f.writelines(
            f'{{"step": {s}, "loss": {1 / s!r}, "lr": 0.5}}\n' for s in range(1, POINTS + 1)
        )
    telemetry.finish()
    client = Client()
    client.force_login(alice)
    return telemetry.run, client


def series(client, run, **params):
    return client.get(f"/api/runs/{run.name}/series/", {"x": "step", **params})


def test_raw_past_200000_points_is_a_400_saying_to_ask_for_a_range_or_buckets(long_run):
    run, client = long_run

    refused = series(client, run, y=["loss", "lr"], raw=1)
    [whole] = series(client, run, y="loss", raw=1).json()["series"]
    ranged = series(client, run, y=["loss", "lr"], raw=1, low=1, high=50_000).json()["series"]
    bucketed = series(client, run, y=["loss", "lr"]).json()["series"]

    assert (refused.status_code, refused.json()) == (400, {"error": REFUSED})
    # Within the bound, a range of it, and buckets (what the tab asks, zoomed in or not).
    assert (whole["total"], whole["drawn"], whole["x"][-1]) == (POINTS, POINTS, POINTS)
    assert [(s["total"], s["drawn"]) for s in ranged] == [(50_000, 50_000)] * 2
    assert [s["total"] for s in bucketed] == [POINTS, POINTS]
    assert all(s["drawn"] <= 4_002 for s in bucketed)
