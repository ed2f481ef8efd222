"""The Log tab's reading of a log (`GET /api/runs/run-7/log/screen/`): as a terminal shows it,
a progress bar of any number of updates costing only its last state."""

from __future__ import annotations

import json

from telemetry import logs, services

pytest_plugins = ["tests.personas"]

TQDM = "".join(f"\rEpoch 0: {i:3d}%|{'#' * (i // 10):<10}| {i}/100" for i in range(101))
LAST = "Epoch 0: 100%|##########| 100/100"


def screen(client, run, offset: int = 0):
    response = client.get(f"/api/runs/{run.name}/log/screen/", {"offset": offset})
    assert response.status_code == 200
    return response


def test_the_log_is_shown_as_a_terminal_shows_it(client, alice, small):
    services.log_append(small, "\x1b[32mINFO\x1b[0m start\n" + TQDM + "\n\x1b[2Kdone\r\n")
    client.force_login(alice)

    body = screen(client, small).json()

    assert body == {
        "lines": [
            [["INFO", {"fg": 2}], [" start", None]],
            [[LAST, None]],
            [["done", None]],
        ],
        "partial": None,
        "offset": small.log_path.stat().st_size,
        "more": False,
        "live": True,
    }


def test_a_progress_line_of_100000_updates_is_sent_as_its_last_state_only(client, alice, small):
    bar = "".join(f"\rstep {i:>6}/100000 loss {1 / i:.6f}" for i in range(1, 100_001))
    services.log_append(small, "start\n" + bar)
    size = small.log_path.stat().st_size
    assert size > 3_000_000
    client.force_login(alice)

    sent, pages, offset = 0, [], 0
    while not pages or pages[-1]["more"]:  # as the tab follows it: at once while there is more
        response = screen(client, small, offset)
        sent += len(response.content)
        pages.append(response.json())
        offset = pages[-1]["offset"]

    assert sent < 500  # a few dozen bytes a page, whatever the bar's 3 MB
    assert [line for page in pages for line in page["lines"]] == [[["start", None]]]
    assert pages[-1]["partial"] == [["step 100000/100000 loss 0.000010", None]]
    assert len(pages) <= 2
    body = pages[-1]

    # The bar ends: the next page has its last state as a line, and nothing else.
    services.log_append(small, "\rstep 100000/100000 done\nnext\n")
    after = screen(client, small, body["offset"]).json()

    assert after["lines"] == [[["step 100000/100000 done", None]], [["next", None]]]
    assert after["partial"] is None


def test_a_line_being_written_is_replaced_by_its_next_state(client, alice, small):
    client.force_login(alice)
    services.log_append(small, "downloading  10%")
    first = screen(client, small).json()
    services.log_append(small, "\rdownloading  60%")
    second = screen(client, small, first["offset"]).json()

    assert (first["lines"], first["partial"]) == ([], [["downloading  10%", None]])
    assert (second["lines"], second["partial"]) == ([], [["downloading  60%", None]])


def test_a_line_being_written_keeps_the_colour_set_before_its_returns_poll_after_poll(
    client, alice, small
):
    client.force_login(alice)
    services.log_append(small, "done\n\x1b[32mdownloading  10%")
    first = screen(client, small).json()
    services.log_append(small, "\rdownloading  60%")
    second = screen(client, small, first["offset"]).json()
    third = screen(client, small, second["offset"]).json()

    assert first["lines"] == [[["done", None]]]
    assert first["partial"] == [["downloading  10%", {"fg": 2}]]
    assert (second["lines"], second["partial"]) == ([], [["downloading  60%", {"fg": 2}]])
    assert (third["lines"], third["partial"]) == ([], [["downloading  60%", {"fg": 2}]])


def test_a_line_longer_than_a_page_with_no_returns_comes_whole_in_pieces(client, alice, small):
    long = "é" * logs.PAGE_BYTES  # two bytes each: the page boundary falls inside one
    services.log_append(small, long + "\nend\n")
    client.force_login(alice)

    text, offset, pages = "", 0, 0
    while True:
        body = screen(client, small, offset).json()
        pages += 1
        text += "".join(s[0] for line in body["lines"] for s in line) + "|"
        offset = body["offset"]
        if not body["more"]:
            break

    assert text.replace("|", "") == long + "end"
    assert "\ufffd" not in text and pages > 1


def test_another_orgs_log_is_a_404(client, eve, small):
    client.force_login(eve)

    assert client.get(f"/api/runs/{small.name}/log/screen/").status_code == 404


def test_the_screen_sends_no_markup_only_text_and_styles(client, alice, small):
    services.log_append(small, "<script>alert(1)</script> \x1b[1m<b>\x1b[0m\n")
    client.force_login(alice)

    body = screen(client, small).json()

    assert body["lines"] == [[["<script>alert(1)</script> ", None], ["<b>", {"b": 1}]]]
    assert json.dumps(body).count("<script>") == 1  # as text, for the page's textContent


def test_a_bar_past_what_one_page_may_skip_goes_on_from_its_last_state(tmp_path, monkeypatch):
    monkeypatch.setattr(logs, "SCAN_BYTES", 64)
    path = tmp_path / "log"
    path.write_text("".join(f"\r{i:>4}%" for i in range(100)))  # 600 bytes, no newline

    offsets, page = [0], None
    while (page is None or page.more) and len(offsets) < 20:
        page = logs.screen_page(path, offsets[-1], page=32)
        offsets.append(page.offset)

    assert offsets == sorted(offsets) and len(offsets) < 20
    assert page.partial == [["  99%", None]]
