"""The REST API the Telemetry tab and the dashboard read (docs/api.md)."""

from __future__ import annotations

import math

import pytest
from django.test import Client

from telemetry import api, services
from telemetry.layout import MAX_PANEL_KEYS

pytest_plugins = ["tests.personas"]

TIMES = ("created", "started", "ended", "duration")


def login(client, user) -> Client:
    client.force_login(user)
    return client


def url(run, part: str = "") -> str:
    return f"/api/runs/{run.name}/{part}"


def get(client, path: str, **params):
    return client.get(path, params)


def without_times(summary: dict) -> dict:
    assert all(field in summary for field in TIMES)
    return {k: v for k, v in summary.items() if k not in TIMES}


SHOWN_SUMMARY = {
    "name": None,  # filled in with the run's name
    "org": "acme",
    "status": "running",
    "command": ["python", "train.py"],
    "exit_code": None,
    "points": 3,
    "closed": False,
    "unread": False,
    "stats": [
        {"title": "Samples/s", "y": "eval_samples_per_second", "reduce": "last", "value": 98},
        {"title": "loss", "y": "loss", "reduce": "min", "value": 0.5},
        {"title": "Worst loss", "y": "loss", "reduce": "max", "value": 2.0},
    ],
}


def shown_summary(run) -> dict:
    return {**SHOWN_SUMMARY, "name": run.name}


# ---- who sees what ------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_a_member_and_a_teammate_see_the_run_in_the_list(client, shown, persona, request):
    login(client, request.getfixturevalue(persona))

    response = client.get("/api/runs/")

    assert response.status_code == 200
    [summary] = response.json()["runs"]
    assert without_times(summary) == shown_summary(shown)


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_a_member_and_a_teammate_see_the_run_with_its_layout_keys_and_drops(
    client, shown, persona, request, example_layout
):
    login(client, request.getfixturevalue(persona))

    response = client.get(url(shown))

    assert response.status_code == 200
    body = without_times(response.json())
    assert body == {
        **shown_summary(shown),
        "layout": {"default": False, "source": example_layout, "origin": "telemetry.toml"},
        "panels": [
            {
                "title": "Loss",
                "x": "step",
                "y": ["loss", "eval_loss"],
                "scale": "log",
                "min": None,
                "max": None,
                "rule": None,
                "wide": False,
            },
            {
                "title": "F1",
                "x": "step",
                "y": ["eval_strict_f1", "eval_typed_f1"],
                "scale": "linear",
                "min": 0.9,
                "max": 1.0,
                "rule": 0.95,
                "wide": False,
            },
            {
                "title": "eval_leak_recall",
                "x": "step",
                "y": ["eval_leak_recall"],
                "scale": "linear",
                "min": None,
                "max": None,
                "rule": None,
                "wide": True,
            },
        ],
        "keys": [
            {
                "name": "step",
                "count": 3,
                "last": 3,
                "min": 1,
                "max": 3,
                "passed_over": 0,
                "first_passed_seq": None,
            },
            {
                "name": "loss",
                "count": 3,
                "last": 1.25,
                "min": 0.5,
                "max": 2.0,
                "passed_over": 0,
                "first_passed_seq": None,
            },
            {
                "name": "eval_loss",
                "count": 1,
                "last": 0.9,
                "min": 0.9,
                "max": 0.9,
                "passed_over": 0,
                "first_passed_seq": None,
            },
            {
                "name": "eval_samples_per_second",
                "count": 2,
                "last": 98,
                "min": 98,
                "max": 120.5,
                "passed_over": 0,
                "first_passed_seq": None,
            },
        ],
        "drops": [
            {
                "reason": "not_json",
                "count": 1,
                "notice": (
                    "telemetry: dropped a line that is not JSON; write one JSON object per line"
                ),
            }
        ],
    }


def test_a_run_without_a_layout_gets_a_panel_per_key_against_step(client, alice, small):
    login(client, alice)

    body = client.get(url(small)).json()

    assert body["layout"] == {"default": True, "source": "", "origin": ""}
    assert [(p["title"], p["x"], p["y"]) for p in body["panels"]] == [
        ("loss", "step", ["loss"]),
        ("acc", "step", ["acc"]),
    ]
    assert body["stats"] == []
    assert body["drops"] == []


def test_the_keys_endpoint_lists_the_keys_in_the_order_they_arrived(client, alice, small):
    login(client, alice)

    response = client.get(url(small, "keys/"))

    assert response.status_code == 200
    assert [(k["name"], k["count"], k["last"]) for k in response.json()["keys"]] == [
        ("step", 3, 40),
        ("loss", 4, 0.125),
        ("acc", 1, 0.1),
    ]


