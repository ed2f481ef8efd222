"""The one request for a tab's panels also zooms and smooths them: a tab that zooms or smooths
several panels reads them again in one request, each line as /series/ would answer it."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.test_panels_api import LAYOUT, lines

pytest_plugins = ["tests.personas"]


@pytest.fixture
def tab_run(make_run):
    telemetry = make_run(LAYOUT)
    telemetry.write(*lines(3000))
    telemetry.ingest()
    return telemetry.run


def streamed(client, url: str) -> list[dict]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    return [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]


def series(client, run, panel: dict, **view) -> dict:
    query = [("y", y) for y in panel["y"]] + [("x", panel["x"])]
    query += list(view.items())
    return client.get(f"/api/runs/{run.name}/series/?{urllib.parse.urlencode(query)}").json()


@pytest.mark.parametrize(
    "view",
    [
        {"low": "1000", "high": "1500"},  # zoomed in: those points at full resolution
        {"smooth": "0.6"},
        {"smooth": "0.9", "low": "10", "high": "2990"},
    ],
)
def test_each_panel_is_answered_as_its_series_request_would_be(client, alice, tab_run, view):
    client.force_login(alice)
    panels = client.get(f"/api/runs/{tab_run.name}/").json()["panels"]

    query = urllib.parse.urlencode([("panel", "0"), ("panel", "2"), *view.items()])
    sent = streamed(client, f"/api/runs/{tab_run.name}/panels/?{query}")

    assert [part["panel"] for part in sent] == [0, 2]
    for part in sent:
        alone = series(client, tab_run, panels[part["panel"]], **view)
        assert {k: v for k, v in part.items() if k != "panel"} == alone
    loss = sent[0]["series"][0]
    if "low" in view:
        assert min(x for x in loss["x"] if x is not None) >= float(view["low"])
    if "smooth" in view:
        assert loss["smoothed"]["y"] != loss["y"]


@pytest.mark.parametrize(
    "query, error",
    [
        ("low=5&high=1", '"low" is above "high"'),
        ("smooth=1", '"smooth" is "1", which is not a number from 0 to 0.999'),
        ("low=soon", '"low" is "soon", which is not a number'),
    ],
)
def test_a_bad_view_gets_a_400_before_anything_is_sent(client, alice, tab_run, query, error):
    client.force_login(alice)

    response = client.get(f"/api/runs/{tab_run.name}/panels/?{query}")

    assert response.status_code == 400
    assert response.json() == {"error": error}
