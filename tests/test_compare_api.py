"""A comparison of runs through its API and its page: /api/compare/, /api/compare/panels/ and
/compare/, against exact expected outputs; and never a partial comparison."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry.comparison import MOST_RUNS

pytest_plugins = ["tests.personas"]

LAYOUT = """\
x = "step"

[[panel]]
title = "Loss"
y = "loss"

[[panel]]
title = "Eval"
y = "eval_loss"

[[stat]]
title = "Best loss"
y = "loss"
reduce = "min"
"""


@pytest.fixture
def first(make_run):
    """Launched with LAYOUT: loss at three steps, an eval at one, two epochs."""
    telemetry = make_run(LAYOUT)
    telemetry.write(
        {"step": 1, "loss": 2.0, "epoch": 0},
        {"step": 2, "loss": 1.0, "eval_loss": 1.5, "epoch": 0},
        {"step": 3, "loss": 0.5, "epoch": 1},
    )
    telemetry.ingest()
    return telemetry.run


@pytest.fixture
def second(make_run):
    """No layout, no eval_loss ever, and a point without a step."""
    telemetry = make_run()
    telemetry.write(
        {"step": 1, "loss": 3.0, "epoch": 0},
        {"loss": 2.5},
        {"step": 3, "loss": 1.0, "epoch": 1, "tokens": 300},
    )
    telemetry.finish()
    return telemetry.run


def lines(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]


def series(key, x, y, *, gap=None, total=None) -> dict:
    """A trace as /series/ sends it: every point drawn, none passed over."""
    total = len(y) if total is None else total
    return {"key": key, "total": total, "x": x, "y": y, "drawn": len(y), "gap": gap}


def trace(run, last, *traces) -> dict:
    return {
        "run": run.name,
        "last": last,
        "series": [{**t, "passed_over": 0, "first_passed_x": None} for t in traces],
    }


def key(name, count, last, low, high) -> dict:
    return {
        "name": name,
        "count": count,
        "last": last,
        "min": low,
        "max": high,
        "passed_over": 0,
        "first_passed_seq": None,
    }


PANEL = {"scale": "linear", "min": None, "max": None, "rule": None, "wide": False}


def test_the_comparison_is_the_first_runs_layout_with_every_runs_keys_and_stats(
    client, alice, first, second
):
    client.force_login(alice)

    body = client.get(f"/api/compare/?runs={first.name},{second.name}").json()

    runs = body.pop("runs")
    assert body == {
        "layout": first.name,
        "default": False,
        "x": None,
        "align": ["step", "loss", "epoch"],  # what every run wrote: tokens is run-2's alone
        "buckets": 1000,
        "panels": [
            {"title": "Loss", "x": "step", "y": ["loss"], **PANEL},
            {"title": "Eval", "x": "step", "y": ["eval_loss"], **PANEL},
        ],
        "stats": [{"title": "Best loss", "y": "loss", "reduce": "min", "values": [0.5, 1.0]}],
    }
    assert [(r["name"], r["status"], r["points"], r["closed"]) for r in runs] == [
        (first.name, "running", 3, False),
        (second.name, "succeeded", 3, True),
    ]
    assert runs[0]["keys"] == [
        key("step", 3, 3, 1, 3),
        key("loss", 3, 0.5, 0.5, 2.0),
        key("epoch", 3, 1, 0, 1),
        key("eval_loss", 1, 1.5, 1.5, 1.5),
    ]
    assert runs[1]["keys"] == [
        key("step", 2, 3, 1, 3),
        key("loss", 3, 1.0, 1.0, 3.0),
        key("epoch", 2, 1, 0, 1),
        key("tokens", 1, 300, 300, 300),
    ]
    # Each run's own summary, as /api/runs/ has it.
    alone = client.get(f"/api/runs/{second.name}/").json()
    assert {k: runs[1][k] for k in alone if k in runs[1]} == {k: alone[k] for k in runs[1]}


def test_each_panel_draws_its_keys_for_every_run_and_a_key_never_written_is_empty(
    client, alice, first, second
):
    client.force_login(alice)

    sent = lines(client.get(f"/api/compare/panels/?runs={first.name},{second.name}"))

    assert sent == [
        {
            "panel": 0,
            "x": "step",
            "runs": [
                trace(first, 3, series("loss", [1, 2, 3], [2.0, 1.0, 0.5], gap=5.0)),
                # The point without a step is left off, as on one run's tab.
                trace(second, 3, series("loss", [1, 3], [3.0, 1.0])),
            ],
        },
        {
            "panel": 1,
            "x": "step",
            "runs": [
                trace(first, 3, series("eval_loss", [2], [1.5])),
                trace(second, 3, series("eval_loss", [], [])),  # never a line at zero
            ],
        },
    ]


def test_every_panel_can_be_drawn_against_a_key_every_run_wrote(client, alice, first, second):
    client.force_login(alice)

    sent = lines(client.get(f"/api/compare/panels/?runs={first.name},{second.name}&x=epoch"))

    assert sent[0] == {
        "panel": 0,
        "x": "epoch",
        "runs": [
            trace(first, 3, series("loss", [0, 0, 1], [2.0, 1.0, 0.5])),
            trace(second, 3, series("loss", [0, 1], [3.0, 1.0])),
        ],
    }
    assert [part["x"] for part in sent] == ["epoch", "epoch"]


def test_another_runs_layout_gives_its_panels(client, alice, first, second):
    client.force_login(alice)

    body = client.get(f"/api/compare/?runs={first.name},{second.name}&layout={second.name}")
    sent = lines(
        client.get(f"/api/compare/panels/?runs={first.name},{second.name}&layout={second.name}")
    )

    # run-2 has no telemetry.toml: a panel a key it wrote, against step.
    assert [p["title"] for p in body.json()["panels"]] == ["loss", "epoch", "tokens"]
    assert body.json()["stats"] == []
    assert sent[2] == {
        "panel": 2,
        "x": "step",
        "runs": [
            trace(first, 3, series("tokens", [], [])),
            trace(second, 3, series("tokens", [3], [300])),
        ],
    }


def test_each_trace_has_its_own_buckets_and_zooming_in_reads_every_run_at_full_resolution(
    client, alice, make_run
):
    client.force_login(alice)
    runs = []
    for n in (1, 2, 3):
        telemetry = make_run(LAYOUT)
        telemetry.write(*({"step": s, "loss": n + (s % 7) / 10} for s in range(1, 3001)))
        telemetry.ingest()
        runs.append(telemetry.run)
    names = ",".join(run.name for run in runs)

    first_view = lines(client.get(f"/api/compare/panels/?runs={names}&panel=0"))[0]
    zoomed = lines(client.get(f"/api/compare/panels/?runs={names}&panel=0&low=1000&high=1400"))[0]

    for n, part in enumerate(first_view["runs"], 1):
        loss = part["series"][0]
        assert loss["total"] == 3000
        assert 3000 > loss["drawn"] >= 666  # 2,000 buckets shared by three runs, each its own
        assert loss["drawn"] <= 2 * 666 + 2
        assert (min(loss["y"]), max(loss["y"])) == (n, n + 0.6)  # each run's lows and highs
    for part in zoomed["runs"]:
        loss = part["series"][0]
        assert loss["total"] == loss["drawn"] == 401
        assert loss["x"] == list(range(1000, 1401))


@pytest.mark.parametrize(
    "query, error",
    [
        ("&layout=run-999", '"layout" is "run-999", which is not one of the runs compared'),
        ("&x=a/b", '"x" is "a/b", which is not a key a point can carry'),
        ("&panel=2", '"panel" is "2", which is not a panel of this run: it has 2, from 0'),
        ("&smooth=2", '"smooth" is "2", which is not a number from 0 to 0.999'),
    ],
)
def test_a_bad_parameter_is_a_400_with_what_to_change(client, alice, first, second, query, error):
    client.force_login(alice)
    url = f"/api/compare/panels/?runs={first.name},{second.name}{query}"

    response = client.get(url)

    assert (response.status_code, response.json()) == (400, {"error": error})


# ---- never a partial comparison ----------------------------------------------------------------


@pytest.fixture
def foreign(db, home):
    """A run of eve's org."""
    from telemetry import services

    return services.run_create(org=services.org_get_or_create(name="other"), command=["x"])


