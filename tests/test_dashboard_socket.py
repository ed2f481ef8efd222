"""The dashboard's websocket: the rows on screen kept live (status, points, duration) from a
status-only group, bounded by acknowledgements, and closed as a run's socket is when access
ends or was never there."""

# The fixtures are imported by name; pytest hands them to the tests as arguments of the same
# name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from divergent.asgi import application
from telemetry import services
from telemetry.access import LOGGED_OUT, NOT_YOURS
from telemetry.consumers import BAD_MESSAGES
from telemetry.dashboard import MAX_WATCH, SEND_ACK, SEND_WATCH
from telemetry.models import Membership, Org, Run
from tests.sockets import (  # noqa: F401  (fixtures)
    TIMEOUT,
    cookie_of,
    ingest,
    layer,
    logged_in,
    steps,
)
from tests.test_socket_access import closed_within

pytest_plugins = ["tests.personas"]

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

ROW_KEYS = {
    "name",
    "status",
    "points",
    "closed",
    "unread",
    "exit_code",
    "started",
    "ended",
    "duration",
}


async def dashboard(user=None) -> WebsocketCommunicator:
    """The dashboard's socket as the user's browser opens it; no user: logged out."""
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if user is not None:
        headers.append((b"cookie", cookie_of(await logged_in(user))))
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def rows(communicator, *, ack: bool = True) -> dict:
    """The next "runs" message, its rows by name (acknowledged unless told otherwise)."""
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "runs", message
    if ack:
        await communicator.send_json_to({"ack": message["ack"]})
    return message


def by_name(message: dict) -> dict[str, dict]:
    return {row["name"]: row for row in message["runs"]}


@pytest.fixture
def two(make_run):
    return make_run(), make_run()


async def test_a_watched_row_is_sent_as_it_is_then_each_change_without_any_point(alice, two):
    first, second = two
    await ingest(first, *steps(1, 3))
    socket = await dashboard(alice)

    await socket.send_json_to({"watch": [first.run.name, second.run.name]})
    told = by_name(await rows(socket))

    assert set(told) == {first.run.name, second.run.name}
    assert set(told[first.run.name]) == ROW_KEYS
    assert {k: told[first.run.name][k] for k in ("status", "points", "closed", "unread")} == {
        "status": "running",
        "points": 3,
        "closed": False,
        "unread": False,
    }
    assert told[second.run.name]["points"] == 0

    await ingest(first, *steps(4, 10))
    message = await socket.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "runs" and set(message["runs"][0]) == ROW_KEYS
    assert [(r["name"], r["points"]) for r in message["runs"]] == [(first.run.name, 10)]
    assert "loss" not in json.dumps(message)  # a row learns its count, never the points
    await socket.send_json_to({"ack": message["ack"]})

    await database_sync_to_async(first.finish)(1)
    ended = by_name(await rows(socket))[first.run.name]
    assert (ended["status"], ended["exit_code"], ended["closed"]) == ("failed", 1, True)
    await socket.disconnect()


async def test_a_page_that_does_not_acknowledge_is_sent_nothing_more_then_the_newest_state(
    alice, two
):
    first, _ = two
    socket = await dashboard(alice)
    await socket.send_json_to({"watch": [first.run.name]})
    unacked = await rows(socket, ack=False)

    for last in (5, 10, 15):
        await ingest(first, *steps(last - 4, last))
    assert await socket.receive_nothing(timeout=1.0)

    await socket.send_json_to({"ack": unacked["ack"]})
    caught_up = await rows(socket)
    assert [(r["name"], r["points"]) for r in caught_up["runs"]] == [(first.run.name, 15)]
    await socket.disconnect()


async def test_a_new_run_of_the_users_org_is_told_and_another_orgs_is_not(alice, eve, make_run):
    socket = await dashboard(alice)
    await socket.send_json_to({"watch": []})

    other = await database_sync_to_async(services.org_get_or_create)(name="other")
    await database_sync_to_async(services.run_create)(org=other, command=["python", "x.py"])
    made = await database_sync_to_async(make_run)()

    message = await rows(socket)
    assert (message["runs"], message["created"]) == ([], [made.run.name])
    assert await socket.receive_nothing(timeout=0.5)
    await socket.disconnect()


async def test_watching_another_orgs_run_closes_the_socket_with_4403(alice, eve, two):
    first, _ = two
    socket = await dashboard(eve)

    await socket.send_json_to({"watch": [first.run.name]})

    assert await socket.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": NOT_YOURS,
    }


async def test_a_run_that_does_not_exist_closes_it_the_same_way(alice):
    socket = await dashboard(alice)

    await socket.send_json_to({"watch": ["run-999999"]})

    assert (await socket.receive_output(timeout=TIMEOUT))["code"] == NOT_YOURS


async def test_logged_out_the_socket_closes_with_4401():
    socket = await dashboard(None)

    assert await socket.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": LOGGED_OUT,
    }


async def test_taken_out_of_the_org_of_a_watched_row_closes_the_socket_within_2_s(alice, two):
    first, _ = two
    socket = await dashboard(alice)
    await socket.send_json_to({"watch": [first.run.name]})
    await rows(socket)

    await database_sync_to_async(Membership.objects.filter(user=alice).delete)()

    code, _ = await closed_within(socket, 2.0 + 1.0)
    assert code == NOT_YOURS


async def test_the_run_given_to_another_org_closes_it_too(alice, two):
    first, _ = two
    socket = await dashboard(alice)
    await socket.send_json_to({"watch": [first.run.name]})
    await rows(socket)

    def move():
        other = Org.objects.create(name="elsewhere")
        Run.objects.filter(pk=first.run.pk).update(org=other)

    await database_sync_to_async(move)()

    code, _ = await closed_within(socket, 3.0)
    assert code == NOT_YOURS


@pytest.mark.parametrize(
    "message",
    [
        "not json",
        '{"watch": "run-1"}',
        '{"watch": ["run-01"]}',
        '{"watch": ["7"]}',
        '{"watch": [1]}',
        json.dumps({"watch": [f"run-{n}" for n in range(1, MAX_WATCH + 2)]}),
        '{"after": 0}',
    ],
)
async def test_a_message_it_cannot_read_gets_a_one_line_error(alice, message):
    socket = await dashboard(alice)

    await socket.send_to(text_data=message)

    assert await socket.receive_json_from(timeout=TIMEOUT) == {"type": "error", "error": SEND_WATCH}
    await socket.disconnect()


async def test_an_ack_of_nothing_sent_is_an_error_and_many_close_the_socket(alice):
    socket = await dashboard(alice)

    await socket.send_json_to({"ack": "guessed"})
    assert await socket.receive_json_from(timeout=TIMEOUT) == {"type": "error", "error": SEND_ACK}
    for _ in range(20):
        await socket.send_to(text_data="[]")

    while (message := await socket.receive_output(timeout=TIMEOUT))["type"] != "websocket.close":
        pass
    assert message["code"] == BAD_MESSAGES