def test_an_outsider_does_not_see_the_run_in_the_list(client, eve, shown):
    login(client, eve)

    response = client.get("/api/runs/")

    assert response.status_code == 200
    assert response.json() == {"runs": []}


RUN_ENDPOINTS = ["", "keys/", "points/", "series/?y=loss", "log/"]


@pytest.mark.parametrize("part", RUN_ENDPOINTS)
def test_an_outsider_gets_a_404_from_every_run_endpoint(client, eve, shown, part):
    login(client, eve)

    assert client.get(url(shown, part)).status_code == 404


@pytest.mark.parametrize("part", ["series/?y=train/loss", "points/?after=-1", "log/?offset=x"])
def test_an_outsider_gets_a_404_even_for_bad_parameters(client, eve, shown, part):
    # A 400 would say the run exists.
    login(client, eve)

    assert client.get(url(shown, part)).status_code == 404


@pytest.mark.parametrize("name", ["run-999999", "999999", "run-x", "run--1", "run-"])
def test_a_run_that_does_not_exist_is_a_404(client, alice, shown, name):
    login(client, alice)

    assert client.get(f"/api/runs/{name}/").status_code == 404


ODD_NAMES = ["run-²", "run-99999999999999999999999"]  # a digit to str.isdigit(), not int()


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_run_name_of_odd_digits_is_a_404_from_the_api_not_a_500(client, alice, shown, name):
    login(client, alice)
    client.raise_request_exception = False

    assert client.get(f"/api/runs/{name}/").status_code == 404


@pytest.mark.parametrize("part", RUN_ENDPOINTS)
def test_anonymous_gets_a_403_from_every_endpoint(client, shown, part):
    assert client.get(url(shown, part)).status_code == 403
    assert client.get("/api/runs/").status_code == 403


# ---- series -------------------------------------------------------------------------------


def test_series_draws_a_key_against_x_leaving_off_points_without_x(client, alice, small):
    login(client, alice)

    response = get(client, url(small, "series/"), y="loss", x="step")

    assert response.status_code == 200
    assert response.json() == {
        "x": "step",
        "last": 4,
        "series": [
            {
                "key": "loss",
                "total": 3,
                "x": [10, 20, 40],
                "y": [1.0, 0.5, 0.125],
                "drawn": 3,
                "gap": 100.0,
                "passed_over": 0,
                "first_passed_x": None,
            }
        ],
    }


def test_series_without_x_draws_against_the_points_place_in_the_run(client, alice, small):
    login(client, alice)

    body = get(client, url(small, "series/"), y=["loss", "acc"]).json()

    assert body["x"] is None
    loss, acc = body["series"]
    assert (loss["x"], loss["y"]) == ([1, 2, 3, 4], [1.0, 0.5, 0.25, 0.125])
    assert (acc["x"], acc["y"]) == ([2], [0.1])


def test_a_key_not_written_yet_has_no_points_not_zeros(client, alice, small):
    login(client, alice)

    body = get(client, url(small, "series/"), y="eval_loss", x="step").json()

    assert body["series"] == [
        {
            "key": "eval_loss",
            "total": 0,
            "x": [],
            "y": [],
            "drawn": 0,
            "gap": None,
            "passed_over": 0,
            "first_passed_x": None,
        }
    ]


def test_a_large_series_is_downsampled_and_keeps_its_spike(client, alice, make_run):
    telemetry = make_run()
    telemetry.write(*({"step": i, "loss": 1e6 if i == 5000 else 1 / i} for i in range(1, 10_001)))
    telemetry.ingest()
    login(client, alice)

    [trace] = get(client, url(telemetry.run, "series/"), y="loss", x="step", buckets=100).json()[
        "series"
    ]

    assert trace["total"] == 10_000
    assert trace["drawn"] == len(trace["x"]) == len(trace["y"])
    assert trace["drawn"] <= 2 * 100 + 2
    assert 1e6 in trace["y"]
    assert trace["x"][trace["y"].index(1e6)] == 5000
    assert (trace["x"][0], trace["x"][-1]) == (1, 10_000)


def test_raw_sends_every_point(client, alice, make_run):
    telemetry = make_run()
    telemetry.write(*({"step": i, "loss": i % 7} for i in range(1, 101)))
    telemetry.ingest()
    login(client, alice)

    [trace] = get(
        client, url(telemetry.run, "series/"), y="loss", x="step", buckets=10, raw=1
    ).json()["series"]

    assert (trace["total"], trace["drawn"]) == (100, 100)
    assert trace["x"] == list(range(1, 101))


def test_a_range_returns_only_the_points_with_x_in_it(client, alice, make_run):
    telemetry = make_run()
    telemetry.write(*({"step": i * 10, "loss": i} for i in range(1, 51)))
    telemetry.ingest()
    login(client, alice)

    [trace] = get(
        client, url(telemetry.run, "series/"), y="loss", x="step", low=200, high=300
    ).json()["series"]

    assert trace["x"] == [200, 210, 220, 230, 240, 250, 260, 270, 280, 290, 300]
    assert trace["y"] == list(range(20, 31))
    assert trace["total"] == 11