def refused_lists(first, foreign) -> list[str]:
    return [
        f"{first.name},{foreign.name}",  # another org's run
        f"{foreign.name},{first.name}",
        f"{first.name},run-99999",  # no such run
        f"{first.name},,{first.name}",
        f"{first.name},",
        "",
        "run-one",
        f" {first.name}",
        f"{first.name};DROP TABLE",
        ",".join([first.name] * (MOST_RUNS + 1)),  # 21 names, though one run
        ",".join(f"run-{n}" for n in range(10_000)),
    ]


def test_a_list_naming_a_run_not_yours_or_none_is_a_404_everywhere(client, alice, first, foreign):
    client.force_login(alice)

    for runs in refused_lists(first, foreign):
        for path in ("/api/compare/", "/api/compare/panels/"):
            response = client.get(path, {"runs": runs})
            assert response.status_code == 404, (path, runs[:60])
        page = client.get("/compare/", {"runs": runs})
        assert page.status_code == 404, runs[:60]
        assert b"Not found" in page.content
        assert foreign.name.encode() not in page.content


def test_runs_given_twice_in_the_address_are_one_list(client, alice, first, second, foreign):
    client.force_login(alice)
    twice = [("runs", foreign.name), ("runs", first.name)]  # the last alone is a run of alice's

    for path in ("/compare/", "/api/compare/", "/api/compare/panels/"):
        assert client.get(path + "?" + urlencode(twice)).status_code == 404, path
    both = client.get("/api/compare/?" + urlencode([("runs", first.name), ("runs", second.name)]))
    assert [run["name"] for run in both.json()["runs"]] == [first.name, second.name]


