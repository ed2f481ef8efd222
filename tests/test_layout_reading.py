"""Reading the layout file `div run` is given: only a regular file, never past the 4 MiB a layout
may be, never waiting on a FIFO; whatever else is named is refused in the spec's one line, and
no run is made."""

from __future__ import annotations

import json
import os

import pytest

from telemetry.models import Run
from tests.test_cli import one_line_error

REFUSED = "div: the API refused the run: telemetry: cannot read "


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(
    "named, why",
    [
        ("/dev/zero", "is a device, not a file"),  # never ends: read whole, it took all memory
        ("fifo", "is a FIFO, not a file"),  # no writer: read, it waited forever
        ("folder", "is a directory"),
    ],
)
def test_a_layout_that_is_not_a_regular_file_is_refused_at_once(div, project, named, why):
    os.mkfifo(project / "fifo")
    (project / "folder").mkdir()
    path = named if named.startswith("/") else str(project / named)

    launched = div("run", str(project), "--telemetry", path, "--", "true", timeout=30)

    one_line_error(launched, 1, f"{REFUSED}{json.dumps(path)}: {why}")
    assert not Run.objects.exists()


def test_a_telemetry_toml_that_is_a_fifo_is_refused_at_once(div, project):
    os.mkfifo(project / "telemetry.toml")

    launched = div("run", str(project), "--", "true", timeout=30)

    path = json.dumps(str(project / "telemetry.toml"))
    one_line_error(launched, 1, f"{REFUSED}{path}: is a FIFO, not a file")
    assert not Run.objects.exists()


def test_a_layout_past_4_mib_is_refused_with_its_size(div, project):
    big = project / "big.toml"
    big.write_text("# " + "x" * (5 * 2**20) + "\n")

    launched = div("run", str(project), "--telemetry", str(big), "--", "true")

    size = big.stat().st_size
    one_line_error(
        launched,
        1,
        f"div: the API refused the run: telemetry is {size:,} bytes; "
        "a layout file is at most 4 MiB",
    )


def test_a_layout_with_an_odd_name_is_refused_on_one_line(div, project):
    odd = str(project / ("no\nsuch" + "-" * 240 + ".toml"))

    launched = div("run", str(project), "--telemetry", odd, "--", "true")

    one_line_error(launched, 1, f"{REFUSED}{json.dumps(odd[:200])}: no such file or directory")


def test_a_telemetry_toml_saved_with_a_byte_order_mark_is_read_as_without_one(div, project):
    # Notepad and other Windows editors save UTF-8 with a byte-order mark; TOML refuses one.
    layout = '[[panel]]\ntitle = "Loss"\ny = "loss"\n'
    (project / "telemetry.toml").write_bytes(b"\xef\xbb\xbf" + layout.encode())

    done = div("run", str(project), "--", "true")

    assert (done.returncode, done.stderr) == (0, "")
    run = Run.objects.get()
    assert run.layout.source == layout
    assert [panel["title"] for panel in run.layout.parsed["panels"]] == ["Loss"]
