"""Two `div serve` workers on one database and a real Redis: what is done on one reaches the
sockets open on the other."""

from __future__ import annotations

import time
import urllib.request
from http.cookies import SimpleCookie

import pytest
from django.conf import settings
from django.test import Client

from telemetry import services
from telemetry.access import LOGGED_OUT
from tests.browser import serve, stop
from tests.test_scale_out import REDIS_URL, redis_answers
from tests.wsclient import WebSocket

pytestmark = pytest.mark.skipif(not redis_answers(), reason=f"no Redis at {REDIS_URL}")


def log_out(url: str, session: str) -> int:
    """What the page's Log out button does: read the CSRF cookie from a page, then POST."""
    cookie = f"{settings.SESSION_COOKIE_NAME}={session}"
    page = urllib.request.urlopen(urllib.request.Request(url + "/", headers={"Cookie": cookie}))
    csrf = SimpleCookie(page.headers["Set-Cookie"])[settings.CSRF_COOKIE_NAME].value
    request = urllib.request.Request(
        url + "/logout/",
        method="POST",
        headers={
            "Cookie": f"{cookie}; {settings.CSRF_COOKIE_NAME}={csrf}",
            "X-CSRFToken": csrf,
            "Origin": url,
        },
    )
    return urllib.request.urlopen(request).status


def test_logging_out_on_one_worker_closes_the_socket_open_on_another_within_2_s(div, tmp_path):
    alice = services.user_create(username="alice", orgs=[services.DEFAULT_ORG])
    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    browser = Client()
    browser.force_login(alice)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    env = {**div.env, "REDIS_URL": REDIS_URL}
    one = serve(env, tmp_path / "one.out")
    try:
        other = serve(env, tmp_path / "other.out")
        try:
            socket = WebSocket.open(
                one.port, f"/ws/runs/{run.name}/", cookie=f"sessionid={session}"
            )
            socket.send_json({"after": 0})
            assert b'"status"' in socket.receive()[1]

            assert log_out(other.url, session) == 200
            logged_out = time.monotonic()
            messages, code = socket.until_close(timeout=5)
            took = time.monotonic() - logged_out
            socket.close()
        finally:
            stop(other.process)
    finally:
        stop(one.process)

    assert (code, messages) == (LOGGED_OUT, [])
    assert took < 2.0
    assert "Traceback" not in one.said() + other.said()
