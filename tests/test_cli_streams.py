"""`div` when its stdout is not a terminal that reads: closed by the shell (`>&-`), a full disk
(`> /dev/full`), or a reader that went away before reading (`| head -1`, `| true`). Printing
stops; what was running goes on to its end; a command that only prints says why in one line."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from telemetry.models import Run
from tests.conftest import ROOT
from tests.test_cli import one_line_error

WRITER = """\
import json, os, sys
with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
    for i in range(1, 1001):
        f.write(json.dumps({"step": i, "loss": 1 / i}) + "\\n")
        print("wrote", i, flush=True)
sys.exit(3)
"""
FULL = "div: cannot write to stdout (No space left on device)"


def div_into(env: dict, args: list[str], stdout: str) -> subprocess.CompletedProcess:
    """`div ARGS` with its stdout sent as a shell sends it: `>&-`, `> /dev/full`, ..."""
    command = shlex.join([sys.executable, "-m", "divergent", *args])
    return subprocess.run(
        f"{command} {stdout}",
        shell=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def div_to_a_gone_reader(env: dict, args: list[str]) -> subprocess.CompletedProcess:
    """`div ARGS | head -1`, its reader gone before the first write: every write fails (EPIPE),
    whatever the timing."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "divergent", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.fixture
def finished_run(div, tmp_path) -> str:
    """A run of 1,000 points and 1,000 lines of log, all stored: its name."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "writer.py").write_text(WRITER)
    made = div("run", str(project), "--", sys.executable, "writer.py")
    assert made.returncode == 3, made.stderr
    return made.stdout.split()[0]


def reading_commands(name: str) -> list[list[str]]:
    return [
        ["telemetry"],
        ["telemetry", name],
        ["telemetry", name, "loss"],
        ["telemetry", name, "--json"],
        ["log", name],
        ["token", "list", "--user", "admin"],
        ["secrets", "list", "default"],
        ["--help"],
        ["telemetry", "--help"],
    ]


def test_a_closed_stdout_leaves_every_reading_command_quiet_and_successful(div, finished_run):
    div("user", "add", "admin")
    div("secrets", "set", "default", "HF_TOKEN", input="s3cret-value")

    for args in reading_commands(finished_run):
        done = div_into(div.env, args, ">&-")
        assert (done.returncode, done.stderr) == (0, ""), args


def test_a_reading_command_whose_stdout_is_full_says_so_in_one_line(div, finished_run):
    div("user", "add", "admin")
    div("secrets", "set", "default", "HF_TOKEN", input="s3cret-value")

    for args in reading_commands(finished_run):
        one_line_error(div_into(div.env, args, "> /dev/full"), 1, FULL)


def test_a_reader_gone_before_reading_ends_every_reading_command_quietly_with_0(div, finished_run):
    """As `set -o pipefail; div telemetry run-7 loss | head -1` needs: 0, and nothing said."""
    div("user", "add", "admin")
    div("secrets", "set", "default", "HF_TOKEN", input="s3cret-value")

    for args in reading_commands(finished_run):
        done = div_to_a_gone_reader(div.env, args)
        assert (done.returncode, done.stderr) == (0, ""), args


def test_head_takes_the_first_line_of_thirty_thousand_points_and_div_exits_0(div, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    script = (
        "import json, os\n"
        "with open(os.environ['DIVERGENT_TELEMETRY_PATH'], 'a') as f:\n"
        "    for i in range(1, 30001):\n"
        "        f.write(json.dumps({'step': i, 'loss': 1 / i}) + '\\n')\n"
    )
    name = div("run", str(project), "--", sys.executable, "-c", script).stdout.split()[0]
    command = shlex.join([sys.executable, "-m", "divergent", "telemetry", name, "loss"])

    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{command} | head -2"],
        env=div.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "step\tloss\n1\t1.0\n", "")


@pytest.mark.parametrize("stdout", [">&-", "> /dev/full"], ids=["closed", "full"])
def test_div_run_whose_stdout_fails_still_runs_its_command_to_the_end(div, tmp_path, stdout):
    project = tmp_path / "project"
    project.mkdir()
    (project / "writer.py").write_text(WRITER)

    launched = div_into(div.env, ["run", str(project), "--", sys.executable, "writer.py"], stdout)

    assert (launched.returncode, launched.stderr) == (3, "")  # the command's exit code
    run = Run.objects.get()
    assert (run.status, run.exit_code, run.telemetry_closed, run.points) == (
        "failed",
        3,
        True,
        1000,
    )
    assert "wrote 1000\n" in run.log_path.read_text()
