"""The Log tab in a real browser: what every Trainer prints, drawn as a terminal draws it."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import sys

from playwright.sync_api import expect

from telemetry.models import Run
from tests.browser import (  # noqa: F401  (fixtures)
    alice,
    browser,
    chromium,
    log_in,
    orm_beside_playwright,
    server,
)

# A Trainer's log: a coloured logging line, a tqdm bar of 100,000 updates rewritten in place,
# then a bold line.
SCRIPT = r"""
import sys
out = sys.stdout
out.write("\x1b[32mINFO\x1b[0m training starts\n")
for i in range(1, 100001):
    out.write(f"\rEpoch 0: {i * 100 // 100000:3d}%|{'#' * (i * 10 // 100000):<10}| {i}/100000")
out.write("\n\x1b[1mdone\x1b[0m\n")
"""


def test_the_log_tab_draws_a_progress_bar_as_its_last_state_and_colours_as_colours(
    browser, server, alice, div, tmp_path
):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT)
    launched = div("run", str(project), "--", sys.executable, "train.py")
    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get()
    assert run.log_path.stat().st_size > 3_000_000

    page = log_in(browser, server, alice)
    try:
        page.goto(f"{server.url}/runs/{run.name}/")
        page.locator(".tabs button[data-tab='log']").click()
        log = page.locator("#log")

        expect(log).to_have_text(
            "INFO training starts\nEpoch 0: 100%|##########| 100000/100000\ndone\n"
        )
        info = log.locator("span.fg2")
        expect(info).to_have_text("INFO")
        expect(info).to_have_css("color", "rgb(127, 217, 98)")
        expect(log.locator("span.b")).to_have_text("done")
        assert "\x1b" not in log.text_content()
    finally:
        page.context.close()
