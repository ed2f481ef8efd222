"""A comparison's websocket (/ws/compare/run-3,run-7/): every run listed on one socket, each as
the run's own socket sends it, in one window of unacknowledged bytes, and only while the user may
see every one of them. Through the application daphne serves, with a real session cookie."""

# The fixtures are imported by name; pytest hands them to the tests as arguments of the same
# name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from divergent.asgi import application
from telemetry.comparison import MOST_RUNS
from telemetry.consumers import (
    BEHIND,
    LOGGED_OUT,
    NOT_A_RUN,
    NOT_YOURS,
    SEND_AFTER_RUNS,
    STARTED_ALREADY,
)
from telemetry.flow import MAX_BEHIND, PAGE_BYTES, WINDOW_BYTES
from telemetry.models import Org
from tests.sockets import TIMEOUT, cookie_of, ingest, layer, logged_in, steps  # noqa: F401
from tests.test_socket_access import WITHIN, closed_within
from tests.test_socket_flow import wide

pytest_plugins = ["tests.personas"]

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def runs(make_run):
    return make_run(), make_run()


async def comparing(path: str, user=None, *, browser=None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if user is not None or browser is not None:
        headers.append((b"cookie", cookie_of(browser or await logged_in(user))))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


def path_of(*telemetries) -> str:
    return "/ws/compare/" + ",".join(t.run.name for t in telemetries) + "/"


async def messages(communicator, until) -> list[dict]:
    """Messages, acknowledging each points message, until until(got) is true."""
    got: list[dict] = []
    while not until(got):
        message = await communicator.receive_json_from(timeout=TIMEOUT)
        if message["type"] == "points":
            await communicator.send_json_to({"ack": message.pop("ack")})
        got.append(message)
    return got


def seqs(got: list[dict], run) -> list[int]:
    return [
        p["seq"]
        for m in got
        if m.get("run") == run.name and m["type"] == "points"
        for p in m["points"]
    ]


def statuses(got: list[dict]) -> list[dict]:
    return [m for m in got if m["type"] == "status"]


async def test_each_run_gets_its_backlog_after_its_seq_then_live_points_then_its_end(runs, alice):
    a, b = runs
    await ingest(a, *steps(1, 5))
    await ingest(b, *steps(1, 3))
    communicator = await comparing(path_of(a, b), alice)

    await communicator.send_json_to({"after": {a.run.name: 2, b.run.name: 0}})
    got = await messages(communicator, lambda got: len(statuses(got)) == 2)

    assert seqs(got, a.run) == [3, 4, 5]
    assert seqs(got, b.run) == [1, 2, 3]
    assert got[0] == {
        "type": "points",
        "run": a.run.name,
        "points": [{"seq": s, "data": {"step": s, "loss": 1 / s}} for s in (3, 4, 5)],
    }
    assert statuses(got) == [
        {"type": "status", "run": a.run.name, "status": "running", "closed": False},
        {"type": "status", "run": b.run.name, "status": "running", "closed": False},
    ]

    await ingest(b, *steps(4, 5))
    await ingest(a, *steps(6, 6))
    live = await messages(communicator, lambda got: len(got) == 2)
    assert [(m["run"], [p["seq"] for p in m["points"]]) for m in live] == [
        (b.run.name, [4, 5]),
        (a.run.name, [6]),
    ]

    await database_sync_to_async(b.finish)(exit_code=0)
    end = await messages(communicator, lambda got: got and got[-1].get("closed"))
    assert end[-1] == {"type": "status", "run": b.run.name, "status": "succeeded", "closed": True}
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_page_that_reconnects_from_each_runs_seq_misses_nothing_and_gets_nothing_twice(
    runs, alice
):
    a, b = runs
    await ingest(a, *steps(1, 4))
    await ingest(b, *steps(1, 2))
    first = await comparing(path_of(a, b), alice)
    await first.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})
    before = await messages(first, lambda got: len(statuses(got)) == 2)
    await first.disconnect()

    await ingest(a, *steps(5, 7))  # while the page is away
    second = await comparing(path_of(a, b), alice)
    after = {a.run.name: seqs(before, a.run)[-1], b.run.name: seqs(before, b.run)[-1]}
    await second.send_json_to({"after": after})
    again = await messages(second, lambda got: len(statuses(got)) == 2)
    await ingest(b, *steps(3, 3))
    again += await messages(second, lambda got: len(got) == 1)

    assert seqs(before, a.run) + seqs(again, a.run) == list(range(1, 8))
    assert seqs(before, b.run) + seqs(again, b.run) == [1, 2, 3]
    await second.disconnect()


