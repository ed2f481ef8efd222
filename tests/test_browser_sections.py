"""A run of many keys on its Telemetry tab, in a real browser: the default layout's panels
grouped into sections by their key's prefix, folded at will, and drawn as they come near the
view, asked for in one request a batch. tests/browser.py has the fixtures."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser import (  # noqa: F401  (fixtures)
    alice,
    browser,
    chromium,
    launch,
    log_in,
    orm_beside_playwright,
    screenshot,
    server,
    trace,
)

LAYERS = [f"layer{n:02d}" for n in range(6)]
METRICS = ["grad_norm", "act_mean", "act_std"]
STEPS = range(1, 21)


def line(step: int) -> dict:
    """loss, three metrics of each layer, and one lone eval key: a key without a dot and a key
    alone under its prefix each stay a panel of their own."""
    point = {"step": step, "loss": 1 / step}
    for n, layer in enumerate(LAYERS):
        point[layer] = {metric: n + i + step / 100 for i, metric in enumerate(METRICS)}
    point["eval"] = {"loss": 2 / step}
    return point


@pytest.fixture
def wide_run(div, server, tmp_path):
    yield from launch(div, tmp_path, [line(step) for step in STEPS], layout=None)


def panels_asked(requests: list[str]) -> list[list[int]]:
    """The panels each /panels/ request asked for, in the order they were made."""
    return [
        [int(n) for n in parse_qs(urlsplit(url).query).get("panel", [])]
        for url in requests
        if "/panels/" in url
    ]


def numbers(page, prefix: str) -> list[int]:
    """The places, in the run's panels, of the panels whose key has this prefix."""
    return page.evaluate(
        "(prefix) => TelemetryTab.panels().filter((p) => p.spec.y[0].startsWith(prefix))"
        ".map((p) => p.number)",
        prefix,
    )


def panel(page, title: str):
    return page.locator(f"section.panel[data-title='{title}']")


def test_many_keys_are_grouped_by_prefix_and_drawn_as_they_come_into_view(
    browser, server, wide_run, alice
):
    page = log_in(browser, server, alice)
    requests: list[str] = []
    failed: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/api/" in r.url else None)
    page.on(
        "requestfailed",
        lambda r: failed.append(f"{r.url} {r.failure}") if "/panels/" in r.url else None,
    )
    try:
        page.goto(f"{server.url}/runs/{wide_run.name}/")
        expect(page.locator("#live-note")).to_have_text("Live")
        expect(panel(page, "loss")).to_have_attribute("data-points", str(len(STEPS)))

        # The sections: each layer's three panels, in the order the keys first arrived; loss
        # and eval.loss (alone under "eval") are panels of their own, not in a section.
        sections = page.locator("#panels > details.section")
        expect(sections).to_have_count(len(LAYERS))
        expect(sections.locator("summary .name")).to_have_text(LAYERS)
        expect(sections.locator("summary .count")).to_have_text(["3 panels"] * len(LAYERS))
        loose = page.locator("#panels > section.panel h2")
        expect(loose).to_have_text(["loss", "eval.loss"])
        expect(sections.nth(0).locator("section.panel h2")).to_have_text(
            [f"layer00.{metric}" for metric in METRICS]
        )

        # On opening, one request for the panels near the view; the last layers wait.
        first = panels_asked(requests)
        assert len(first) == 1, requests
        last_layer = numbers(page, "layer05.")
        assert not set(first[0]) & set(last_layer)
        assert 0 in first[0]
        far = panel(page, "layer05.grad_norm")
        assert far.get_attribute("data-points") is None  # not drawn, nothing asked for it

        # A live point for a panel not drawn yet costs it nothing; it is there once drawn.
        wide_run.write({"step": 21, "loss": 0.01, "layer05": {"grad_norm": 9.5}})
        page.wait_for_function(
            "() => TelemetryTab.panels()[0].traces.loss.x.includes(21)"  # the drawn one: live
        )
        assert far.get_attribute("data-points") is None
        assert (
            page.evaluate(
                "(n) => Object.keys(TelemetryTab.panels()[n].traces).length", last_layer[0]
            )
            == 0
        )

        # A folded section's panels are never asked for; scrolling asks for the rest in batches.
        folded = LAYERS.index("layer04")  # well below the view: not asked for yet
        assert not set(first[0]) & set(numbers(page, "layer04."))
        sections.nth(folded).locator("summary").click()
        expect(sections.nth(folded).locator("section.panel").first).to_be_hidden()
        far.scroll_into_view_if_needed()
        expect(far).to_have_attribute("data-points", str(len(STEPS) + 1))
        drawn = trace(page, "layer05.grad_norm", "layer05.grad_norm")
        assert (drawn["x"][-1], drawn["y"][-1]) == (21, 9.5)
        asked = [n for batch in panels_asked(requests) for n in batch]
        assert not set(asked) & set(numbers(page, f"{LAYERS[folded]}."))
        assert len(asked) == len(set(asked))  # each panel asked for once
        assert len(panels_asked(requests)) < len(asked)  # in batches, not one a panel

        # Unfolded, its panels are asked for and drawn.
        sections.nth(folded).locator("summary").click()
        sections.nth(folded).scroll_into_view_if_needed()
        expect(panel(page, f"{LAYERS[folded]}.act_std")).to_have_attribute(
            "data-points", re.compile(r"[1-9]\d*")
        )

        # Smoothing reads every panel drawn so far again, in one request, each with its EMA.
        before = len(panels_asked(requests))
        page.locator("#smoothing").fill("0.6")
        page.wait_for_function("() => TelemetryTab.panels()[0].traces.loss.smoothed !== undefined")
        expect(panel(page, "loss").locator(".plot .scatterlayer .trace")).to_have_count(2)
        assert len(panels_asked(requests)) == before + 1
        assert "smooth=0.6" in [url for url in requests if "/panels/" in url][-1]

        # New keys: a second eval key makes "eval" a section, with eval.loss moved into it; a
        # new prefix alone is a panel of its own.
        wide_run.write({"step": 22, "eval": {"acc": 0.5}, "extra": {"one": 1}})
        eval_section = page.locator("#panels > details.section[data-section='eval']")
        expect(eval_section.locator("section.panel h2")).to_have_text(["eval.loss", "eval.acc"])
        expect(loose).to_have_text(["loss", "extra.one"])
        eval_section.scroll_into_view_if_needed()
        expect(panel(page, "eval.acc")).to_have_attribute("data-points", "1")
        screenshot(page, "telemetry-tab-sections.png")
        assert failed == []  # every streamed answer read to its end
    finally:
        page.context.close()
