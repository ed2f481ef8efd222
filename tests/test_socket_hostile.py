"""What a hostile client sends a Telemetry socket: paths that name no run, and frames that are
not the protocol's. Each gets a close or a one-line answer; the server log gets one line at
most, never a traceback. In process, and against a real `div serve`."""

# The fixtures are imported by name; pytest hands them to the tests as arguments of the same
# name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import logging
import re
from urllib.parse import quote

import pytest
from channels.testing import WebsocketCommunicator

from divergent.asgi import application
from telemetry.consumers import BAD_MESSAGES, MAX_BAD_MESSAGES, NOT_A_RUN, SEND_AFTER
from tests.browser import serve, stop
from tests.sockets import (  # noqa: F401  (fixtures)
    TIMEOUT,
    layer,
    logged_in,
    tab,
    telemetry,
)
from tests.wsclient import Refused, WebSocket

pytest_plugins = ["tests.personas"]

pytestmark = pytest.mark.django_db(transaction=True)

# What a browser would send for each (percent-encoded); None: no run at all in the path.
HOSTILE = [
    "/ws/runs/1/",  # a run's number without its name
    "/ws/runs/run-\u0663/",  # run-٣: an Arabic-Indic digit three
    "/ws/runs/run-\u00b2/",  # a superscript two
    "/ws/runs/run-0/",
    "/ws/runs/run-007/",
    f"/ws/runs/run-{2**64}/",  # past 64 bits
    f"/ws/runs/run-{10**40}/",
    "/ws/runs/run--1/",
    "/ws/runs/run-1 /",
    "/ws/runs/run-1\n/",
    "/ws/runs/run-1/extra/",
    "/ws/runs/",
    "/ws/",
    "/",
    "/ws/runs/%ff/",
    # A comparison's path names no run as a run's does, with the same close and line.
    "/ws/compare/run-0/",
    "/ws/compare/run-1,run-0/",
    "/ws/compare/run-1,,run-1/",
    "/ws/compare/run-1,run-1/",  # a run twice: not as the page writes it
    f"/ws/compare/run-{2**64}/",
]


@pytest.mark.asyncio
@pytest.mark.parametrize("path", HOSTILE, ids=ascii)
async def test_a_path_that_names_no_run_is_closed_with_4404_and_one_line(
    path, alice, telemetry, caplog
):
    browser = await logged_in(alice)  # a member: what is refused is the path, not the user
    name = "sessionid"
    headers = [
        (b"origin", b"http://localhost"),
        (b"host", b"localhost"),
        (b"cookie", f"{name}={browser.cookies[name].value}".encode()),
    ]
    communicator = WebsocketCommunicator(application, quote(path, safe="/%"), headers=headers)
    with caplog.at_level(logging.INFO):
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        assert await communicator.receive_output(timeout=TIMEOUT) == {
            "type": "websocket.close",
            "code": NOT_A_RUN,
        }
        await communicator.send_json_to({"after": 0})
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()

    assert [(r.levelname, r.exc_info, r.getMessage().count("\n")) for r in caplog.records] == [
        ("WARNING", None, 0)
    ]
    assert "names no run: closed with 4404" in caplog.records[0].getMessage()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "frame",
    [
        {"bytes_data": b'{"after": 0}'},
        {"text_data": "not json"},
        {"text_data": "[" * 100_000 + "]" * 100_000},
        {"text_data": '{"after": 1e400}'},
        {"text_data": '"after"'},
        {"text_data": "null"},
    ],
    ids=["binary", "not JSON", "nested 100,000 deep", "a huge float", "a string", "null"],
)
async def test_a_frame_that_is_not_the_protocol_gets_a_one_line_answer(
    frame, alice, telemetry, caplog
):
    communicator = await tab(telemetry.run, alice)

    with caplog.at_level(logging.INFO):
        await communicator.send_to(**frame)
        answer = await communicator.receive_json_from(timeout=TIMEOUT)

    assert answer == {"type": "error", "error": SEND_AFTER}
    assert caplog.records == []
    await communicator.send_json_to({"after": 0})  # and the socket still works
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "status"
    await communicator.disconnect()


@pytest.mark.asyncio
async def test_a_socket_that_keeps_sending_something_else_is_closed(alice, telemetry):
    communicator = await tab(telemetry.run, alice)

    for _ in range(MAX_BAD_MESSAGES):
        await communicator.send_to(text_data="hello?")
        assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "error"
    await communicator.send_to(text_data="hello?")

    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": BAD_MESSAGES,
    }
    await communicator.disconnect()


def test_a_real_server_closes_hostile_paths_with_4404_and_logs_one_line_each(div, tmp_path):
    served = serve(div.env, tmp_path / "serve.out")
    try:
        said_before = served.said()
        outcomes = {}
        raw_paths = [quote(p, safe="/%").encode() for p in HOSTILE]
        raw_paths.append("/ws/runs/run-\u0663/".encode())  # as UTF-8 on the wire, unescaped
        for raw in raw_paths:
            try:
                socket = WebSocket.open(served.port, raw)
            except Refused as refused:
                outcomes[raw] = f"HTTP {refused.status}"
                continue
            socket.send_json({"after": 0})
            messages, code = socket.until_close(timeout=TIMEOUT)
            socket.close()
            outcomes[raw] = (messages, code)
    finally:
        stop(served.process)

    expected = {raw: ([], NOT_A_RUN) for raw in raw_paths}
    expected[raw_paths[-1]] = "HTTP 400"  # refused before the application: by the HTTP parser
    assert outcomes == expected
    log = served.said()[len(said_before) :].splitlines()
    # One line a path, in one form, and nothing else: no traceback, no error.
    assert len(log) == len(HOSTILE), log
    assert all(re.fullmatch(r"websocket '[ -~]*' names no run: closed with 4404", x) for x in log)
