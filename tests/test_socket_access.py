"""Who may keep a Telemetry socket open: closed for good when refused, and closed within 2 s
once access ends, whoever ends it and from whichever process."""

# The fixtures are imported by name; pytest hands them to the tests as arguments of the same
# name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.contrib.sessions.models import Session
from django.utils import timezone

from telemetry import access
from telemetry.consumers import LOGGED_OUT, NOT_YOURS
from telemetry.models import Membership, Org
from tests.conftest import ROOT
from tests.sockets import (  # noqa: F401  (fixtures)
    TIMEOUT,
    ingest,
    layer,
    logged_in,
    receive_points,
    steps,
    tab,
    telemetry,
)
from tests.test_scale_out import redis_answers, redis_layer  # noqa: F401  (a fixture)

pytest_plugins = ["tests.personas"]

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

WITHIN = 2.0  # seconds from access ending to the socket closed


async def watching(telemetry, user, **tab_options):
    """A tab of the run that has said where it is and has the points so far."""
    communicator = await tab(telemetry.run, user, **tab_options)
    await communicator.send_json_to({"after": 0})
    while (await communicator.receive_json_from(timeout=TIMEOUT))["type"] != "status":
        pass
    return communicator


async def closed_within(communicator, seconds: float) -> tuple[int, float]:
    """Waits for the close, passing over points that come first: (its code, seconds taken)."""
    started = time.monotonic()
    while True:
        left = seconds - (time.monotonic() - started)
        assert left > 0, f"the socket was still open after {seconds} s"
        try:
            message = await communicator.receive_output(timeout=left)
        except TimeoutError:
            raise AssertionError(f"the socket was still open after {seconds} s") from None
        if message["type"] == "websocket.close":
            return message["code"], time.monotonic() - started


# ---- refused: closed, and nothing after -----------------------------------------------------


@pytest.mark.parametrize("who", ["an outsider", "anonymous"])
async def test_a_socket_closed_with_4403_sends_nothing_after_and_joins_no_group(
    telemetry, who, eve, layer
):
    await ingest(telemetry, *steps(1, 3))
    communicator = await tab(telemetry.run, eve if who == "an outsider" else None)
    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": NOT_YOURS,
    }

    await communicator.send_json_to({"after": 0})  # asks for acme's points all the same
    await ingest(telemetry, *steps(4, 6))  # and acme's run goes on

    assert await communicator.receive_nothing(timeout=0.5)
    assert layer.groups == {}
    assert layer.channels == {}  # no consumer is left listening for it either
    await communicator.disconnect()


# ---- access ending while the socket is open -------------------------------------------------


async def log_out(browser, **_):
    await database_sync_to_async(browser.post)("/logout/")


async def expire_session(browser, **_):
    key = browser.session.session_key
    past = timezone.now() - timedelta(seconds=1)
    await database_sync_to_async(Session.objects.filter(session_key=key).update)(expire_date=past)


async def deactivate(user, **_):
    user.is_active = False
    await database_sync_to_async(user.save)()


async def new_password(user, **_):
    user.set_password("a new password, set by an admin")
    await database_sync_to_async(user.save)()


async def leave_org(user, **_):
    await database_sync_to_async(Membership.objects.filter(user=user).delete)()


async def move_run(run, **_):
    def move():
        run.org = Org.objects.create(name="elsewhere")
        run.save(update_fields=["org"])

    await database_sync_to_async(move)()


@pytest.mark.parametrize(
    "end, code",
    [
        (log_out, LOGGED_OUT),
        (expire_session, LOGGED_OUT),
        (deactivate, LOGGED_OUT),
        (new_password, LOGGED_OUT),
        (leave_org, NOT_YOURS),
        (move_run, NOT_YOURS),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
async def test_a_socket_is_closed_within_2_s_of_its_access_ending(telemetry, alice, end, code):
    browser = await logged_in(alice)
    communicator = await watching(telemetry, None, browser=browser)

    await end(browser=browser, user=alice, run=telemetry.run)
    await ingest(telemetry, *steps(1, 3))  # the run goes on: these may still arrive, no more

    closed, took = await closed_within(communicator, WITHIN)
    assert closed == code, took
    await communicator.disconnect()


async def test_an_open_socket_whose_access_holds_stays_open_across_rechecks(telemetry, alice, bob):
    communicator = await watching(telemetry, alice)
    await watching(telemetry, bob)  # and bob's too: one check for both
    bob_out = await logged_in(bob)
    await database_sync_to_async(bob_out.post)("/logout/")  # another session of bob's ends

    deadline = time.monotonic() + 2.5 * access.RECHECK_SECONDS
    while time.monotonic() < deadline:
        await ingest(telemetry, *steps(1, 1))
        assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "points"

    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_being_removed_from_the_org_by_another_process_closes_the_socket_over_redis(
    div, redis_layer, alice, telemetry
):
    """The membership deleted by a `div` command in a process of its own, the channel layer a
    real Redis, as with several `div serve` workers."""
    if not redis_answers():
        pytest.skip("no Redis")
    communicator = await watching(telemetry, alice)

    code = (
        "from telemetry.models import Membership;"
        "Membership.objects.filter(user__username='alice').delete()"
    )
    removed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "divergent", "shell", "-c", code],
        env={**div.env, "REDIS_URL": redis_layer},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert removed.returncode == 0, removed.stderr

    closed, took = await closed_within(communicator, WITHIN)
    assert closed == NOT_YOURS, took
    await communicator.disconnect()