def test_smoothing_sends_a_smoothed_series_beside_the_raw_one(client, alice, small):
    login(client, alice)

    [trace] = get(client, url(small, "series/"), y="loss", smooth=0.6).json()["series"]

    # Evenly spaced (the point's place in the run): the classic debiased EMA, by hand.
    w, ys = 0.6, [1.0, 0.5, 0.25, 0.125]
    average, expected = 0.0, []
    for i, y in enumerate(ys, 1):
        average = w * average + (1 - w) * y
        expected.append(average / (1 - w**i))
    assert trace["y"] == ys
    assert trace["smoothed"]["x"] == [1, 2, 3, 4]
    assert trace["smoothed"]["y"] == pytest.approx(expected)


def test_smoothing_off_sends_no_smoothed_series(client, alice, small):
    login(client, alice)

    [trace] = get(client, url(small, "series/"), y="loss", smooth=0).json()["series"]

    assert "smoothed" not in trace


def test_zooming_in_keeps_the_smoothed_line_it_had(client, alice, make_run):
    # Smoothing is computed on the full-resolution series: a range of it is the same line,
    # not a new average restarted at the range's first (noisy) point.
    telemetry = make_run()
    telemetry.write(*({"step": i, "loss": 1.0 + (i % 2)} for i in range(1, 101)))
    telemetry.ingest()
    login(client, alice)
    series = url(telemetry.run, "series/")

    [whole] = get(client, series, y="loss", x="step", smooth=0.9, raw=1).json()["series"]
    [zoomed] = get(client, series, y="loss", x="step", smooth=0.9, raw=1, low=50, high=60).json()[
        "series"
    ]

    inside = [
        y
        for x, y in zip(whole["smoothed"]["x"], whole["smoothed"]["y"], strict=True)
        if 50 <= x <= 60
    ]
    assert zoomed["smoothed"]["x"] == list(range(50, 61))
    assert zoomed["smoothed"]["y"] == pytest.approx(inside)


def test_a_key_that_went_nan_says_how_often_and_from_which_x(client, alice, make_run):
    telemetry = make_run()
    telemetry.write(
        *({"step": i * 10, "loss": math.nan if i in (30, 40) else 1 / i} for i in range(1, 51))
    )
    telemetry.ingest()
    login(client, alice)
    series = url(telemetry.run, "series/")

    [by_step] = get(client, series, y="loss", x="step").json()["series"]
    [by_seq] = get(client, series, y="loss").json()["series"]

    assert (by_step["passed_over"], by_step["first_passed_x"]) == (2, 300)
    assert (by_seq["passed_over"], by_seq["first_passed_x"]) == (2, 30)
    assert by_step["total"] == 48
    assert 300 not in by_step["x"]


# ---- bad query parameters -----------------------------------------------------------------

BAD = [
    ("series/", api.BAD_PARAMS["no_y"]),
    ("series/?y=a&y=b&y=c&y=d&y=e", api.BAD_PARAMS["too_many_y"]),
    ("series/?y=train/loss", '"y" is "train/loss", which is not a key a point can carry'),
    ("series/?y=", '"y" is "", which is not a key a point can carry'),
    ("series/?y=loss&x=bad/key", '"x" is "bad/key", which is not a key a point can carry'),
    (
        "series/?y=loss&buckets=abc",
        '"buckets" is "abc", which is not a whole number from 10 to 20000',
    ),
    ("series/?y=loss&buckets=0", '"buckets" is "0", which is not a whole number from 10 to 20000'),
    (
        "series/?y=loss&buckets=1.5",
        '"buckets" is "1.5", which is not a whole number from 10 to 20000',
    ),
    ("series/?y=loss&low=abc", '"low" is "abc", which is not a number'),
    ("series/?y=loss&high=nan", '"high" is "nan", which is not a number'),
    ("series/?y=loss&low=1e999", '"low" is "1e999", which is not a number'),
    ("series/?y=loss&low=5&high=1", '"low" is above "high"'),
    ("series/?y=loss&smooth=2", '"smooth" is "2", which is not a number from 0 to 0.999'),
    ("series/?y=loss&smooth=-0.5", '"smooth" is "-0.5", which is not a number from 0 to 0.999'),
    ("series/?y=loss&smooth=abc", '"smooth" is "abc", which is not a number'),
    (
        "points/?after=-1",
        '"after" is "-1", which is not a whole number from 0 to 1000000000',
    ),
    ("points/?limit=0", '"limit" is "0", which is not a whole number from 1 to 10000'),
    (
        "log/?offset=abc",
        '"offset" is "abc", which is not a whole number from 0 to 4611686018427387904',
    ),
]


