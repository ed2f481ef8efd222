"""The Telemetry tab in a real browser: Debian's Chromium, driven by Playwright, on `div serve`.

Each test opens the tab of a run launched by `div run` with the spec's example telemetry.toml
(tests/browser.py has the fixtures, the layout and the lines the run's script writes).
"""

# The fixtures are imported by name (a non-root conftest may not register plugins), and pytest
# hands them to the tests as arguments of the same name: that is not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import statistics
import time

from playwright.sync_api import expect

from telemetry import services
from tests.browser import (  # noqa: F401  (fixtures)
    EVAL_STEPS,
    SAMPLES_PER_SECOND,
    STEPLESS_AFTER,
    STEPS,
    STRICT_F1,
    TYPED_F1,
    alice,
    browser,
    chromium,
    default_run,
    log_in,
    loss_at,
    orm_beside_playwright,
    plot,
    screenshot,
    serve,
    server,
    spec_run,
    stop,
    tab,
    trace,
)


def panel(page, title: str):
    return page.locator(f"section.panel[data-title='{title}']")


def test_the_tab_shows_the_layouts_panels_in_order_with_their_titles(tab):
    shot = screenshot(tab, "telemetry-tab.png")
    print(f"\nscreenshot: {shot}")

    titles = tab.locator("section.panel[data-title]")
    expect(titles).to_have_count(3)
    assert [titles.nth(i).get_attribute("data-title") for i in range(3)] == [
        "Loss",
        "F1",
        "eval_leak_recall",  # an untitled panel is called by its keys
    ]
    expect(tab.locator("section.panel[data-title] h2")).to_have_text(
        ["Loss", "F1", "eval_leak_recall"]
    )


def test_the_loss_panel_draws_on_a_log_axis(tab):
    drawn = plot(tab, "Loss")

    assert drawn["layout"]["yaxis"]["type"] == "log"
    assert [t["name"] for t in drawn["data"]] == ["loss", "eval_loss"]
    assert trace(tab, "Loss", "eval_loss")["x"] == EVAL_STEPS


def test_the_f1_panel_has_its_rule_line_at_0_95_and_its_y_axis_from_0_9_to_1(tab):
    drawn = plot(tab, "F1")

    assert drawn["layout"]["yaxis"]["range"] == [0.9, 1.0]
    assert drawn["layout"]["yaxis"]["type"] == "linear"
    rules = [s for s in drawn["layout"]["shapes"] if s.get("type") == "line"]
    assert len(rules) == 1
    assert (rules[0]["y0"], rules[0]["y1"], rules[0]["yref"]) == (0.95, 0.95, "y")
    assert (rules[0]["xref"], rules[0]["x0"], rules[0]["x1"]) == ("paper", 0, 1)  # all across
    strict = trace(tab, "F1", "eval_strict_f1")
    assert (strict["x"], strict["y"]) == (EVAL_STEPS, STRICT_F1)
    assert trace(tab, "F1", "eval_typed_f1")["y"] == TYPED_F1


def test_a_key_never_written_gets_a_wide_panel_saying_no_points_yet_and_no_line(tab):
    leak = panel(tab, "eval_leak_recall")

    grid = tab.locator("#panels").bounding_box()
    wide = leak.bounding_box()
    loss = panel(tab, "Loss").bounding_box()
    f1 = panel(tab, "F1").bounding_box()
    assert abs(wide["width"] - grid["width"]) <= 2, (wide, grid)
    assert abs(wide["x"] - grid["x"]) <= 2
    assert wide["y"] >= loss["y"] + loss["height"]  # on a row of its own, below the two
    assert loss["width"] < grid["width"] * 0.6 and abs(loss["y"] - f1["y"]) <= 2  # side by side

    expect(leak.locator(".empty")).to_be_visible()
    expect(leak.locator(".empty")).to_have_text("no points yet")
    assert [t for t in plot(tab, "eval_leak_recall")["data"] if t["y"]] == []  # no line at zero
    expect(panel(tab, "Loss").locator(".empty")).to_be_hidden()


def test_the_samples_per_second_card_shows_the_last_value_written(tab):
    card = tab.locator(".stat[data-key='eval_samples_per_second']")

    expect(card.locator(".title")).to_have_text("Samples/s")
    expect(card.locator(".value")).to_have_text("147.25")
    assert SAMPLES_PER_SECOND[-1] == 147.25
    assert min(SAMPLES_PER_SECOND) < 147.25 < max(SAMPLES_PER_SECOND)  # last, not min or max