async def test_the_runs_share_one_window_and_acknowledging_lets_each_go_on(runs, alice):
    a, b = runs
    await ingest(a, *wide(1, 1500))  # about 2.4 MB each
    await ingest(b, *wide(1, 1500))
    communicator = await comparing(path_of(a, b), alice)
    await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})

    sent, last = 0, None
    while sent < WINDOW_BYTES:
        text = (await communicator.receive_output(timeout=TIMEOUT))["text"]
        assert len(text) <= PAGE_BYTES
        sent += len(text)
        last = json.loads(text)
    assert await communicator.receive_nothing(timeout=0.3)  # held back: nothing unacknowledged more
    assert sent <= WINDOW_BYTES + PAGE_BYTES

    await communicator.send_json_to({"ack": last["ack"]})
    got = await messages(communicator, lambda got: len(statuses(got)) == 2)
    assert seqs(got, a.run)[-1] == seqs(got, b.run)[-1] == 1500
    await communicator.disconnect()


async def test_a_run_further_behind_than_max_behind_closes_the_socket_with_4413(runs, alice):
    a, b = runs
    await ingest(a, *steps(1, MAX_BEHIND + 1))
    communicator = await comparing(path_of(a, b), alice)

    await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})

    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": BEHIND,
    }
    await communicator.disconnect()


async def test_after_must_name_each_run_once_and_is_said_once(runs, alice):
    a, b = runs
    communicator = await comparing(path_of(a, b), alice)

    for wrong in (
        {"after": 0},
        {"after": {a.run.name: 0}},
        {"after": {a.run.name: 0, b.run.name: -1}},
        {"after": {a.run.name: 0, b.run.name: True}},
        {"after": {a.run.name: 0, b.run.name: 0, "run-99999": 0}},
    ):
        await communicator.send_json_to(wrong)
        assert await communicator.receive_json_from(timeout=TIMEOUT) == {
            "type": "error",
            "error": SEND_AFTER_RUNS,
        }
    await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})
    assert len(statuses(await messages(communicator, lambda got: len(got) == 2))) == 2
    await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})
    assert await communicator.receive_json_from(timeout=TIMEOUT) == {
        "type": "error",
        "error": STARTED_ALREADY,
    }
    await communicator.disconnect()


# ---- access: every run, or the socket closes ----------------------------------------------------


async def test_a_list_with_a_run_the_user_may_not_see_is_closed_with_4403_and_sends_nothing(
    runs, eve, layer, make_run
):
    a, b = runs
    await ingest(a, *steps(1, 3))
    for who in (eve, None):  # an outsider; anonymous
        communicator = await comparing(path_of(a, b), who)
        assert await communicator.receive_output(timeout=TIMEOUT) == {
            "type": "websocket.close",
            "code": NOT_YOURS,
        }
        await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()
    assert layer.groups == {}


@pytest.mark.parametrize(
    "listed",
    [
        "1,2",  # by number: the page names runs by their full names
        "{a},{a}",
        "{a},,{b}",
        "{a},run-x",
        ",".join(["{a}"] * (MOST_RUNS + 1)),
        ",".join(f"run-{n}" for n in range(1, 2000)),
    ],
    ids=["numbers", "twice", "empty", "junk", "21 names", "2,000 names"],
)
async def test_a_path_that_names_no_comparison_is_closed_with_4404(runs, alice, listed):
    a, b = runs
    path = "/ws/compare/" + listed.format(a=a.run.name, b=b.run.name) + "/"
    communicator = await comparing(path, alice)

    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": NOT_A_RUN,
    }
    await communicator.disconnect()


async def test_a_run_the_user_can_no_longer_see_closes_the_whole_socket_within_2_s(
    runs, alice, make_run
):
    a, b = runs
    browser = await logged_in(alice)
    communicator = await comparing(path_of(a, b), browser=browser)
    await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})
    await messages(communicator, lambda got: len(statuses(got)) == 2)

    def move_the_second():
        b.run.org = Org.objects.create(name="elsewhere")
        b.run.save(update_fields=["org"])

    await database_sync_to_async(move_the_second)()
    await ingest(a, *steps(1, 3))  # the first run, still hers, goes on: no matter

    closed, took = await closed_within(communicator, WITHIN)
    assert closed == NOT_YOURS, took
    await communicator.disconnect()


async def test_logging_out_closes_it_with_4401(runs, alice):
    a, b = runs
    browser = await logged_in(alice)
    communicator = await comparing(path_of(a, b), browser=browser)
    await communicator.send_json_to({"after": {a.run.name: 0, b.run.name: 0}})
    await messages(communicator, lambda got: len(statuses(got)) == 2)

    await database_sync_to_async(browser.post)("/logout/")

    closed, took = await closed_within(communicator, WITHIN)
    assert closed == LOGGED_OUT, took
    await communicator.disconnect()
