"""What the websocket tests share: the Telemetry tab's socket opened through the application
daphne serves (divergent.asgi) with a real session cookie, and points ingested the real way.

Test modules import the fixtures by name (`layer` is autouse: importing it empties the
in-memory channel layer around each of their tests).
"""

from __future__ import annotations

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections
from django.test import Client

from divergent.asgi import application

TIMEOUT = 5  # seconds to wait for a message that should come


@pytest_asyncio.fixture(autouse=True)
async def layer():
    """The in-memory channel layer, emptied: it outlives each test's event loop."""
    layer = get_channel_layer()
    await layer.flush()
    yield layer
    await layer.flush()
    # The consumers' queries ran in asgiref's thread, whose connection would otherwise stay
    # open (CONN_MAX_AGE) and keep PostgreSQL from dropping the test database.
    await database_sync_to_async(connections.close_all)()


@pytest.fixture
def telemetry(make_run):
    return make_run()


async def logged_in(user) -> Client:
    """A browser (Django's test client) with the user's session."""
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    return client


def cookie_of(client: Client) -> bytes:
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


async def tab(run, user=None, *, browser: Client | None = None) -> WebsocketCommunicator:
    """A connected websocket for the run (or a run name), as the user's browser opens it (or
    as this browser, logged in, opens it); no user: logged out."""
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if user is not None or browser is not None:
        headers.append((b"cookie", cookie_of(browser or await logged_in(user))))
    name = run if isinstance(run, str) else run.name
    communicator = WebsocketCommunicator(application, f"/ws/runs/{name}/", headers=headers)
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def ingest(telemetry, *lines) -> None:
    def write_and_ingest():
        telemetry.write(*lines)
        telemetry.ingest()

    await database_sync_to_async(write_and_ingest)()


def steps(first: int, last: int) -> list[dict]:
    return [{"step": i, "loss": 1 / i} for i in range(first, last + 1)]


async def receive_acked(communicator) -> dict:
    """The next message, a points message: without its ack token, which it must carry."""
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert isinstance(message.pop("ack"), str), message
    return message


async def receive_points(communicator, upto: int) -> list[int]:
    """The seqs of every point message up to one carrying seq `upto`, in the order sent."""
    seqs: list[int] = []
    while not seqs or seqs[-1] < upto:
        message = await communicator.receive_json_from(timeout=TIMEOUT)
        if message["type"] == "points":
            seqs += [p["seq"] for p in message["points"]]
    return seqs


async def receive_status(communicator) -> list[dict]:
    """Status messages up to the one that says the telemetry is closed."""
    seen: list[dict] = []
    while not seen or not seen[-1]["closed"]:
        message = await communicator.receive_json_from(timeout=TIMEOUT)
        assert message["type"] == "status", message
        seen.append(message)
    return seen