def test_the_owner_of_the_other_run_gets_a_404_for_the_list_too(client, eve, first, foreign):
    client.force_login(eve)

    assert client.get("/compare/", {"runs": f"{foreign.name},{first.name}"}).status_code == 404
    assert client.get("/compare/", {"runs": foreign.name}).status_code == 200


def test_logged_out_the_page_asks_to_log_in_and_the_api_refuses(client, first):
    page = client.get("/compare/", {"runs": first.name})

    assert page.status_code == 302 and page["Location"].startswith("/login/")
    assert client.get("/api/compare/", {"runs": first.name}).status_code == 403
    assert client.get("/api/compare/panels/", {"runs": first.name}).status_code == 403


def test_a_list_of_10_000_names_is_refused_without_reading_a_run(client, alice, first):
    client.force_login(alice)
    names = ",".join(f"run-{n}" for n in range(10_000))

    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/compare/panels/", {"runs": names})

    assert response.status_code == 404
    assert not [q for q in queries.captured_queries if "telemetry_run" in q["sql"]]


def test_a_run_named_twice_is_compared_once(client, alice, first, second):
    client.force_login(alice)
    number = first.name.removeprefix("run-")

    body = client.get("/api/compare/", {"runs": f"{first.name},{number},{second.name}"}).json()

    assert [run["name"] for run in body["runs"]] == [first.name, second.name]


def test_the_page_embeds_what_the_api_answers(client, alice, first, second):
    client.force_login(alice)
    runs = f"{first.name},{second.name}"

    page = client.get("/compare/", {"runs": runs, "x": "epoch"})

    assert page.status_code == 200
    embedded = json.loads(
        page.content.split(b'id="compare-detail" type="application/json">')[1].split(b"</script>")[
            0
        ]
    )
    answered = client.get("/api/compare/", {"runs": runs, "x": "epoch"}).json()
    for body in (embedded, answered):
        for run in body["runs"]:
            for when in ("created", "started", "ended"):  # as JSON writes times: to the ms, or µs
                run.pop(when)
    assert embedded == answered
    assert b'id="compare-detail"' in page.content
    assert client.get("/compare/", {"runs": runs, "layout": "run-99999"}).status_code == 404
    assert client.get("/compare/", {"runs": runs, "x": "a b"}).status_code == 404
