"""Ctrl-C on an attached `div run` stops its printing, never the recording of how the command
ended: the command had the Ctrl-C too, and its end is recorded before div run exits (130)."""

from __future__ import annotations

import signal
import subprocess
import sys

from telemetry.models import Run
from tests.conftest import ROOT, wait_for

WAITS = (
    "import os, time\n"
    "print('waiting', flush=True)\n"
    "while not os.path.exists('go'):\n"
    "    time.sleep(0.02)\n"
    "print('went', flush=True)\n"
)


def test_ctrl_c_on_an_attached_div_run_still_records_how_its_command_ended(div, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "waits.py").write_text(WAITS)
    launched = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--", sys.executable, "waits.py"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert launched.stdout.readline().startswith(b"run-")
        assert launched.stdout.readline() == b"waiting\n"
        # To div run alone: its command, as one outside the terminal's group, goes on.
        launched.send_signal(signal.SIGINT)
        run = Run.objects.get()
        wait_for(lambda: run.files_path.is_dir())
        (run.files_path / "go").touch()
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert (launched.returncode, err) == (130, b"\n")  # click's newline after a ^C
    run.refresh_from_db()
    assert (run.status, run.exit_code) == ("succeeded", 0)