def test_a_point_without_the_x_key_is_left_off_the_panel(tab, spec_run):
    loss = trace(tab, "Loss", "loss")

    with_step = [line for line in spec_run.written if "step" in line and "loss" in line]
    assert len(STEPLESS_AFTER) == 2 and len(with_step) == len(STEPS)
    assert loss["x"] == [line["step"] for line in with_step]
    assert loss["y"] == [line["loss"] for line in with_step]
    assert not {0.321, 0.123} & set(loss["y"])  # the stepless lines' losses


WATCH = """([step, id]) => {
    // Stamps the wall-clock time of the first frame whose Loss trace ends at step.
    window.drawnAt = window.drawnAt || {};
    const tick = () => {
        const d = document.querySelector("section.panel[data-title='Loss'] .plot");
        const t = (d.data || []).find((tr) => tr.name === "loss");
        if (t && t.x.length && t.x[t.x.length - 1] === step) {
            window.drawnAt[id] = Date.now();
            return;
        }
        requestAnimationFrame(tick);
    };
    tick();
}"""


def test_new_lines_are_drawn_without_a_reload(tab, spec_run):
    expect(tab.locator("#live-note")).to_have_text("Live")  # the websocket is open
    tab.evaluate("window.notReloaded = true")
    plot_element = tab.locator("section.panel[data-title='Loss'] .plot").element_handle()
    new_steps = [510, 520, 530, 540, 550]
    latencies = []

    for i, step in enumerate(new_steps):
        tab.evaluate(WATCH, [step, i])
        lines = [{"step": step, "loss": loss_at(step)}]
        if step == 530:  # a line without the x key in between, and an eval with a new last stat
            lines = [{"loss": 0.999}, {"step": step, "loss": loss_at(step)}]
            lines[1] |= {"eval_samples_per_second": 161.5, "eval_strict_f1": 0.97}
        written = spec_run.write(*lines)
        tab.wait_for_function("(id) => window.drawnAt && window.drawnAt[id]", arg=i, timeout=10_000)
        latencies.append(tab.evaluate("(id) => window.drawnAt[id]", i) - written * 1000)

    print(
        "\nwrite-to-drawn latency (ms), each line: "
        + ", ".join(f"{ms:.0f}" for ms in latencies)
        + f"; median {statistics.median(latencies):.0f}"
    )
    assert tab.evaluate("window.notReloaded") is True
    assert tab.evaluate("(el) => el.isConnected", plot_element)
    loss = trace(tab, "Loss", "loss")
    assert loss["x"] == STEPS + new_steps  # the stepless line drawn live is left off too
    assert 0.999 not in loss["y"]
    assert trace(tab, "F1", "eval_strict_f1")["x"] == [*EVAL_STEPS, 530]
    card = tab.locator(".stat[data-key='eval_samples_per_second'] .value")
    expect(card).to_have_text("161.5")
    expect(tab.locator("#live-note")).to_have_text("Live")
    assert max(latencies) < 5000


def test_a_tab_resumes_after_its_server_restarts_with_no_gap_and_no_duplicate(
    tab, server, spec_run, div, tmp_path
):
    expect(tab.locator("#live-note")).to_have_text("Live")
    spec_run.write({"step": 510, "loss": loss_at(510)})
    tab.wait_for_function(WAIT_FOR_STEP, arg=510)

    stop(server.process)
    expect(tab.locator("#live-note")).to_contain_text("Reconnecting")
    spec_run.write(*({"step": s, "loss": loss_at(s)} for s in (520, 530)))
    restarted = serve(div.env, tmp_path / "restarted.out", port=server.port)
    try:
        spec_run.write({"step": 540, "loss": loss_at(540)})
        tab.wait_for_function(WAIT_FOR_STEP, arg=540, timeout=30_000)
        expect(tab.locator("#live-note")).to_have_text("Live")
        assert trace(tab, "Loss", "loss")["x"] == [*STEPS, 510, 520, 530, 540]
    finally:
        stop(restarted.process)


WAIT_FOR_STEP = """(step) => {
    const loss = document.querySelector("section.panel[data-title='Loss'] .plot").data[0];
    return loss.x.includes(step);
}"""


