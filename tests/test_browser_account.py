"""The account page in a real browser: a token made, shown once, used at once, and revoked."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import json
import urllib.error
import urllib.request

from playwright.sync_api import expect

from tests.browser import (  # noqa: F401  (fixtures)
    alice,
    browser,
    chromium,
    log_in,
    orm_beside_playwright,
    server,
)


def api_status(server, token: str) -> int:
    request = urllib.request.Request(
        f"{server.url}/api/runs/", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            json.load(answer)
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_token_made_on_the_account_page_works_at_once_and_stops_when_revoked(
    browser, server, alice
):
    page = log_in(browser, server, alice)
    try:
        page.click("#account")
        expect(page.locator("h1")).to_have_text("API tokens")
        page.fill("input[name=name]", "laptop")
        page.click("button[name=create]")
        token = page.locator("#token-text").inner_text()
        assert token.startswith("div_")
        assert api_status(server, token) == 200

        page.goto(f"{server.url}/account/")  # shown once: a new look no longer has it
        expect(page.locator("#token-text")).to_have_count(0)
        expect(page.locator("#token-error")).to_have_count(0)
        expect(page.locator("#tokens tbody tr")).to_contain_text(["laptop"])

        page.click("button[name=revoke][value=laptop]")
        expect(page.locator("#tokens tbody")).to_contain_text("No tokens yet.")
        assert api_status(server, token) == 401
    finally:
        page.context.close()
