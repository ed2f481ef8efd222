"""API tokens: made on the server (`div token create --user`), on the account page, or by a
client for its own user; listed and revoked everywhere; never shown again, never stored."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from telemetry import services
from telemetry.models import Token

pytest_plugins = ["tests.personas"]


def test_div_token_on_the_server_makes_lists_and_revokes_a_users_tokens(div):
    services.user_create(username="alice", orgs=["acme"])

    made = div("token", "create", "--user", "alice", "--name", "laptop")
    again = div("token", "create", "--user", "alice", "--name", "laptop")
    other = div("token", "create", "--user", "alice")

    assert made.returncode == 0 and re.fullmatch(r"div_[A-Za-z0-9_-]{43}\n", made.stdout)
    assert (again.returncode, again.stderr) == (
        1,
        'div: alice already has a token "laptop"; give another --name, or revoke that one first\n',
    )
    listed = div("token", "list").stdout.splitlines()
    assert listed[0].split() == ["name", "user", "created", "last", "used"]
    assert [line.split()[:2] for line in listed[1:]] == [["laptop", "alice"], ["token-1", "alice"]]
    assert all(line.endswith("never") for line in listed[1:])
    assert made.stdout.strip() not in div("token", "list").stdout
    assert other.stdout.strip() != made.stdout.strip()

    assert div("token", "revoke", "laptop", "--user", "alice").returncode == 0
    gone = div("token", "revoke", "laptop", "--user", "alice")
    assert gone.stderr == 'div: alice has no token "laptop"; div token list shows them\n'
    nobody = div("token", "create", "--user", "zed")
    assert nobody.stderr == 'div: there is no user "zed"; div user add zed makes one\n'
    no_user = div("token", "create")
    assert no_user.stderr == "div: name whose token it is with --user, like --user alice\n"
    assert list(Token.objects.values_list("name", flat=True)) == ["token-1"]


@pytest.fixture
def page(alice) -> Client:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    return browser


def csrf(browser: Client) -> str:
    page = browser.get("/account/").content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]


def test_the_account_page_shows_a_new_token_once_and_it_works_at_once(page, shown):
    made = page.post("/account/", {"name": "laptop", "csrfmiddlewaretoken": csrf(page)})

    text = re.search(r'<code id="token-text">([^<]+)</code>', made.content.decode())[1]
    assert made["Cache-Control"].startswith("max-age=0")  # never kept by a cache
    assert Client(HTTP_AUTHORIZATION=f"Bearer {text}").get("/api/runs/").status_code == 200
    shown_again = page.get("/account/").content.decode()
    assert text not in shown_again and "laptop" in shown_again and "never" not in shown_again

    page.post("/account/", {"revoke": "laptop", "csrfmiddlewaretoken": csrf(page)})
    assert Client(HTTP_AUTHORIZATION=f"Bearer {text}").get("/api/runs/").status_code == 401
    assert "No tokens yet." in page.get("/account/").content.decode()


def test_the_account_page_takes_no_post_without_its_csrf_token_and_no_one_logged_out(page, alice):
    assert page.post("/account/", {"name": "laptop"}).status_code == 403
    assert Client().get("/account/").status_code == 302
    assert not Token.objects.exists()


def test_the_account_page_revokes_only_the_users_own_tokens(page, alice, bob):
    services.token_create(user=bob, name="laptop")

    said = page.post("/account/", {"revoke": "laptop", "csrfmiddlewaretoken": csrf(page)})

    assert "alice has no token &quot;laptop&quot;" in said.content.decode()
    assert Token.objects.get().user == bob


def test_the_admin_lists_and_revokes_tokens_and_never_shows_or_answers_a_digest(alice, client):
    token, text = services.token_create(user=alice, name="laptop")
    root = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(root)

    listed = client.get("/admin/telemetry/token/").content.decode()
    shown = client.get(f"/admin/telemetry/token/{token.pk}/change/").content.decode()
    asked = client.get(f"/admin/telemetry/token/?digest={token.digest}")

    assert "laptop" in listed and "alice" in listed
    assert token.digest not in listed + shown and text not in listed + shown
    assert asked.status_code == 400  # no query string asks anything of a digest
    assert client.get("/admin/telemetry/token/add/").status_code == 403
    client.post(f"/admin/telemetry/token/{token.pk}/delete/", {"post": "yes"})
    assert not Token.objects.exists()