def test_the_run_ending_shows_succeeded_and_the_ended_banner(tab, spec_run):
    expect(tab.locator("#status")).to_have_text("running")
    expect(tab.locator("#ended-banner")).to_be_hidden()

    started = time.monotonic()
    spec_run.finish()
    assert (spec_run.run.status, spec_run.run.exit_code) == ("succeeded", 0)

    expect(tab.locator("#status")).to_have_text("succeeded")
    expect(tab.locator("#status")).to_have_class("status status-succeeded")
    expect(tab.locator("#ended-banner")).to_be_visible()
    expect(tab.locator("#ended-banner")).to_have_text("This run has ended (exit code 0).")
    expect(tab.locator("#live-note")).to_have_text(
        "This run has ended: what it wrote is all drawn."
    )
    expect(tab.locator("#exit-code")).to_have_text("0")
    print(f"\nthe page said the run ended {time.monotonic() - started:.2f} s after the stop file")


def test_a_user_of_another_org_gets_the_404_page_for_the_run(browser, server, spec_run):
    eve = services.user_create(username="eve", orgs=["other"])
    page = log_in(browser, server, eve)
    try:
        response = page.goto(f"{server.url}/runs/{spec_run.name}/")

        assert response.status == 404
        expect(page.locator("h1")).to_have_text("Not found")
        expect(page.locator("section.panel")).to_have_count(0)
        assert spec_run.name not in page.content()
    finally:
        page.context.close()


def test_the_ended_time_shown_when_the_run_ends_is_the_one_a_reload_shows(
    browser, server, spec_run, alice
):
    # Someone in New York watches the run end: the server renders times in its zone (UTC).
    page = log_in(browser, server, alice, timezone_id="America/New_York")
    try:
        page.goto(f"{server.url}/runs/{spec_run.name}/")
        expect(page.locator("#live-note")).to_have_text("Live")
        started = page.locator(".facts dt:text-is('Started') + dd").text_content()

        spec_run.finish()
        expect(page.locator("#exit-code")).to_have_text("0")  # the page has read how it ended
        expect(page.locator("#ended")).not_to_have_text("—")
        live = page.locator("#ended").text_content()
        shot = screenshot(page, "ended-time.png")
        page.reload()
        reloaded = page.locator("#ended").text_content()

        assert live == reloaded, (
            f"Started {started}; Ended {live} when the run ended, {reloaded} after a reload "
            f"(browser in America/New_York, server in UTC); {shot}"
        )
    finally:
        page.context.close()


def test_the_dashboard_lists_the_run_with_its_stats_and_follows_its_status(
    browser, server, spec_run, alice
):
    page = log_in(browser, server, alice)
    try:
        page.goto(f"{server.url}/")
        row = page.locator(f"tr[data-run='{spec_run.name}']")
        expect(row.locator(".status")).to_have_text("running")
        expect(row.locator("td.num")).to_have_text(f"{spec_run.stored():,}")
        expect(row.locator(".stats-cell")).to_have_text(f"Samples/s {SAMPLES_PER_SECOND[-1]}")

        spec_run.finish()

        expect(row.locator(".status")).to_have_text("succeeded", timeout=10_000)
        row.locator("a").click()
        expect(page.locator("h1")).to_contain_text(spec_run.name)
    finally:
        page.context.close()


def test_without_a_layout_a_key_that_arrives_later_adds_its_panel_live(
    browser, server, default_run, alice
):
    page = log_in(browser, server, alice)
    try:
        page.goto(f"{server.url}/runs/{default_run.name}/")
        expect(page.locator("#live-note")).to_have_text("Live")
        titles = page.locator("section.panel h2")
        expect(titles).to_have_text(["loss"])  # step is the x: no panel of its own

        default_run.write({"step": 40, "loss": loss_at(40), "grad_norm": 1.5})

        expect(titles).to_have_text(["loss", "grad_norm"])
        expect(page.locator("section.panel[data-title='grad_norm']")).to_have_attribute(
            "data-points", "1"
        )
        assert trace(page, "loss", "loss")["x"] == [10, 20, 30, 40]
        expect(page.locator("section.panel[data-title='grad_norm'] .empty")).to_be_hidden()
    finally:
        page.context.close()
