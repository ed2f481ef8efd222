"""A comparison of three runs in a real browser, one of them still running: Debian's Chromium,
driven by Playwright, on `div serve`. tests/browser.py has the fixtures."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from telemetry import services
from telemetry.models import Run
from tests.browser import (  # noqa: F401  (fixtures)
    alice,
    browser,
    chromium,
    launch,
    log_in,
    orm_beside_playwright,
    screenshot,
    server,
)
from tests.conftest import wait_for
from tests.test_browser_csp import VIOLATIONS, watched
from tests.test_compare_api import LAYOUT  # Loss, Eval, and the best loss as a stat


def lines(steps: range, scale: float, *, evals: bool) -> list[dict]:
    out = []
    for step in steps:
        line = {"step": step, "loss": round(scale / step, 6), "epoch": step // 10}
        if evals and step % 10 == 0:
            line["eval_loss"] = round(scale / step + 0.1, 6)
        out.append(line)
    return out


FIRST = lines(range(1, 31), 2.0, evals=True)  # launched with LAYOUT
SECOND = lines(range(1, 21), 3.0, evals=False)  # no telemetry.toml; never an eval_loss
RUNNING = lines(range(1, 11), 1.0, evals=True)  # launched with LAYOUT, still running


def ended_run(lines: list[dict], layout: str, org: str = services.DEFAULT_ORG) -> Run:
    """A run made, written and ended as `div run` would leave it; the server's ingester reads
    it. In a thread: ending a run tells the channel layer, which cannot be done from the test's
    thread, where Playwright keeps an event loop running."""

    def make() -> Run:
        try:
            run = services.run_create(
                org=services.org_get_or_create(name=org),
                command=["python", "x.py"],
                layout_source=layout,
            )
            run.telemetry_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
            services.run_start(run=run)
            services.run_finish(run=run, exit_code=0)
            return run
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(make).result()


@pytest.fixture
def three(div, server, tmp_path):
    """Two ended runs and one still running (launched by `div run`), in that order."""
    first = ended_run(FIRST, LAYOUT)
    second = ended_run(SECOND, "")
    closed = lambda: all(Run.objects.get(pk=r.pk).telemetry_closed for r in (first, second))  # noqa: E731
    wait_for(closed, 30, "the ended runs read")
    for running in launch(div, tmp_path, RUNNING, LAYOUT):
        yield first, second, running


PLOTS = """(title) => {
    const d = document.querySelector(`section.panel[data-title='${title}'] .plot`);
    return (d.data || []).map((t) => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y),
                                       color: t.line.color, hover: t.hovertemplate}));
}"""


def traces(page, title: str) -> dict[str, dict]:
    return {t["name"]: t for t in page.evaluate(PLOTS, title)}


def panel(page, title: str):
    return page.locator(f"section.panel[data-title='{title}']")


def test_three_runs_compared_one_running_with_colours_notes_live_points_and_x_by_epoch(
    browser, server, three, alice
):
    first, second, running = three
    a, b, c = first.name, second.name, running.name
    page = log_in(browser, server, alice)
    try:
        page.context.add_init_script(VIOLATIONS)
        violations = watched(page)
        # Named by number and once twice: the address becomes the comparison's own.
        number = a.removeprefix("run-")
        response = page.goto(f"{server.url}/compare/?runs={number},{b},{c},{a}")
        assert response.status == 200
        expect(page.locator("#live-note")).to_have_text("Live")
        assert page.url == f"{server.url}/compare/?runs={a},{b},{c}"
        expect(panel(page, "Loss")).to_have_attribute("data-points", str(30 + 20 + 10))

        # Every run's loss on the Loss panel, named by run and key, each point at its step.
        loss = traces(page, "Loss")
        assert list(loss) == [f"{a} loss", f"{b} loss", f"{c} loss"]
        for name, written in ((a, FIRST), (b, SECOND), (c, RUNNING)):
            assert loss[f"{name} loss"]["x"] == [line["step"] for line in written]
            assert loss[f"{name} loss"]["y"] == [line["loss"] for line in written]
            assert f"{name} loss: %{{y}} at step %{{x}}" in loss[f"{name} loss"]["hover"]
        expect(panel(page, "Loss").locator(".legendtext")).to_have_text(list(loss))

        # One colour a run, the same on every panel and beside its name; no two runs alike.
        colours = {name: loss[f"{name} loss"]["color"] for name in (a, b, c)}
        assert len(set(colours.values())) == 3
        evals = traces(page, "Eval")
        assert {n: t["color"] for n, t in evals.items()} == {
            f"{a} eval_loss": colours[a],
            f"{c} eval_loss": colours[c],
        }
        swatch = "(e) => getComputedStyle(e).backgroundColor"
        for name in (a, b, c):
            shown = page.locator(f".compared [data-run='{name}'] .swatch").evaluate(swatch)
            red, green, blue = (int(colours[name][i : i + 2], 16) for i in (1, 3, 5))
            assert shown == f"rgb({red}, {green}, {blue})"

        # A key one run never wrote: said so, never a line at zero.
        expect(panel(page, "Eval").locator(".note")).to_have_text(f"{b}: no points yet")
        assert f"{b} eval_loss" not in evals

        # Hovering names the run, the key, the x and the value.
        box = panel(page, "Loss").locator(".nsewdrag").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.05, box["y"] + box["height"] / 2)
        hover = panel(page, "Loss").locator(".hoverlayer")
        expect(hover).to_contain_text(f"{a} loss")
        expect(hover).to_contain_text("at step")

        # The stats: a row a run, a column a stat card.
        best = page.locator("#stats tbody tr td[data-key='loss']")
        expect(best).to_have_text(["0.066667", "0.15", "0.1"])

        # A live point of the running run: drawn, counted, and its best loss taken in.
        running.write({"step": 11, "loss": 0.05, "epoch": 1})
        page.wait_for_function(
            "(name) => document.querySelector(\"section.panel[data-title='Loss'] .plot\")"
            ".data.find((t) => t.name === name).x.includes(11)",
            arg=f"{c} loss",
        )
        expect(best).to_have_text(["0.066667", "0.15", "0.05"])
        expect(page.locator(f"#stats tr[data-run='{c}'] .points")).to_have_text("11")

        # Zoomed in: every run read again in the range, at full resolution; then out again.
        page.evaluate(
            "Plotly.relayout(document.querySelector(\"section.panel[data-title='Loss'] .plot\"),"
            " {'xaxis.range': [5, 8]})"
        )
        expect(panel(page, "Loss")).to_have_attribute("data-points", str(4 * 3))
        zoomed = traces(page, "Loss")
        assert [t["x"] for t in zoomed.values()] == [[5, 6, 7, 8]] * 3
        page.evaluate(
            "Plotly.relayout(document.querySelector(\"section.panel[data-title='Loss'] .plot\"),"
            " {'xaxis.autorange': true})"
        )
        expect(panel(page, "Loss")).to_have_attribute("data-points", str(30 + 20 + 11))

        # Every panel against epoch, which all three wrote; kept in the address.
        page.select_option("#align", "epoch")
        page.wait_for_function(
            "() => document.querySelector(\"section.panel[data-title='Loss'] .plot\")"
            ".layout.xaxis.title.text === 'epoch'"
        )
        expect(panel(page, "Loss")).to_have_attribute("data-points", str(30 + 20 + 11))
        by_epoch = traces(page, "Loss")
        assert by_epoch[f"{b} loss"]["x"] == [line["epoch"] for line in SECOND]
        assert by_epoch[f"{c} loss"]["x"] == [line["epoch"] for line in RUNNING] + [1]
        assert page.url == f"{server.url}/compare/?runs={a},{b},{c}&x=epoch"
        page.mouse.move(0, 0)
        shot = screenshot(page, "compare.png")
        print(f"\nscreenshot: {shot}")

        # The running run ends: its status says so, and the page has every point.
        running.finish()
        expect(page.locator(f".compared [data-run='{c}'] .status")).to_have_text("succeeded")
        expect(page.locator("#live-note")).to_have_text(
            "These runs have ended: what they wrote is all drawn."
        )
        assert violations() == []

        # Another org's run in the list: the 404 page, never a comparison of the others.
        eves = ended_run(SECOND, "", org="other")
        refused = page.goto(f"{server.url}/compare/?runs={a},{eves.name}")
        assert refused.status == 404
        expect(page.locator("h1")).to_have_text("Not found")
        expect(page.locator("section.panel")).to_have_count(0)
        assert a not in page.content() and eves.name not in page.content()
    finally:
        page.context.close()
