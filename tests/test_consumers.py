"""The Telemetry tab's websocket: the points after the tab's seq, then live ones, once each.

Through the application daphne serves (divergent.asgi), with a real session cookie: the
same origin check, session and auth middleware a browser goes through.
"""

# The fixtures are imported by name; pytest hands them to the tests as arguments of the same
# name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from telemetry import live
from telemetry.consumers import BACKLOG_BATCH, NOT_YOURS
from tests.sockets import (  # noqa: F401  (fixtures)
    TIMEOUT,
    ingest,
    layer,
    receive_acked,
    receive_points,
    receive_status,
    steps,
    tab,
    telemetry,
)

pytest_plugins = ["tests.personas"]

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_a_tab_gets_the_backlog_after_its_seq_then_live_points_then_the_end(telemetry, alice):
    await ingest(telemetry, *steps(1, 5))
    communicator = await tab(telemetry.run, alice)

    await communicator.send_json_to({"after": 2})

    assert await receive_acked(communicator) == {
        "type": "points",
        "points": [{"seq": s, "data": {"step": s, "loss": 1 / s}} for s in (3, 4, 5)],
    }
    assert await communicator.receive_json_from(timeout=TIMEOUT) == {
        "type": "status",
        "status": "running",
        "closed": False,
    }

    await ingest(telemetry, *steps(6, 8))

    assert await receive_acked(communicator) == {
        "type": "points",
        "points": [{"seq": s, "data": {"step": s, "loss": 1 / s}} for s in (6, 7, 8)],
    }

    await database_sync_to_async(telemetry.finish)(exit_code=0)

    statuses = await receive_status(communicator)
    assert statuses[-1] == {"type": "status", "status": "succeeded", "closed": True}
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_teammate_gets_the_same_points(telemetry, bob):
    await ingest(telemetry, *steps(1, 3))
    communicator = await tab(telemetry.run, bob)

    await communicator.send_json_to({"after": 0})

    assert await receive_points(communicator, 3) == [1, 2, 3]
    await communicator.disconnect()


async def test_a_tab_that_reconnects_from_its_seq_misses_nothing_and_gets_nothing_twice(
    telemetry, alice
):
    await ingest(telemetry, *steps(1, 4))
    first = await tab(telemetry.run, alice)
    await first.send_json_to({"after": 0})
    received = await receive_points(first, 4)
    await ingest(telemetry, *steps(5, 7))
    received += await receive_points(first, 7)
    await first.disconnect()

    await ingest(telemetry, *steps(8, 12))  # written while the tab is away
    second = await tab(telemetry.run, alice)
    await second.send_json_to({"after": received[-1]})
    received += await receive_points(second, 12)
    await ingest(telemetry, *steps(13, 15))
    received += await receive_points(second, 15)

    assert received == list(range(1, 16))
    assert await second.receive_nothing(timeout=0.1)
    await second.disconnect()


async def test_points_stored_before_the_tab_says_its_seq_come_once_in_the_backlog(telemetry, alice):
    communicator = await tab(telemetry.run, alice)
    await ingest(telemetry, *steps(1, 3))  # live, but the tab has not said where it is

    await communicator.send_json_to({"after": 1})

    assert await receive_points(communicator, 3) == [2, 3]
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_batch_too_large_for_one_message_still_reaches_the_tab_once(telemetry, alice):
    communicator = await tab(telemetry.run, alice)
    await communicator.send_json_to({"after": 0})
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"
    await ingest(telemetry, *steps(1, 3))
    assert await receive_points(communicator, 3) == [1, 2, 3]

    many = 2 * live.MAX_POINTS_PER_MESSAGE + 201
    await ingest(telemetry, *steps(4, 3 + many))

    assert await receive_points(communicator, 3 + many) == list(range(4, 4 + many))
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_backlog_longer_than_one_message_comes_whole(telemetry, alice):
    many = BACKLOG_BATCH + 300
    await ingest(telemetry, *steps(1, many))
    communicator = await tab(telemetry.run, alice)

    await communicator.send_json_to({"after": 0})

    assert await receive_points(communicator, many) == list(range(1, many + 1))
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"
    await communicator.disconnect()


async def test_a_tab_that_missed_a_message_gets_the_points_from_the_database(
    telemetry, alice, layer, monkeypatch
):
    await ingest(telemetry, *steps(1, 5))
    communicator = await tab(telemetry.run, alice)
    await communicator.send_json_to({"after": 0})
    assert await receive_points(communicator, 5) == [1, 2, 3, 4, 5]
    with monkeypatch.context() as lost:
        lost.setattr(live, "notify_points", lambda *args: None)
        await ingest(telemetry, *steps(6, 9))

    # The next message carries 8 and 9 only: 6 and 7 were in the one that went missing.
    await layer.group_send(
        live.group_for(telemetry.run.pk),
        live.points_message([(s, {"step": s, "loss": 1 / s}) for s in (8, 9)], 9),
    )

    assert await receive_points(communicator, 9) == [6, 7, 8, 9]
    await communicator.disconnect()


async def test_a_tab_that_says_something_else_is_told_what_to_send(telemetry, alice):
    communicator = await tab(telemetry.run, alice)

    for wrong in ({"after": -1}, {"after": "3"}, {"after": True}, [1], {}):
        await communicator.send_json_to(wrong)
        assert await communicator.receive_json_from(timeout=TIMEOUT) == {
            "type": "error",
            "error": 'send {"after": <the last seq you have>}',
        }
    await communicator.disconnect()


@pytest.mark.parametrize("who", ["an outsider", "anonymous"])
async def test_someone_outside_the_org_is_closed_with_4403(telemetry, who, eve):
    user = eve if who == "an outsider" else None
    await ingest(telemetry, *steps(1, 3))
    communicator = await tab(telemetry.run, user)

    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": NOT_YOURS,
    }
    assert NOT_YOURS == 4403
    await communicator.disconnect()


async def test_a_run_that_does_not_exist_is_closed_with_4403_too(telemetry, alice):
    communicator = await tab(f"run-{telemetry.run.pk + 1000}", alice)

    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": 4403,
    }
    await communicator.disconnect()


async def test_the_runs_group_is_empty_once_its_tabs_disconnect(telemetry, alice, bob, layer):
    group = live.group_for(telemetry.run.pk)
    tabs = [await tab(telemetry.run, alice), await tab(telemetry.run, bob)]
    for communicator in tabs:
        # Answered only once connect() has joined the group: messages are handled in turn.
        await communicator.send_json_to({"after": 0})
        assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"
    assert len(layer.groups[group]) == 2

    for communicator in tabs:
        await communicator.disconnect()

    assert layer.groups == {}


async def test_a_tab_that_says_a_seq_past_any_run_gets_no_points_and_stays_open(telemetry, alice):
    await ingest(telemetry, *steps(1, 3))
    communicator = await tab(telemetry.run, alice)

    await communicator.send_json_to({"after": 10**30})

    assert await communicator.receive_json_from(timeout=TIMEOUT) == {
        "type": "status",
        "status": "running",
        "closed": False,
    }
    await communicator.disconnect()
