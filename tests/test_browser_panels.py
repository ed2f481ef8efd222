"""A panel says what is true of its keys, in a real browser: a key with points but none in
view, and values a log scale cannot show. tests/browser.py has the fixtures."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser import (  # noqa: F401  (fixtures)
    alice,
    browser,
    chromium,
    launch,
    log_in,
    orm_beside_playwright,
    plot,
    server,
    trace,
)

TWO_KEYS = '[[panel]]\ntitle = "Loss"\ny = ["loss", "gnorm"]\n'
LOG_PANEL = '[[panel]]\ntitle = "Loss"\ny = "loss"\nscale = "log"\n'
LOG_LOSSES = [1.0, 0.5, 0, -0.25, 0.125, 0.0625]


@pytest.fixture
def gnorm_early(div, server, tmp_path):
    """loss at every step to 100; gnorm only up to step 40."""
    lines = [
        {"step": s, "loss": 1 / s, **({"gnorm": s / 10} if s <= 40 else {})} for s in range(1, 101)
    ]
    yield from launch(div, tmp_path, lines, TWO_KEYS)


@pytest.fixture
def log_run(div, server, tmp_path):
    """A log-scale panel of a loss that is 0 once and negative once."""
    lines = [{"step": i, "loss": loss} for i, loss in enumerate(LOG_LOSSES, 1)]
    yield from launch(div, tmp_path, lines, LOG_PANEL)


def open_tab(browser, server, user, run):
    page = log_in(browser, server, user)
    page.goto(f"{server.url}/runs/{run.name}/")
    expect(page.locator("section.panel[data-title='Loss']")).to_have_attribute(
        "data-points", re.compile(r"[1-9]\d*")
    )
    return page


def test_zoomed_where_a_key_has_no_points_the_panel_says_so_and_keeps_its_axes(
    browser, server, gnorm_early, alice
):
    page = open_tab(browser, server, alice, gnorm_early)
    try:
        loss = page.locator("section.panel[data-title='Loss']")
        expect(loss.locator(".note")).to_have_text("")

        page.evaluate(
            "Plotly.relayout(document.querySelector(\"section.panel[data-title='Loss'] .plot\"),"
            " {'xaxis.range': [60, 90]})"
        )

        expect(loss.locator(".note")).to_have_text("gnorm: no points in this range")
        expect(loss.locator(".plot")).to_be_visible()
        expect(loss.locator(".plot .main-svg").first).to_be_visible()
        expect(loss.locator(".empty")).to_be_hidden()
        assert trace(page, "Loss", "loss")["x"] == list(range(60, 91))

        # A double-click zooms back out, as on any plot: the whole run again.
        loss.locator(".plot .nsewdrag").first.dblclick()

        expect(loss.locator(".note")).to_have_text("")
        expect(loss).to_have_attribute("data-points", str(100 + 40))
    finally:
        page.context.close()


def test_a_log_panel_leaves_off_values_at_or_below_zero_and_says_how_many(
    browser, server, log_run, alice
):
    page = open_tab(browser, server, alice, log_run)
    try:
        loss = page.locator("section.panel[data-title='Loss']")

        expect(loss.locator(".note")).to_have_text("loss: 2 points ≤ 0 not shown on a log scale")
        drawn = trace(page, "Loss", "loss")
        assert drawn["y"] == [1.0, 0.5, 0.125, 0.0625]
        assert drawn["x"] == [1, 2, 5, 6]
        expect(loss).to_have_attribute("data-points", "4")
        assert plot(page, "Loss")["layout"]["yaxis"]["type"] == "log"

        expect(page.locator("#live-note")).to_have_text("Live")
        log_run.write({"step": 7, "loss": 0}, {"step": 8, "loss": 0.03125})

        expect(loss.locator(".note")).to_have_text("loss: 3 points ≤ 0 not shown on a log scale")
        expect(loss).to_have_attribute("data-points", "5")
        assert trace(page, "Loss", "loss")["y"] == [1.0, 0.5, 0.125, 0.0625, 0.03125]
    finally:
        page.context.close()
