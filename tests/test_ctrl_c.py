"""Ctrl-C on an attached `div run` stops its printing, never the recording of how the command
ended: the command has the Ctrl-C too (passed on to its process group, which is not the
terminal's), and its end is recorded before div run exits (130)."""

from __future__ import annotations

import signal
import subprocess
import sys

from telemetry.models import Run
from tests.conftest import ROOT

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
        # To div run alone, as a terminal's Ctrl-C is: its command, in a process group of its
        # own, has it from div run.
        launched.send_signal(signal.SIGINT)
        out, err = launched.communicate(timeout=60)
    finally:
        launched.kill()

    assert (launched.returncode, err) == (130, b"\n")  # click's newline after a ^C
    run = Run.objects.get()
    assert (run.status, run.exit_code) == ("failed", 130)  # the command ended by SIGINT
    assert b"went" not in out
