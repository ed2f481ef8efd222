"""The dashboard's API, GET /api/runs/search/: pages of 50, filters, search and sorts, each
against exact expected answers; another org's runs never in them; every bad query string a 400
of one line (docs/api.md)."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from telemetry import queries, services
from telemetry.listing import BAD, MAX_PAGE, MAX_SEARCH, PER_PAGE
from telemetry.models import Membership, Run, Sparkline, StatValue
from tests.personas import Telemetry

pytest_plugins = ["tests.personas"]

SEARCH = "/api/runs/search/"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

# Two layouts whose "Samples/s" cards read different keys: one card, by its title, across both.
THROUGHPUT = textwrap.dedent(
    """\
    [[panel]]
    y = "loss"

    [[stat]]
    title = "Samples/s"
    y = "sps"
    """
)
PEAK = textwrap.dedent(
    """\
    [[panel]]
    y = ["acc", "loss"]
    x = "epoch"

    [[stat]]
    title = "Samples/s"
    y = "throughput"
    reduce = "max"

    [[stat]]
    title = "Samples/s"
    y = "acc"
    """
)


@pytest.fixture
def client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def launch(home, acme):
    """launch(command, layout, lines, org=acme, minutes=0, ran=None, status="running") -> the
    run, made `minutes` after T0, its lines ingested, ran for `ran` seconds if given."""

    def make(
        *command: str,
        layout: str = "",
        lines=(),
        org=None,
        minutes: int = 0,
        ran: float | None = None,
        status: str = "running",
    ) -> Run:
        run = services.run_create(
            org=org or acme, command=list(command), layout_source=layout, layout_origin=""
        )
        telemetry = Telemetry(run)
        if lines:
            telemetry.write(*lines)
            telemetry.ingest()
        created = T0 + timedelta(minutes=minutes)
        times = {"created": created}
        if ran is not None:
            times |= {"started": created, "ended": created + timedelta(seconds=ran)}
        ended = {"status": status, "exit_code": {"succeeded": 0, "failed": 1}.get(status)}
        Run.objects.filter(pk=run.pk).update(**times, **ended)
        run.refresh_from_db()
        run.feed = telemetry  # the one ingester that holds the run's lease
        return run

    return make


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [run["name"] for run in response.json()["runs"]]


def page_facts(response) -> dict:
    body = response.json()
    return {k: v for k, v in body.items() if k != "runs"}


# ---- a row, whole -------------------------------------------------------------------------


def test_a_row_is_the_runs_summary_with_its_sparkline(client, launch):
    run = launch(
        "python",
        "train.py",
        layout=THROUGHPUT,
        lines=[{"step": 1, "loss": 2.0, "sps": 120}, {"step": 2, "loss": 0.5}, {"loss": 0.25}],
        ran=90,
        status="succeeded",
    )

    response = client.get(SEARCH)

    assert response.status_code == 200
    assert response.json() == {
        "runs": [
            {
                "name": run.name,
                "org": "acme",
                "status": "succeeded",
                "command": ["python", "train.py"],
                "exit_code": 0,
                "created": "2026-03-01T12:00:00Z",
                "started": "2026-03-01T12:00:00Z",
                "ended": "2026-03-01T12:01:30Z",
                "duration": 90.0,
                "points": 3,
                "closed": False,
                "unread": True,
                "stats": [{"title": "Samples/s", "y": "sps", "reduce": "last", "value": 120}],
                # loss against step: the point without a step is left off, as on the tab
                "sparkline": {"y": "loss", "x": "step", "count": 3, "xs": [1, 2], "ys": [2.0, 0.5]},
            }
        ],
        "page": 1,
        "pages": 1,
        "total": 1,
        "per_page": 50,
        "sort": "-created",
        "cards": ["Samples/s"],
        "orgs": ["acme"],
    }


def test_a_sparkline_is_read_from_the_coarse_buckets_of_a_run_sealed_and_of_one_not_yet(
    client, launch
):
    long = launch("a", lines=[{"step": s, "loss": 1 / s} for s in range(1, 3001)], minutes=1)
    short = launch("b", lines=[{"step": s, "loss": s} for s in range(1, 6)])

    rows = {row["name"]: row["sparkline"] for row in client.get(SEARCH).json()["runs"]}

    drawn = rows[long.name]
    assert (drawn["count"], drawn["xs"][0], drawn["ys"][0]) == (3000, 1, 1.0)
    assert (drawn["xs"][-1], drawn["ys"][-1]) == (3000, 1 / 3000)
    assert len(drawn["xs"]) <= 2 * 64 + 2  # buckets, not 3,000 points
    assert rows[short.name] == {"y": "loss", "x": "step", "count": 5, "xs": [1, 5], "ys": [1, 5]}


def test_a_first_key_with_no_points_says_so_and_a_run_with_no_key_has_no_sparkline(client, launch):
    waiting = launch("a", layout=THROUGHPUT, lines=[{"step": 1, "sps": 3}], minutes=1)
    empty = launch("b")

    rows = {row["name"]: row["sparkline"] for row in client.get(SEARCH).json()["runs"]}

    assert rows[waiting.name] == {"y": "loss", "x": "step", "count": 0, "xs": [], "ys": []}
    assert rows[empty.name] is None


def test_a_layouts_own_x_is_the_sparklines_x(client, launch):
    run = launch("a", layout=PEAK, lines=[{"epoch": e, "acc": e / 10} for e in range(1, 4)])

    [row] = client.get(SEARCH).json()["runs"]

    assert row["name"] == run.name
    assert row["sparkline"] == {
        "y": "acc",
        "x": "epoch",
        "count": 3,
        "xs": [1, 3],  # the coarse level's lowest and highest of its one bucket
        "ys": [0.1, 0.3],
    }


# ---- pages --------------------------------------------------------------------------------


@pytest.fixture
def many(launch):
    """53 runs, a minute apart: the newest is the last made."""
    return [launch("python", "sweep.py", f"--seed={i}", minutes=i).name for i in range(53)]


def test_a_page_is_fifty_runs_newest_first(client, many):
    first = client.get(SEARCH)
    second = client.get(SEARCH, {"page": "2"})

    assert names(first) == many[::-1][:PER_PAGE]
    assert names(second) == many[::-1][PER_PAGE:]
    assert page_facts(second) == {
        "page": 2,
        "pages": 2,
        "total": 53,
        "per_page": 50,
        "sort": "-created",
        "cards": [],
        "orgs": ["acme"],
    }


@pytest.mark.parametrize("page", ["3", "999999999", str(MAX_PAGE)])
def test_a_page_past_the_last_is_empty_and_says_how_many_there_are(client, many, page):
    response = client.get(SEARCH, {"page": page})

    assert names(response) == []
    assert (page_facts(response)["page"], page_facts(response)["pages"]) == (int(page), 2)


def test_no_runs_is_one_empty_page(client):
    response = client.get(SEARCH)

    assert response.json()["runs"] == []
    assert (response.json()["pages"], response.json()["total"]) == (1, 0)


# ---- filters and search ---------------------------------------------------------------------


@pytest.fixture
def mixed(launch, acme, alice):
    lab = services.org_add(name="lab", members=["alice"])
    return {
        "a": launch("python", "train.py", "--lr=3e-4", status="running", minutes=1),
        "b": launch("python", "train.py", "--lr=1e-3", status="succeeded", minutes=2),
        "c": launch("python", "ÉVAL.py", "--data=50%_split", status="failed", minutes=3),
        "d": launch("bash", "-c", "echo 'it''s'; \\ ok", status="lost", minutes=4, org=lab),
    }


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"status": "running"}, ["a"]),
        ({"status": "succeeded"}, ["b"]),
        ({"status": "failed"}, ["c"]),
        ({"status": "lost"}, ["d"]),
        ({"status": "failed,lost"}, ["d", "c"]),
        ({"status": ["running", "lost"]}, ["d", "a"]),
        ({"org": "lab"}, ["d"]),
        ({"org": "acme"}, ["c", "b", "a"]),
        ({"org": "acme", "status": "succeeded"}, ["b"]),
        ({"q": "lr="}, ["b", "a"]),
        ({"q": "TRAIN.PY --LR=1E-3"}, ["b"]),  # any case, across the command's words
        ({"q": "éval"}, ["c"]),  # any case beyond ASCII too
        ({"q": "50%_"}, ["c"]),  # % and _ are the characters themselves, not wildcards
        ({"q": "%"}, ["c"]),
        ({"q": "_"}, ["c"]),
        ({"q": "'it''s'"}, ["d"]),
        ({"q": "\\"}, ["d"]),
        ({"q": "  train.py  "}, ["b", "a"]),  # spaces around the words are not searched
        ({"q": "'; DROP TABLE telemetry_run; --"}, []),
        ({"q": "nothing like it"}, []),
    ],
)
def test_filters_and_search_keep_the_runs_they_name(client, mixed, params, expected):
    response = client.get(SEARCH, params)

    assert names(response) == [mixed[key].name for key in expected]
    assert page_facts(response)["total"] == len(expected)
    assert page_facts(response)["orgs"] == ["acme", "lab"]


def test_search_finds_a_run_by_its_name(client, many):
    runs = Run.objects.order_by("pk")
    tenth = runs[9]

    assert names(client.get(SEARCH, {"q": tenth.name})) == [
        r.name for r in runs.order_by("-created") if r.name.startswith(tenth.name)
    ]
    assert names(client.get(SEARCH, {"q": tenth.name.upper()})) == names(
        client.get(SEARCH, {"q": tenth.name})
    )


def test_the_search_never_finds_a_secret_in_a_command(client, acme, home):
    services.secret_set(org=acme, name="TOKEN", value="hunter2-hunter2")
    services.run_create(org=acme, command=["python", "t.py", "--token=hunter2-hunter2"])

    assert names(client.get(SEARCH, {"q": "hunter2"})) == []
    assert len(names(client.get(SEARCH, {"q": "--token=***"}))) == 1


def test_the_table_is_still_there_after_a_search_of_sql(client, mixed):
    client.get(SEARCH, {"q": "x'); DELETE FROM telemetry_run; --"})

    assert Run.objects.count() == 4
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM telemetry_run")
        assert cursor.fetchone() == (4,)


# ---- sorts --------------------------------------------------------------------------------


@pytest.fixture
def sorted_runs(launch):
    """Runs with durations, points and stat cards: "Samples/s" is the last sps in one layout and
    the highest throughput in another; one run has no such card, one has it with no value."""
    return {
        "fast": launch("a", layout=THROUGHPUT, lines=[{"sps": 900}, {"sps": 300}], ran=10),
        "peak": launch(
            "b",
            layout=PEAK,
            lines=[{"throughput": 500, "acc": 0.9}, {"throughput": 100}, {"acc": 0.1}],
            ran=30,
            minutes=1,
        ),
        "none": launch("c", lines=[{"loss": 1}] * 5, minutes=2),  # no card; never started
        "later": launch("d", layout=THROUGHPUT, lines=[{"loss": 1}], ran=20, minutes=3),
        "slow": launch("e", layout=THROUGHPUT, lines=[{"sps": 50}] * 4, ran=10, minutes=4),
    }


@pytest.mark.parametrize(
    "sort, expected",
    [
        ("-created", ["slow", "later", "none", "peak", "fast"]),
        ("created", ["fast", "peak", "none", "later", "slow"]),
        # Equal durations keep the newest first (descending), the oldest first (ascending);
        # a run that never started has no duration and comes last either way.
        ("-duration", ["peak", "later", "slow", "fast", "none"]),
        ("duration", ["fast", "slow", "later", "peak", "none"]),
        ("-points", ["none", "slow", "peak", "fast", "later"]),
        ("points", ["later", "fast", "peak", "slow", "none"]),
        # The card by its title: fast's last sps is 300, peak's highest throughput 500.
        ("-stat:Samples/s", ["peak", "fast", "slow", "later", "none"]),
        ("stat:Samples/s", ["slow", "fast", "peak", "none", "later"]),
        ("-stat:No such card", ["slow", "later", "none", "peak", "fast"]),
    ],
)
def test_each_sort_orders_the_runs(client, sorted_runs, sort, expected):
    response = client.get(SEARCH, {"sort": sort})

    assert names(response) == [sorted_runs[key].name for key in expected]
    assert page_facts(response)["sort"] == sort
    assert page_facts(response)["cards"] == ["Samples/s"]


def test_the_card_sorted_by_is_the_first_of_its_title_and_its_value_is_kept_as_points_arrive(
    client, launch, sorted_runs
):
    peak = sorted_runs["peak"]
    # Its second "Samples/s" card reads acc: never what the title sorts by.
    assert StatValue.objects.get(run=peak, title="Samples/s").value == 500

    peak.feed.write({"throughput": 50}, {"throughput": 1000})
    peak.feed.ingest()

    assert StatValue.objects.get(run=peak, title="Samples/s").value == 1000
    assert names(client.get(SEARCH, {"sort": "-stat:Samples/s"}))[:2] == [
        peak.name,
        sorted_runs["fast"].name,
    ]


def test_a_run_whose_card_has_a_value_no_longer_of_that_key_is_not_sorted_by_a_stale_one(
    client, launch
):
    # Only the first card of a title is stored: changing the second card's key changes nothing.
    run = launch("x", layout=PEAK, lines=[{"acc": 0.5}])

    assert not StatValue.objects.filter(run=run).exists()
    assert names(client.get(SEARCH, {"sort": "-stat:Samples/s"})) == [run.name]


# ---- who sees what --------------------------------------------------------------------------


@pytest.fixture
def theirs(launch, eve):
    other = services.org_get_or_create(name="other")
    return launch(
        "python", "secret-plan.py", layout=THROUGHPUT.replace("Samples/s", "Eve's card"), org=other
    )


def test_another_orgs_runs_are_never_listed_whatever_the_query(client, mixed, theirs):
    for params in (
        {},
        {"q": "secret-plan"},
        {"q": theirs.name},
        {"sort": "-stat:Eve's card"},
        {"status": "running"},
    ):
        response = client.get(SEARCH, params)
        assert theirs.name not in names(response), params
        assert "Eve's card" not in page_facts(response)["cards"]


def test_a_teammate_sees_the_runs_and_an_outsider_only_their_own(mixed, theirs, bob, eve):
    teammate, outsider = Client(), Client()
    teammate.force_login(bob)
    outsider.force_login(eve)

    assert names(teammate.get(SEARCH)) == [mixed[k].name for k in ("c", "b", "a")]
    assert names(outsider.get(SEARCH)) == [theirs.name]
    assert page_facts(outsider.get(SEARCH))["orgs"] == ["other"]


def test_an_org_of_someone_elses_is_refused_as_one_that_does_not_exist(eve, mixed):
    outsider = Client()
    outsider.force_login(eve)

    for org in ("acme", "no-such-org"):
        response = outsider.get(SEARCH, {"org": org})
        assert response.status_code == 400
        assert response.json() == {
            "error": f'"org" is "{org}", which is not one of your orgs: other'
        }


def test_a_user_of_no_org_sees_no_run_and_is_told_so_when_filtering_by_one(mixed, eve):
    Membership.objects.filter(user=eve).delete()
    loner = Client()
    loner.force_login(eve)

    assert (names(loner.get(SEARCH)), page_facts(loner.get(SEARCH))["orgs"]) == ([], [])
    assert loner.get(SEARCH, {"org": "acme"}).json() == {
        "error": '"org" is "acme", which is not one of your orgs: you are in none'
    }


def test_logged_out_the_list_is_a_403(mixed):
    assert Client().get(SEARCH).status_code == 403
    assert Client().get(SEARCH, {"page": "junk"}).status_code == 403


# ---- bad query strings --------------------------------------------------------------------

SORT_ERROR = BAD["sort"]


@pytest.mark.parametrize(
    "params, error",
    [
        ({"page": "0"}, BAD["page"].format(value="0", most=MAX_PAGE)),
        ({"page": "-1"}, BAD["page"].format(value="-1", most=MAX_PAGE)),
        ({"page": "2.5"}, BAD["page"].format(value="2.5", most=MAX_PAGE)),
        ({"page": "1e3"}, BAD["page"].format(value="1e3", most=MAX_PAGE)),
        ({"page": "²"}, BAD["page"].format(value="\\xb2", most=MAX_PAGE)),
        ({"page": "9" * 30}, BAD["page"].format(value="9" * 30, most=MAX_PAGE)),
        ({"page": str(MAX_PAGE + 1)}, BAD["page"].format(value=MAX_PAGE + 1, most=MAX_PAGE)),
        ({"status": "done"}, BAD["status"].format(value="done")),
        ({"status": "RUNNING"}, BAD["status"].format(value="RUNNING")),
        ({"status": ["failed"] * 21}, BAD["too_many"].format(name="status", count=21, most=20)),
        ({"q": "x" * 10_000}, BAD["search"].format(length=10_000, most=MAX_SEARCH)),
        ({"q": "a\x00b"}, BAD["nul"].format(name="q", holder="name or command")),
        # PostgreSQL's text holds no NUL: refused as q's is, never a 500 there
        ({"sort": "stat:\x00"}, BAD["nul"].format(name="sort", holder="card title")),
        ({"sort": "-stat:Samples/s\x00"}, BAD["nul"].format(name="sort", holder="card title")),
        ({"sort": "name"}, SORT_ERROR.format(value="name")),
        ({"sort": "--created"}, SORT_ERROR.format(value="--created")),
        ({"sort": "stat:"}, SORT_ERROR.format(value="stat:")),
        ({"sort": "created; DROP TABLE x"}, SORT_ERROR.format(value="created; DROP TABLE x")),
        ({"sort": "x" * 500}, SORT_ERROR.format(value="x" * 59 + "…")),
        ({"sort": "-stat:" + "t" * 201}, BAD["card"].format(length=201, most=200)),
    ],
)
def test_a_bad_query_string_is_a_400_of_one_line_that_says_what_to_change(
    client, mixed, params, error
):
    response = client.get(SEARCH, params)

    assert response.status_code == 400
    assert response.json() == {"error": error}
    assert "\n" not in error and len(error) < 300


def test_the_old_list_is_kept_as_it_was(client, sorted_runs):
    body = client.get("/api/runs/").json()

    assert list(body) == ["runs"]
    assert [run["name"] for run in body["runs"]] == [
        sorted_runs[k].name for k in ("slow", "later", "none", "peak", "fast")
    ]
    assert "sparkline" not in body["runs"][0]
    peak = next(run for run in body["runs"] if run["name"] == sorted_runs["peak"].name)
    assert peak["stats"] == [
        {"title": "Samples/s", "y": "throughput", "reduce": "max", "value": 500},
        {"title": "Samples/s", "y": "acc", "reduce": "last", "value": 0.1},
    ]


# ---- sparklines kept by the ingester --------------------------------------------------------


@pytest.mark.parametrize("points", [5, 1023, 1500, 3000])
def test_the_sparkline_the_ingester_keeps_is_the_one_its_overview_and_points_draw(
    client, launch, points
):
    run = launch("a", lines=[{"step": s, "loss": (s % 97) / (s + 1)} for s in range(1, points + 1)])
    kept = Sparkline.objects.get(run=run)

    assert (kept.y, kept.x, kept.upto) == ("loss", "step", points)
    assert tuple(json.loads(kept.line)) == queries.sparklines([run.pk], "loss", "step")[run.pk]

    run.feed.finish()  # the last window sealed: the same line, from the overview alone

    assert json.loads(Sparkline.objects.get(run=run).line) == json.loads(kept.line)


def test_a_page_of_live_runs_reads_their_stored_sparklines_not_their_points(client, launch):
    live = [
        launch(f"run {i}", lines=[{"step": s, "loss": 1 / s} for s in range(1, 600)])
        for i in range(3)
    ]
    # Its first key has 600 points, none of which carries the panel's x: a line of no point.
    no_x = launch(
        "no x",
        layout='x = "epoch"\n[[panel]]\ny = ["loss"]\n',
        lines=[{"step": s, "loss": 1 / s} | {f"k{k}": k for k in range(50)} for s in range(1, 601)],
    )
    older = launch("older", lines=[{"step": 1, "loss": 4}, {"step": 2, "loss": 3}])
    Sparkline.objects.filter(run=older).delete()  # as a run ingested before rows were kept

    with CaptureQueriesContext(connection) as read:
        body = client.get(SEARCH).json()

    # One read of points not sealed yet: the older run's, drawn the way rows were before.
    [tail] = [q["sql"] for q in read.captured_queries if "telemetry_point" in q["sql"]]
    assert f"IN ({older.pk})" in tail
    rows = {row["name"]: row["sparkline"] for row in body["runs"]}
    lines = {name: (line["xs"], line["ys"]) for name, line in rows.items()}
    assert lines[older.name] == ([1, 2], [4, 3])
    assert all(lines[run.name][0][-1] == 599 for run in live)
    # The page says "loss: no points with epoch", as the dashboard does for such a key.
    assert rows[no_x.name] == {"y": "loss", "x": "epoch", "count": 600, "xs": [], "ys": []}
