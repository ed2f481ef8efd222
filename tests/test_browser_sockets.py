"""The Telemetry tab's websocket in a real browser: it resumes from the REST API when the server
says it fell too far behind, and stops following once its user has logged out."""

# The fixtures are imported by name (a non-root conftest may not register plugins), and pytest
# hands them to the tests as arguments of the same name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

from playwright.sync_api import expect

from telemetry.flow import MAX_BEHIND
from tests.browser import (  # noqa: F401  (fixtures)
    STEPS,
    alice,
    browser,
    chromium,
    log_in,
    loss_at,
    orm_beside_playwright,
    server,
    spec_run,
    trace,
)

# Runs before the page's scripts: notes the code of every websocket close, and drops the tab's
# acknowledgements while window.holdAcks is set, as a tab too busy to keep up would send none.
CLOSES = """
window.closes = [];
window.holdAcks = false;
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener("close", (event) => window.closes.push(event.code));
  }
  send(data) {
    if (window.holdAcks && data.startsWith('{"ack"')) return;
    super.send(data);
  }
};
"""

LOSS = """() => {
    const panel = TelemetryTab.panels().find((p) => p.spec.title === "Loss");
    const s = panel.traces.loss;
    return {total: s.total, drawn: s.drawn, x: Array.from(s.x)};
}"""


def open_tab(browser, server, user, run):
    page = log_in(browser, server, user)
    page.context.add_init_script(CLOSES)
    page.goto(f"{server.url}/runs/{run.name}/")
    expect(page.locator("#live-note")).to_have_text("Live")
    page.wait_for_function(
        "(n) => { const p = TelemetryTab.panels();"
        " return p.length === 3 && p[0].traces.loss && p[0].traces.loss.total >= n; }",
        arg=len(STEPS),
    )
    return page


def test_a_tab_too_far_behind_resumes_from_the_api_with_no_gap_and_no_duplicate(
    browser, server, spec_run, alice
):
    page = open_tab(browser, server, alice, spec_run.run)
    try:
        # The tab stops acknowledging what it draws while the run writes more than a socket
        # sends a tab that is behind.
        page.evaluate("() => { window.holdAcks = true; }")
        behind = [{"step": s, "loss": loss_at(s)} for s in range(1000, 1000 + MAX_BEHIND + 500)]
        spec_run.write(*behind)

        page.wait_for_function("() => window.closes.includes(4413)", timeout=20_000)
        page.evaluate("() => { window.holdAcks = false; }")
        expect(page.locator("#live-note")).to_have_text("Live", timeout=20_000)
        tail = [{"step": s, "loss": loss_at(s)} for s in range(9000, 9005)]
        spec_run.write(*tail)
        page.wait_for_function(
            "(n) => TelemetryTab.panels()[0].traces.loss.x.at(-1) === n", arg=tail[-1]["step"]
        )

        loss = page.evaluate(LOSS)
        steps = [line["step"] for line in spec_run.written if "step" in line and "loss" in line]
        assert loss["total"] == len(steps)  # every point counted once: none missed, none twice
        assert loss["x"][-len(tail) :] == [line["step"] for line in tail]  # followed on live
        xs = [x for x in loss["x"] if x is not None]  # None: where the line breaks
        assert all(a < b for a, b in zip(xs, xs[1:], strict=False))  # in order, none twice
        assert loss["drawn"] < loss["total"]  # read downsampled from the API, not point by point
        assert page.evaluate("window.closes") == [4413]
        assert trace(page, "Loss", "loss")["x"] == loss["x"]
    finally:
        page.context.close()


def test_a_tab_stops_following_once_its_user_logs_out_elsewhere(browser, server, spec_run, alice):
    page = open_tab(browser, server, alice, spec_run.run)
    try:
        other = page.context.new_page()  # another tab of the same browser
        other.goto(server.url)
        other.get_by_role("button", name="Log out").click()
        other.wait_for_url("**/logout/")

        expect(page.locator("#live-note")).to_have_text(
            "You are logged out: log in again to follow this run.", timeout=3000
        )
        assert page.evaluate("window.closes") == [4401]
        spec_run.write({"step": 9990, "loss": 0.5})
        page.wait_for_timeout(1000)  # long enough for a live point to have come
        assert 9990 not in trace(page, "Loss", "loss")["x"]
    finally:
        page.context.close()
