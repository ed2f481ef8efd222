"""A Telemetry socket holds what its tab has not acknowledged under a window of bytes: a client
that never reads costs the server a bounded amount, one that acknowledges gets every point
once, and one that falls too far behind is told to read the rest from the REST API."""

# The fixtures are imported by name; pytest hands them to the tests as arguments of the same
# name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from telemetry.consumers import BEHIND, STARTED_ALREADY
from telemetry.flow import MAX_BEHIND, PAGE_BYTES, WINDOW_BYTES
from tests.sockets import (  # noqa: F401  (fixtures)
    TIMEOUT,
    ingest,
    layer,
    steps,
    tab,
    telemetry,
)

pytest_plugins = ["tests.personas"]

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

# The most a socket has in flight: its window, and the one message that crossed it.
IN_FLIGHT_MAX = WINDOW_BYTES + PAGE_BYTES


def wide(first: int, last: int) -> list[dict]:
    """Lines of 64 numbers, the most a line may carry: about 1.6 KB a point."""
    return [{f"key_{k:02d}": i + k / 7 for k in range(64)} for i in range(first, last + 1)]


async def frames(communicator, *, until_bytes: int | None = None, count: int | None = None):
    """What the socket sends, as (length, message): until a window's worth of points (or that
    many frames, or a close) has come, then checks that nothing follows."""
    got: list[tuple[int, dict]] = []
    while True:
        output = await communicator.receive_output(timeout=TIMEOUT)
        if output["type"] == "websocket.close":
            got.append((0, {"type": "close", "code": output["code"]}))
            break
        got.append((len(output["text"]), json.loads(output["text"])))
        if count is not None and len(got) == count:
            break
        if until_bytes is not None and sum(n for n, _ in got) >= until_bytes:
            break
    assert await communicator.receive_nothing(timeout=0.3), "more came"
    return got


def seqs(frames) -> list[int]:
    return [p["seq"] for _, m in frames if m["type"] == "points" for p in m["points"]]


async def test_a_client_that_never_acknowledges_is_sent_no_more_than_the_window(telemetry, alice):
    many = 2000  # about 3.2 MB
    await ingest(telemetry, *wide(1, many))
    communicator = await tab(telemetry.run, alice)

    await communicator.send_json_to({"after": 0})
    sent = await frames(communicator, until_bytes=WINDOW_BYTES)

    points = [length for length, m in sent if m["type"] == "points"]
    assert sum(points) <= IN_FLIGHT_MAX
    assert max(points) <= PAGE_BYTES
    assert seqs(sent) == list(range(1, len(seqs(sent)) + 1))
    assert len(seqs(sent)) < many
    await communicator.disconnect()


async def test_a_repeated_after_is_refused_and_sends_nothing_again(telemetry, alice):
    await ingest(telemetry, *wide(1, 2000))
    communicator = await tab(telemetry.run, alice)
    await communicator.send_json_to({"after": 0})
    first = await frames(communicator, until_bytes=WINDOW_BYTES)

    for _ in range(19):
        await communicator.send_json_to({"after": 0})
    again = await frames(communicator, count=19)

    assert [m for _, m in again] == [{"type": "error", "error": STARTED_ALREADY}] * 19
    assert sum(length for length, _ in first + again) <= IN_FLIGHT_MAX + 19 * 100
    await communicator.disconnect()


async def test_a_tab_that_acknowledges_gets_every_point_once_in_order_then_the_end(
    telemetry, alice
):
    many = 3000  # about 5 MB: several windows
    await ingest(telemetry, *wide(1, many))
    await database_sync_to_async(telemetry.finish)(exit_code=0)
    communicator = await tab(telemetry.run, alice)
    await communicator.send_json_to({"after": 0})

    got: list[int] = []
    unacknowledged = 0
    held_back = 0
    while True:
        text = (await communicator.receive_output(timeout=TIMEOUT))["text"]
        message = json.loads(text)
        if message["type"] != "points":
            break
        got += [p["seq"] for p in message["points"]]
        size = len(text)
        assert size <= PAGE_BYTES
        unacknowledged += size
        if unacknowledged >= WINDOW_BYTES and got[-1] < many:
            # A window's worth: nothing more until the tab says it has drawn it.
            assert await communicator.receive_nothing(timeout=0.3)
            held_back += 1
            await communicator.send_json_to({"ack": message["ack"]})
            unacknowledged = 0

    assert held_back >= 3
    assert got == list(range(1, many + 1))
    assert message == {"type": "status", "status": "succeeded", "closed": True}
    await communicator.disconnect()


async def test_a_tab_further_behind_than_max_behind_is_closed_with_4413_at_once(telemetry, alice):
    await ingest(telemetry, *steps(1, MAX_BEHIND + 1))
    communicator = await tab(telemetry.run, alice)

    await communicator.send_json_to({"after": 0})

    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": BEHIND,
    }
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_a_tab_that_stops_acknowledging_is_closed_when_the_run_gets_too_far_ahead(
    telemetry, alice
):
    communicator = await tab(telemetry.run, alice)
    await communicator.send_json_to({"after": 0})
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"

    await ingest(telemetry, *wide(1, 1000))  # past the window: held back
    before = await frames(communicator, until_bytes=WINDOW_BYTES)
    await ingest(telemetry, *wide(1001, MAX_BEHIND + 1))
    after = await frames(communicator)

    assert sum(length for length, _ in before + after) <= IN_FLIGHT_MAX
    assert after[-1] == (0, {"type": "close", "code": BEHIND})
    await communicator.disconnect()


async def test_a_live_point_goes_straight_to_a_tab_that_keeps_up(telemetry, alice):
    communicator = await tab(telemetry.run, alice)
    await communicator.send_json_to({"after": 0})
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"

    batch = 100  # about 160 KB: one message
    for first in range(1, 4 * WINDOW_BYTES // 1600, batch):  # four windows' worth
        await ingest(telemetry, *wide(first, first + batch - 1))
        message = await communicator.receive_json_from(timeout=TIMEOUT)
        assert [p["seq"] for p in message["points"]] == list(range(first, first + batch))
        await communicator.send_json_to({"ack": message["ack"]})

    await communicator.disconnect()