@pytest.mark.parametrize("query, error", BAD, ids=[q for q, _ in BAD])
def test_a_bad_query_parameter_gets_a_400_with_a_message(client, alice, small, query, error):
    login(client, alice)

    response = client.get(url(small, query))

    assert response.status_code == 400
    assert response.json() == {"error": error}


def test_more_keys_than_a_panel_draws_is_refused(client, alice, small):
    # The API's limit is the layout's: a panel draws up to MAX_PANEL_KEYS.
    login(client, alice)
    keys = "&".join(f"y=k{i}" for i in range(MAX_PANEL_KEYS + 1))

    assert client.get(url(small, f"series/?{keys}")).status_code == 400
    assert client.get(url(small, "series/?y=k1&y=k2&y=k3&y=k4")).status_code == 200


ODD_NUMBERS = [
    "series/?y=loss&buckets=²",  # a digit to str.isdigit(), not to int()
    "points/?after=²",
    "points/?limit=¹⁰",
    "log/?offset=²",
    "points/?after=" + "9" * 5000,  # past int()'s 4,300-digit limit
]


@pytest.mark.parametrize("query", ODD_NUMBERS, ids=["buckets", "after", "limit", "offset", "long"])
def test_a_number_of_odd_digits_gets_a_400_not_a_500(client, alice, small, query):
    login(client, alice)
    client.raise_request_exception = False

    response = client.get(url(small, query))

    assert response.status_code == 400
    assert set(response.json()) == {"error"}


# ---- points and the log -------------------------------------------------------------------


def test_points_after_a_seq_are_exactly_the_next_ones(client, alice, make_run):
    telemetry = make_run()
    telemetry.write(*({"step": i, "loss": i / 10} for i in range(1, 11)))
    telemetry.ingest()
    login(client, alice)

    response = get(client, url(telemetry.run, "points/"), after=3, limit=4)

    assert response.status_code == 200
    assert response.json() == {
        "points": [{"seq": s, "data": {"step": s, "loss": s / 10}} for s in (4, 5, 6, 7)],
        "last": 10,
    }


def test_points_after_the_last_are_none(client, alice, small):
    login(client, alice)

    assert get(client, url(small, "points/"), after=4).json() == {"points": [], "last": 4}


def test_the_log_is_read_from_an_offset(client, alice, small):
    services.log_append(small, "epoch 1\n")
    login(client, alice)
    log = url(small, "log/")

    first = client.get(log).json()
    services.log_append(small, "epoch 2 ✓\n")
    second = get(client, log, offset=first["offset"]).json()
    third = get(client, log, offset=second["offset"]).json()

    assert first == {"text": "epoch 1\n", "offset": 8, "live": True}
    assert second == {
        "text": "epoch 2 ✓\n",
        "offset": 8 + len("epoch 2 ✓\n".encode()),
        "live": True,
    }
    assert third == {"text": "", "offset": second["offset"], "live": True}


def test_a_log_with_a_stretch_longer_than_a_page_without_a_newline_is_still_followed(
    client, alice, small
):
    # A progress bar redraws itself with \r and no \n: a long run writes far more than one
    # page that way. Following the log the way the tab does must still reach its end.
    bar = "".join(f"\rtraining {i:>7}/100000" for i in range(20_000))
    services.log_append(small, "start\n" + bar + "\ndone\n")
    size = small.log_path.stat().st_size
    assert size > api.MAX_LOG_BYTES
    login(client, alice)

    text, offset = "", 0
    for _ in range(10):
        part = get(client, url(small, "log/"), offset=offset).json()
        text, offset = text + part["text"], part["offset"]
        if offset == size:
            break

    assert offset == size
    assert text.endswith("\ndone\n")


def test_a_keys_line_breaks_where_the_key_went_missing_and_nowhere_else(client, alice, make_run):
    login(client, alice)
    telemetry = make_run()
    for step in range(1, 101):
        loss = float("nan") if 51 <= step <= 80 else 1 / step
        line = {"step": step, "loss": loss}
        if step % 10 == 0:
            line["eval_loss"] = 2 / step  # sparse, but at its usual spacing: one line
        telemetry.write(line)
    telemetry.ingest()

    body = get(client, url(telemetry.run, "series/"), y=["loss", "eval_loss"], x="step").json()
    loss, eval_loss = body["series"]

    assert loss["x"] == [*range(1, 51), None, *range(81, 101)]
    assert loss["y"][50] is None and None not in loss["y"][:50] + loss["y"][51:]
    assert (loss["drawn"], loss["total"], loss["passed_over"]) == (70, 70, 30)
    assert eval_loss["x"] == list(range(10, 101, 10))
