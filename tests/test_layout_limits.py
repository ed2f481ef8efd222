"""A layout is bounded: 64 panels, 64 stats, titles of 200 characters, files of 4 MiB. Past a
limit, the run is refused in the spec's form, naming the table and the key."""

from __future__ import annotations

import sys

import pytest

from telemetry.layout import (
    MAX_FILE_BYTES,
    MAX_PANELS,
    MAX_STATS,
    MAX_TITLE,
    TITLE_TOO_LONG,
    TOO_BIG,
    TOO_MANY_TABLES,
    LayoutError,
    parse_layout,
)
from telemetry.models import Run


def panels(count: int, title: str | None = None) -> str:
    titled = "" if title is None else f'title = "{title}"\n'
    return f'[[panel]]\ny = "loss"\n{titled}' * count


def stats(count: int, title: str | None = None) -> str:
    titled = "" if title is None else f'title = "{title}"\n'
    return f'[[stat]]\ny = "loss"\n{titled}' * count


@pytest.mark.parametrize(
    "text,message",
    [
        (panels(65), "telemetry has 65 [[panel]] tables; a tab shows up to 64"),
        (panels(10_000), "telemetry has 10,000 [[panel]] tables; a tab shows up to 64"),
        (stats(65), "telemetry has 65 [[stat]] tables; a tab shows up to 64"),
        (stats(100_000), "telemetry has 100,000 [[stat]] tables; a tab shows up to 64"),
        (
            panels(2) + panels(1, "x" * 201),
            "telemetry [[panel]] 3 has a title of 201 characters; keep it to 200",
        ),
        (
            panels(1, "x" * 1_000_000),
            "telemetry [[panel]] 1 has a title of 1,000,000 characters; keep it to 200",
        ),
        (
            panels(1) + stats(1, "é" * 201),
            "telemetry [[stat]] 1 has a title of 201 characters; keep it to 200",
        ),
        (
            panels(1, "loss\\u0000"),
            'telemetry [[panel]] 1 has a title with "\\u0000" in it; a title is one line of text',
        ),
        (
            panels(1) + stats(1, "two\\nlines"),
            'telemetry [[stat]] 1 has a title with "\\n" in it; a title is one line of text',
        ),
        (
            panels(1, "\\u001b[31mred"),
            'telemetry [[panel]] 1 has a title with "\\u001b" in it; a title is one line of text',
        ),
        (
            "# " + "x" * MAX_FILE_BYTES + "\n" + panels(1),
            f"telemetry is {MAX_FILE_BYTES + 3 + len(panels(1)):,} bytes; "
            "a layout file is at most 4 MiB",
        ),
    ],
)
def test_a_layout_past_a_limit_is_refused_naming_the_table_and_key(text, message):
    with pytest.raises(LayoutError) as refused:
        parse_layout(text)
    assert str(refused.value) == message


def test_the_messages_are_written_once_with_the_limits_in_them():
    assert TOO_MANY_TABLES.format(count=65, table="panel", most=MAX_PANELS).endswith("up to 64")
    assert TITLE_TOO_LONG.format(where="w", length=201, most=MAX_TITLE).endswith("keep it to 200")
    assert TOO_BIG.format(size=1, most=4).endswith("at most 4 MiB")
    assert (MAX_PANELS, MAX_STATS, MAX_TITLE) == (64, 64, 200)


def test_a_layout_at_every_limit_is_read():
    title = "é" * MAX_TITLE  # characters, not bytes
    parsed = parse_layout(panels(MAX_PANELS, title) + stats(MAX_STATS, title))

    assert len(parsed["panels"]) == MAX_PANELS
    assert len(parsed["stats"]) == MAX_STATS
    assert parsed["panels"][-1]["title"] == parsed["stats"][-1]["title"] == title


def test_div_run_refuses_a_title_with_a_nul_in_one_line_and_creates_no_run(div, tmp_path):
    # On PostgreSQL, storing it was a database error: no text there holds a NUL.
    (tmp_path / "telemetry.toml").write_text(panels(1, "loss\\u0000"))

    launched = div("run", str(tmp_path), "--", sys.executable, "-c", "pass")

    assert (launched.returncode, launched.stdout) == (1, "")
    assert launched.stderr == (
        "div: the API refused the run: telemetry [[panel]] 1 has a title with "
        '"\\u0000" in it; a title is one line of text\n'
    )
    assert not Run.objects.exists()


def test_div_run_refuses_a_layout_past_a_limit_and_creates_no_run(div, tmp_path):
    (tmp_path / "telemetry.toml").write_text(panels(MAX_PANELS + 1))

    launched = div("run", str(tmp_path), "--", sys.executable, "-c", "pass")

    assert (launched.returncode, launched.stdout) == (1, "")
    assert launched.stderr == (
        "div: the API refused the run: telemetry has 65 [[panel]] tables; a tab shows up to 64\n"
    )
    assert not Run.objects.exists()
