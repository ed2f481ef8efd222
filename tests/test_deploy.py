"""A server reached over HTTPS: `check --deploy` clean, and HSTS, the redirect and secure cookies
on, behind a reverse proxy that ends TLS too; the Content-Security-Policy on every page."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from divergent.settings import BadSetting, proxy_ssl_header
from telemetry import services
from tests.browser import serve, stop
from tests.conftest import ROOT

HTTPS = {
    "DIVERGENT_URL": "https://telemetry.example.com",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "telemetry.example.com,127.0.0.1",
    "DEBUG": "0",
}


def check_deploy(env: dict) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DIVERGENT_URL", "DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_deploy_is_clean_for_a_server_reached_over_https(tmp_path):
    done = check_deploy({**HTTPS, "DIVERGENT_HOME": str(tmp_path)})

    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == "System check identified no issues (0 silenced).\n"


def test_over_plain_http_the_checks_still_say_what_is_missing(tmp_path):
    done = check_deploy(
        {**HTTPS, "DIVERGENT_URL": "http://t.example.com", "DIVERGENT_HOME": str(tmp_path)}
    )

    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in done.stderr


@pytest.mark.parametrize(
    "value, setting",
    [
        ("X-Forwarded-Proto: https", ("HTTP_X_FORWARDED_PROTO", "https")),
        ("x-forwarded-ssl:on", ("HTTP_X_FORWARDED_SSL", "on")),
        ("", None),
    ],
)
def test_the_proxy_header_is_read_as_the_header_and_its_value(value, setting):
    assert proxy_ssl_header(value) == setting


@pytest.mark.parametrize("value", ["X-Forwarded-Proto", "X-Forwarded-Proto:", ": https"])
def test_a_proxy_header_without_its_value_says_how_to_write_it(value):
    with pytest.raises(BadSetting) as refused:
        proxy_ssl_header(value)

    assert str(refused.value) == (
        f"SECURE_PROXY_SSL_HEADER={value!r} is not a header and its value;"
        " set it like X-Forwarded-Proto: https"
    )


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(url: str, **headers) -> tuple[int, dict, list[str]]:
    """(status, headers, Set-Cookie lines) of a GET that follows no redirect."""
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers={"Host": "telemetry.example.com", **headers})
    try:
        response = opener.open(request, timeout=10)
    except urllib.error.HTTPError as answer:
        response = answer
    return response.status, dict(response.headers), response.headers.get_all("Set-Cookie") or []


def test_behind_a_tls_proxy_the_server_redirects_plain_http_and_sends_hsts_and_secure_cookies(
    div, tmp_path, settings
):
    settings.SECRET_KEY = HTTPS["SECRET_KEY"]  # the server's: it signs the login link
    user = services.user_create(username="alice", orgs=[services.DEFAULT_ORG])
    env = {**div.env, **HTTPS, "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"}
    served = serve(env, tmp_path / "serve.out")
    try:
        status, headers, _ = get(f"{served.url}/login/")
        assert (status, headers["Location"]) == (301, "https://telemetry.example.com/login/")

        status, headers, cookies = get(f"{served.url}/login/", **{"X-Forwarded-Proto": "https"})
        assert status == 200
        assert (
            headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
        )
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert [c.split("=")[0] for c in cookies] == ["csrftoken"]
        assert "; Secure" in cookies[0]

        link = services.login_link(user=user, base=served.url)
        status, _, cookies = get(link, **{"X-Forwarded-Proto": "https"})
        session = [c for c in cookies if c.startswith("sessionid=")]
        assert status == 302 and len(session) == 1 and "; Secure" in session[0]
    finally:
        stop(served.process)
    assert "Traceback" not in served.said()


def test_a_server_error_is_written_to_the_servers_log_with_its_traceback(tmp_path):
    # Django sends a 500's report to ADMINS by mail alone when DEBUG is off: the one who runs
    # the server would never see why a page failed.
    script = (
        "import django, logging; django.setup()\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n"
        "    logging.getLogger('django.request').exception('Internal Server Error: /runs/')\n"
        "logging.getLogger('django.request').warning('Not Found: /nothing/')\n"
    )
    env = {**os.environ, "DIVERGENT_HOME": str(tmp_path), "DEBUG": "0"}
    env["DJANGO_SETTINGS_MODULE"] = "divergent.settings"
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )

    assert "Internal Server Error: /runs/" in done.stderr
    assert "ZeroDivisionError: division by zero" in done.stderr
    assert "Not Found" not in done.stderr  # a 404 is the visitor's business, not the log's
