"""The dashboard as a person uses it: Debian's Chromium on `div serve`, with a page of runs
whose view is kept in the address, a row that changes live, sparklines, and the Compare link."""

# The fixtures are imported by name, and pytest hands them to the tests as arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from django.utils import timezone
from playwright.sync_api import expect

from telemetry import services
from telemetry.listing import BAD
from telemetry.models import Run
from tests.browser import (  # noqa: F401  (fixtures)
    ARTIFACTS,
    LAYOUT,
    STEPS,
    alice,
    browser,
    chromium,
    log_in,
    loss_at,
    orm_beside_playwright,
    server,
    spec_run,
)
from tests.conftest import wait_for

SWEEP = 51  # with the spec's run: two pages


def ended(run: Run, exit_code: int) -> None:
    """Ended as run_finish ends it (its message to the pages is the server's to send, not this
    process's: Playwright's event loop runs on this thread)."""
    status = Run.Status.SUCCEEDED if exit_code == 0 else Run.Status.FAILED
    now = timezone.now()
    started = now - timedelta(seconds=60 + 97 * (run.pk % 40))
    Run.objects.filter(pk=run.pk).update(
        status=status, exit_code=exit_code, started=started, ended=now
    )


def query(page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def names(page) -> list[str]:
    return page.locator("#runs tbody tr[data-run]").evaluate_all(
        "rows => rows.map((r) => r.dataset.run)"
    )


def test_the_dashboard_keeps_its_view_in_the_address_and_its_rows_live(
    browser, server, spec_run, alice
):
    org = services.org_get_or_create()
    sweep = []
    for seed in range(SWEEP):
        run = services.run_create(
            org=org,
            command=["python", "sweep.py", f"--seed={seed}"],
            layout_source=LAYOUT,
            layout_origin="telemetry.toml",
        )
        if seed % 3 == 0:  # some with points, read by the server's ingester once ended
            lr = (3e-4, 1e-3, 1e-4)[seed // 3 % 3]
            with open(run.telemetry_path, "a") as f:
                for step in range(10, 10 * (10 + seed // 2) + 1, 10):  # fewer than spec_run
                    line = {"step": step, "loss": 2.5 * (1 - lr * 20) ** step + 0.05}
                    f.write(
                        json.dumps(
                            line
                            | ({"eval_samples_per_second": 90 + seed} if step % 100 == 0 else {})
                        )
                        + "\n"
                    )
        ended(run, exit_code=seed % 2)
        sweep.append(run.name)
    elsewhere = services.org_get_or_create(name="elsewhere")
    theirs = services.run_create(org=elsewhere, command=["python", "sweep.py", "--theirs"])
    newest_first = [*reversed(sweep), spec_run.name]

    page = log_in(browser, server, alice)
    try:
        # A link reproduces a view: the running runs alone, with the filter shown as chosen.
        page.goto(f"{server.url}/?status=running")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(1)
        expect(page.locator("select[name=status]")).to_have_value("running")
        row = page.locator(f"tr[data-run='{spec_run.name}']")
        expect(row.locator(".status")).to_have_text("running")
        expect(row.locator("td.num")).to_have_text(f"{len(spec_run.written):,}")

        # The sparkline: loss against step from its first point to its last, one unbroken
        # line, drawn from the coarse buckets (8 points a bucket here: 7 lows and highs).
        spark = row.locator(".spark")
        expect(spark).to_have_attribute("data-key", "loss")
        first, last = loss_at(STEPS[0]), loss_at(STEPS[-1])
        expect(spark.locator("svg")).to_have_attribute(
            "aria-label",
            f"loss against step: from {first:.6g} to {last:.6g}, lowest {last:.6g}, "
            f"highest {first:.6g}",
        )
        expect(spark).to_have_attribute("data-points", "14")
        line = spark.locator("path.spark-line").get_attribute("d")
        assert line.count("M") == 1 and line.count("L") == 13

        # Live, without reloading: the points count moves, then the status changes.
        spec_run.write({"step": 510, "loss": loss_at(510)}, {"step": 520, "loss": loss_at(520)})
        expect(row.locator("td.num")).to_have_text(f"{len(spec_run.written):,}")

        # Every run of the user's org, newest first, fifty a page; another org's never.
        page.locator("select[name=status]").select_option("")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(50)
        assert names(page) == newest_first[:50]
        assert query(page) == {}
        expect(page.locator("#total")).to_have_text(f"{SWEEP + 1} runs")
        expect(page.locator(f"tr[data-run='{theirs.name}']")).to_have_count(0)
        expect(page.locator(f"tr[data-run='{sweep[-1]}'] .no-points")).to_have_text(
            "loss: no points yet"
        )

        page.locator("#pager a[rel=next]").click()
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)
        assert names(page) == newest_first[50:]
        assert query(page) == {"page": ["2"]}

        # Sorting by a column's header: most points first, then back to page 1.
        page.locator("th[data-sort=points] button").click()
        expect(page.locator("#runs tbody tr[data-run]").first).to_have_attribute(
            "data-run", spec_run.name
        )
        assert query(page) == {"sort": ["-points"]}
        expect(page.locator("select[name=sort]")).to_have_value("-points")

        # A search over commands, kept in the address too.
        page.locator("input[name=q]").fill("seed=7")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(1)
        assert names(page) == [sweep[7]]
        assert query(page) == {"q": ["seed=7"], "sort": ["-points"]}

        # Back and forward walk the views.
        page.go_back()
        expect(page.locator("input[name=q]")).to_have_value("")
        expect(page.locator("#runs tbody tr[data-run]").first).to_have_attribute(
            "data-run", spec_run.name
        )
        page.go_back()
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)
        assert query(page) == {"page": ["2"]}
        page.go_forward()
        expect(page.locator("select[name=sort]")).to_have_value("-points")

        # Checkboxes: Compare waits for two, and lists them in the order they are shown.
        page.goto(f"{server.url}/?q=sweep")
        compare = page.locator("#compare")
        expect(compare).to_have_attribute("aria-disabled", "true")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(50)
        shown = names(page)
        assert shown == newest_first[:50]
        page.locator(f"tr[data-run='{shown[2]}'] input.pick").check()
        expect(compare).to_have_attribute("aria-disabled", "true")
        page.locator(f"tr[data-run='{shown[0]}'] input.pick").check()
        expect(compare).to_have_attribute("aria-disabled", "false")
        expect(compare).to_have_attribute("href", f"/compare/?runs={shown[0]},{shown[2]}")
        expect(compare).to_have_text("Compare 2")
        for name in shown[3:11]:
            page.locator(f"tr[data-run='{name}'] input.pick").check()
        expect(compare).to_have_text("Compare 10")
        expect(page.locator(f"tr[data-run='{shown[11]}'] input.pick")).to_be_disabled()

        # Addresses it cannot show say why, in one line.
        page.goto(f"{server.url}/?sort=name%27%3B--")
        expect(page.locator("#problem")).to_have_text(BAD["sort"].format(value="name';--"))
        expect(page.locator("#runs tbody tr")).to_have_count(0)
        page.goto(f"{server.url}/?page=99999")
        expect(page.locator("#no-runs")).to_have_text(
            "There is no page 99,999: the runs fill 2 pages."
        )
        page.locator("#pager a[data-page='2']").first.click()
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)

        wait_for(lambda: Run.objects.filter(telemetry_closed=True).count() == SWEEP, 30, "read")
        page.goto(f"{server.url}/")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(50)
        expect(page.locator(f"tr[data-run='{sweep[48]}'] .spark svg")).to_be_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"))  # what the screen shows

        # On screen, live: a new run arrives at the top of the newest first, and the spec's
        # run's row turns succeeded when it ends, without a reload.
        page.goto(f"{server.url}/?status=running")
        row = page.locator(f"tr[data-run='{spec_run.name}']")
        expect(row.locator(".status")).to_have_text("running")
        made = services.run_create(org=org, command=["python", "new.py"])
        expect(page.locator("#runs tbody tr[data-run]").first).to_have_attribute(
            "data-run", made.name
        )
        ended(made, exit_code=3)
        spec_run.finish()
        expect(row.locator(".status")).to_have_text("succeeded")
        expect(row.locator(".status")).to_have_class("status status-succeeded")
    finally:
        page.context.close()


def test_a_filter_of_several_values_lists_every_one_and_the_page_shows_them_all(
    browser, server, alice
):
    made = {}
    for status in ("running", "succeeded", "failed", "lost"):
        run = services.run_create(org=services.org_get_or_create(), command=["python", status])
        Run.objects.filter(pk=run.pk).update(status=status)
        made[status] = run.name
    for org in ("lab", "other"):
        services.org_add(name=org, members=["alice"])
        run = services.run_create(org=services.org_get_or_create(name=org), command=["python"])
        Run.objects.filter(pk=run.pk).update(status="succeeded")
        made[org] = run.name

    page = log_in(browser, server, alice)
    try:
        # As the API reads it: a filter repeated, or its values joined by commas, is any of them.
        page.goto(f"{server.url}/?status=failed,lost&status=running")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(3)
        assert names(page) == [made["lost"], made["failed"], made["running"]]
        status = page.locator("select[name=status]")
        expect(status).to_have_value("failed,lost,running")
        expect(status.locator("option:checked")).to_have_text("failed, lost or running")

        page.goto(f"{server.url}/?org=lab&org=default&status=succeeded")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)
        assert names(page) == [made["lab"], made["succeeded"]]
        expect(page.locator("select[name=org] option:checked")).to_have_text("lab or default")

        # Choosing one status is that one alone, the other filter kept.
        status.select_option("running")
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(1)
        assert names(page) == [made["running"]]
        assert query(page) == {"status": ["running"], "org": ["lab,default"]}
        page.go_back()
        expect(page.locator("#runs tbody tr[data-run]")).to_have_count(2)
        expect(status).to_have_value("succeeded")
    finally:
        page.context.close()
