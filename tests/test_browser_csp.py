"""The pages under their Content-Security-Policy, in a real browser: the Telemetry tab still
draws, live, and the browser reports no violation of the policy on any page."""

# The fixtures are imported by name (a non-root conftest may not register plugins), and pytest
# hands them to the tests as arguments of the same name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

from playwright.sync_api import expect

from telemetry import services
from tests.browser import (  # noqa: F401  (fixtures)
    STEPS,
    alice,
    browser,
    chromium,
    log_in,
    loss_at,
    orm_beside_playwright,
    plot,
    server,
    spec_run,
    trace,
)

# Runs before the page's scripts: every violation the browser reports, as the page sees it.
VIOLATIONS = """
window.violations = [];

document.addEventListener("securitypolicyviolation", (e) => window.violations.push(
  {directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample,
   source: e.sourceFile, line: e.lineNumber}));
"""


def watched(page):
    """The page's CSP violations, from its own listener and from its console."""
    console = []
    page.on("console", lambda m: console.append(m.text) if "Content Security" in m.text else None)
    return lambda: page.evaluate("window.violations") + console


def test_the_tab_draws_live_under_the_policy_and_the_browser_reports_no_violation(
    browser, server, spec_run, alice
):
    page = log_in(browser, server, alice)
    try:
        page.context.add_init_script(VIOLATIONS)
        violations = watched(page)
        response = page.goto(f"{server.url}/runs/{spec_run.name}/")

        policy = response.headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'" and "unsafe" not in policy
        expect(page.locator("#live-note")).to_have_text("Live")
        page.wait_for_function(
            "(n) => document.querySelector(\"section.panel[data-title='Loss'] .plot\")"
            ".data[0].x.length >= n",
            arg=len(STEPS),
        )
        spec_run.write({"step": 510, "loss": loss_at(510)})
        page.wait_for_function(
            "() => document.querySelector(\"section.panel[data-title='Loss'] .plot\")"
            ".data[0].x.includes(510)"
        )
        # Hovering draws Plotly's hover labels; the mode bar shows on the way in.
        box = page.locator("section.panel[data-title='Loss'] .plot .nsewdrag").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(
            page.locator("section.panel[data-title='Loss'] .hoverlayer text").first
        ).to_be_visible()
        modebar = page.locator("section.panel[data-title='Loss'] .modebar").first
        modebar.wait_for()
        # Plotly's own rules took: its mode bar sits in the panel's corner, not below the plot.
        assert modebar.evaluate("(m) => getComputedStyle(m).position") == "absolute"

        assert trace(page, "Loss", "loss")["x"] == [*STEPS, 510]
        assert plot(page, "Loss")["layout"]["yaxis"]["type"] == "log"
        for other in ("/", f"/runs/{spec_run.name}/"):
            page.goto(server.url + other)
            page.wait_for_load_state("networkidle")
        assert violations() == []
    finally:
        page.context.close()


def test_the_admin_pages_raise_no_violation(browser, server, spec_run):
    root = services.user_create(username="root", orgs=[services.DEFAULT_ORG], staff=True)
    page = log_in(browser, server, root)
    try:
        page.context.add_init_script(VIOLATIONS)
        violations = watched(page)
        org = spec_run.run.org_id
        for path in (
            "/admin/",
            "/admin/telemetry/run/",
            f"/admin/telemetry/run/{spec_run.run.pk}/change/",
            f"/admin/telemetry/org/{org}/change/",
            "/admin/telemetry/secret/add/",
        ):
            response = page.goto(server.url + path)
            assert response.status == 200, path
            page.wait_for_load_state("networkidle")
            assert "content-security-policy" in response.headers
        assert violations() == []
    finally:
        page.context.close()
