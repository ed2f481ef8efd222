"""One request for a whole tab: GET /api/runs/run-7/panels/ streams each panel's first view."""

from __future__ import annotations

import http.client
import json
import math
import urllib.parse

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient, Client

from telemetry import api, services
from telemetry.ingest import Ingester
from tests.browser import serve, stop

pytest_plugins = ["tests.personas"]

LAYOUT = """\
x = "step"

[[panel]]
title = "Loss"
y = ["loss", "eval.loss"]

[[panel]]
y = "lr"
x = "epoch"

[[panel]]
title = "Loss by seq"
y = "loss"
x = "seq"
"""


def lines(n: int) -> list[dict]:
    out = []
    for step in range(1, n + 1):
        line = {"step": step, "loss": 2 + math.sin(step / 50), "lr": 1 / step, "seq": step}
        if step % 10 == 0:
            line["eval"] = {"loss": 3 - step / n}
        if step % 100 == 0:
            line["epoch"] = step // 100
        out.append(line)
    return out


@pytest.fixture
def tab_run(make_run):
    telemetry = make_run(LAYOUT)
    telemetry.write(*lines(6000))
    telemetry.ingest()
    return telemetry.run


def parts(body: bytes) -> list[dict]:
    assert body.endswith(b"\n")
    return [json.loads(line) for line in body.split(b"\n")[:-1]]


def series_of(client, run, panel: dict) -> dict:
    query = [("y", y) for y in panel["y"]] + [("x", panel["x"])]
    return client.get(f"/api/runs/{run.name}/series/?{urllib.parse.urlencode(query)}").json()


def test_one_request_sends_every_panel_a_line_each_as_its_series_request_would(
    client, alice, tab_run
):
    client.force_login(alice)

    response = client.get(f"/api/runs/{tab_run.name}/panels/")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    sent = parts(b"".join(response.streaming_content))
    panels = client.get(f"/api/runs/{tab_run.name}/").json()["panels"]
    assert [part["panel"] for part in sent] == [0, 1, 2]
    for part, panel in zip(sent, panels, strict=True):
        alone = series_of(client, tab_run, panel)
        assert {k: v for k, v in part.items() if k != "panel"} == alone
    loss, eval_loss = sent[0]["series"]
    assert (loss["total"], eval_loss["total"]) == (6000, 600)
    assert sent[1]["series"][0]["total"] == 60  # lr drawn against epoch: every 100th point


def test_a_tab_asks_for_the_panels_it_shows_in_the_order_it_wants(client, alice, tab_run):
    client.force_login(alice)

    response = client.get(f"/api/runs/{tab_run.name}/panels/?panel=2&panel=0&buckets=50")

    sent = parts(b"".join(response.streaming_content))
    assert [part["panel"] for part in sent] == [2, 0]
    assert all(s["drawn"] <= 2 * 50 + 2 for part in sent for s in part["series"])


@pytest.mark.parametrize(
    "query, error",
    [
        ("panel=3", '"panel" is "3", which is not a panel of this run: it has 3, from 0'),
        ("panel=-1", '"panel" is "-1", which is not a panel of this run: it has 3, from 0'),
        ("panel=one", '"panel" is "one", which is not a panel of this run: it has 3, from 0'),
        ("buckets=5", '"buckets" is "5", which is not a whole number from 10 to 20000'),
    ],
)
def test_a_bad_parameter_gets_a_400_with_what_to_change(client, alice, tab_run, query, error):
    client.force_login(alice)

    response = client.get(f"/api/runs/{tab_run.name}/panels/?{query}")

    assert response.status_code == 400
    assert response.json() == {"error": error}


def test_an_outsider_gets_a_404_and_anonymous_a_403(client, eve, tab_run):
    assert client.get(f"/api/runs/{tab_run.name}/panels/").status_code == 403
    client.force_login(eve)
    assert client.get(f"/api/runs/{tab_run.name}/panels/").status_code == 404


def test_a_run_without_keys_yet_has_no_panels_to_send(client, alice, make_run):
    client.force_login(alice)
    run = make_run().run

    response = client.get(f"/api/runs/{run.name}/panels/")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b""
    assert (
        api.BAD_PARAMS["panel"].format(value="0", count=0)
        == (client.get(f"/api/runs/{run.name}/panels/?panel=0").json()["error"])
    )


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_under_asgi_each_panel_is_its_own_part_of_the_stream(alice, tab_run):
    # As daphne runs Django: a plain iterator would be read to its end before the first part
    # went out, so the tab would wait for the slowest panel.
    client = AsyncClient()
    await client.aforce_login(alice)

    response = await client.get(f"/api/runs/{tab_run.name}/panels/")
    sent = [part async for part in response.streaming_content]
    # The parts were read in asgiref's thread: its connection would keep PostgreSQL from
    # dropping the test database.
    await sync_to_async(connections.close_all)()

    assert response.status_code == 200
    assert len(sent) == 3 and all(part.count(b"\n") == 1 for part in sent)
    assert [json.loads(part)["panel"] for part in sent] == [0, 1, 2]


def test_div_serve_streams_the_panels_line_by_line(div, tmp_path):
    alice = services.user_create(username="alice", orgs=[services.DEFAULT_ORG])
    run = services.run_create(
        org=services.org_get_or_create(), command=["train"], layout_source=LAYOUT
    )
    run.telemetry_path.write_text("".join(json.dumps(line) + "\n" for line in lines(3000)))
    services.run_finish(run=run, exit_code=0)
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    expected = parts(
        b"".join(_client_for(alice).get(f"/api/runs/{run.name}/panels/").streaming_content)
    )
    server = serve(div.env, tmp_path / "serve.out")
    try:
        cookie = _session_cookie(server.port, services.login_link(user=alice, base=server.url))
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
        connection.request("GET", f"/api/runs/{run.name}/panels/", headers={"Cookie": cookie})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Transfer-Encoding") == "chunked"
        received = [json.loads(response.readline()) for _ in range(3)]
        assert response.read() == b""
        connection.close()
    finally:
        stop(server.process)
    assert received == expected


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _session_cookie(port: int, link: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    connection.request("GET", urllib.parse.urlsplit(link).path)
    response = connection.getresponse()
    response.read()
    assert response.status == 302, response.status
    cookies = response.headers.get_all("Set-Cookie")
    connection.close()
    return "; ".join(cookie.split(";")[0] for cookie in cookies)
