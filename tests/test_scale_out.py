"""Past one machine: an ingester in another process reaches the tabs through a real Redis."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from urllib.parse import urlparse

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from telemetry import services
from tests.conftest import ROOT

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_answers() -> bool:
    address = urlparse(REDIS_URL)
    try:
        socket.create_connection((address.hostname, address.port or 6379), timeout=1).close()
    except OSError:
        return False
    return True


# CI has Redis: there a missing one is a failure, not a skip.
pytestmark = pytest.mark.skipif(
    not redis_answers() and not os.environ.get("CI"), reason=f"no Redis at {REDIS_URL}"
)


@pytest.fixture
def redis_layer(settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    return REDIS_URL


@pytest.mark.asyncio
async def test_points_ingested_by_another_process_reach_an_open_tab(div, redis_layer):
    from divergent.asgi import application

    user = await database_sync_to_async(services.user_create)(username="alice", orgs=["acme"])
    org = await database_sync_to_async(services.org_get_or_create)(name="acme")
    run = await database_sync_to_async(services.run_create)(org=org, command=["train"])
    tab = WebsocketCommunicator(application, f"/ws/runs/run-{run.pk}/")
    tab.scope["user"] = user
    tab.scope["headers"] = [(b"host", b"localhost"), (b"origin", b"http://localhost")]
    connected, _ = await tab.connect()
    assert connected
    await tab.send_json_to({"after": 0})
    assert (await tab.receive_json_from(timeout=5))["type"] == "status"

    with open(run.telemetry_path, "a") as f:
        for step in range(1, 4):
            f.write(json.dumps({"step": step, "loss": 1 / step}) + "\n")
    ingester = subprocess.run(
        [sys.executable, "-m", "divergent", "ingest", "--once"],
        env={**div.env, "REDIS_URL": redis_layer},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ingester.returncode == 0, ingester.stderr

    message = await tab.receive_json_from(timeout=10)
    assert isinstance(message.pop("ack"), str), message  # the token the tab sends back
    assert message == {
        "type": "points",
        "points": [
            {"seq": 1, "data": {"step": 1, "loss": 1.0}},
            {"seq": 2, "data": {"step": 2, "loss": 0.5}},
            {"seq": 3, "data": {"step": 3, "loss": 1 / 3}},
        ],
    }
    await tab.disconnect()
