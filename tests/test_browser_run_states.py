"""Lost and unread runs as a person sees them: Debian's Chromium on `div serve`."""

# The fixtures are imported by name, and pytest hands them to the tests as arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from telemetry import services
from telemetry.models import Run
from tests.browser import (  # noqa: F401  (fixtures)
    alice,
    browser,
    chromium,
    log_in,
    orm_beside_playwright,
    screenshot,
    server,
)
from tests.conftest import wait_for

LOST = (
    "This run was lost: its supervisor went without recording how the command ended "
    "(killed, or its machine restarted)."
)


def remote_run(seconds_silent: float) -> Run:
    """A run supervised on another machine, last heard from that many seconds ago."""
    run = services.run_create(org=services.org_get_or_create(), command=["python", "train.py"])
    services.run_start(run=run)
    services.run_heartbeat(run_id=run.pk, host="gpu-7", pid=4242)
    Run.objects.filter(pk=run.pk).update(
        heartbeat=timezone.now() - timedelta(seconds=seconds_silent)
    )
    return run


def background(page, selector: str) -> str:
    return page.eval_on_selector(selector, "e => getComputedStyle(e).backgroundColor")


def test_a_run_that_goes_silent_turns_lost_on_its_open_page_with_a_badge_of_its_own(
    browser, server, alice
):
    running = remote_run(seconds_silent=0)
    page = log_in(browser, server, alice)
    try:
        page.goto(f"{server.url}/runs/{running.name}/")
        expect(page.locator("#status")).to_have_text("running")
        running_color = background(page, "#status")
        expect(page.locator("#live-note")).to_have_text("Live")

        Run.objects.filter(pk=running.pk).update(heartbeat=timezone.now() - timedelta(seconds=31))

        expect(page.locator("#status")).to_have_text("lost")
        expect(page.locator("#status")).to_have_class("status status-lost")
        expect(page.locator("#ended-banner")).to_have_text(LOST)
        assert background(page, "#status") != running_color
        screenshot(page, "lost-run.png")
    finally:
        page.context.close()
    assert wait_for(lambda: Run.objects.get(pk=running.pk).telemetry_closed, what="closed")


def test_the_dashboard_shows_lost_and_unread_runs_for_what_they_are(browser, server, alice):
    lost = remote_run(seconds_silent=60)
    wait_for(lambda: Run.objects.get(pk=lost.pk).status == "lost", what="the server to see it")
    # Ended with its telemetry unread: an ingester elsewhere holds it and has not read it yet.
    unread = services.run_create(org=services.org_get_or_create(), command=["python", "x.py"])
    Run.objects.filter(pk=unread.pk).update(
        lease_owner="elsewhere:1:ab", lease_until=timezone.now() + timedelta(hours=1)
    )
    unread.telemetry_path.write_text(json.dumps({"step": 1}) + "\n")
    # Ended as run_finish ends it (its message to the tabs is the server's to send, not ours).
    Run.objects.filter(pk=unread.pk).update(status="succeeded", exit_code=0, ended=timezone.now())

    page = log_in(browser, server, alice)
    try:
        page.goto(f"{server.url}/")
        lost_row = page.locator(f"tr[data-run='{lost.name}']")
        expect(lost_row.locator(".status")).to_have_text("lost")
        expect(lost_row.locator(".status")).to_have_class("status status-lost")
        unread_row = page.locator(f"tr[data-run='{unread.name}']")
        expect(unread_row.locator(".status")).to_have_text("succeeded")
        expect(unread_row.locator("td.num")).to_have_text("0unread")
        expect(unread_row.locator(".unread")).to_have_attribute(
            "title", "Its telemetry is not all read yet: div serve or div ingest reads it."
        )
        screenshot(page, "dashboard-lost-unread.png")

        page.goto(f"{server.url}/runs/{unread.name}/")
        expect(page.locator("#unread-banner")).to_be_visible()
        expect(page.locator("#unread-banner")).to_have_text(
            "Its telemetry is not all read yet: no ingester was running when it ended. "
            "div serve or div ingest reads it, and the points appear here."
        )
    finally:
        page.context.close()
