"""From a real training script to `div telemetry`, through processes of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from telemetry import queries
from telemetry.models import Drop, Key, Run
from tests.conftest import ROOT, wait_for

SECRET = 'hunter2"\\x'

TRAIN = textwrap.dedent(
    r"""
    import json, os, time

    path = os.environ["DIVERGENT_TELEMETRY_PATH"]
    token = os.environ["HF_TOKEN"]
    with open(path, "a") as f:
        def write(text):
            f.write(text)
            f.flush()

        write(json.dumps({"step": 100, "loss": 2.31, "eval": {"loss": 1.88}}) + "\n")
        write(json.dumps({"step": 200, "loss": float("nan"), "lr": 3e-4, "note": "warm",
                          "ok": True, "gone": None, "sizes": [1, 2]}) + "\n")
        write("not json at all\n")
        write(json.dumps({"step": 300, "blob": "x" * 5000}) + "\n")
        write(json.dumps({f"k{i}": i for i in range(65)}) + "\n")
        write(json.dumps({"step": 400, "train/loss": 0.5, "loss": 0.0412}) + "\n")
        write(json.dumps({"step": 500, "token": token, "loss": 0.0398}) + "\n")
        write('{"step": 600, "lo')
        time.sleep(0.6)
        write('ss": 0.05}\n')
        write("[1, 2, 3]\n")
    print("training with", token)
    print("done")
    """
)


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    return folder


def test_a_run_of_a_real_script_prints_every_format_of_the_spec(div, project):
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET + "\n").returncode == 0

    launched = div("run", str(project), "--", sys.executable, "train.py")

    assert launched.returncode == 0, launched.stderr
    name = Run.objects.get().name
    assert launched.stdout.splitlines()[0] == name
    assert "training with ***" in launched.stdout
    assert "hunter2" not in launched.stdout

    keys = div("telemetry", name)
    assert keys.stdout == (
        "key        count  last     min      max\n"
        "step       5      600      100      600\n"
        "loss       4      0.05     0.0398   2.31\n"
        "eval.loss  1      1.88     1.88     1.88\n"
        "lr         1      0.0003   0.0003   0.0003\n"
    )
    assert keys.stderr == (
        "telemetry: dropped a line that is not JSON; write one JSON object per line\n"
        "telemetry: dropped a line that is not a JSON object; write one JSON object per line\n"
        "telemetry: dropped a line over 4 KiB; keep each line to 4,096 bytes\n"
        "telemetry: dropped a line with more than 64 numbers; split the numbers across lines\n"
        "telemetry: left out a key that is not letters, digits, _ and - between dots; "
        "write train.loss, not train/loss\n"
        "telemetry: loss: 1 value passed over as NaN or Infinity, first at step 200\n"
    )

    tsv = div("telemetry", name.removeprefix("run-"), "loss", "eval.loss")
    assert tsv.stdout == (
        "step\tloss\teval.loss\n100\t2.31\t1.88\n400\t0.0412\t\n500\t0.0398\t\n600\t0.05\t\n"
    )

    by_seq = div("telemetry", name, "lr", "--x", "epoch")
    assert by_seq.stdout == "epoch\tlr\n\t0.0003\n"
    assert f'telemetry: {name} has no key "epoch" yet; its column is empty' in by_seq.stderr

    every = div("telemetry", name, "--csv")
    assert every.stdout == (
        "step,loss,eval.loss,lr\n"
        "100,2.31,1.88,\n"
        "200,,,0.0003\n"
        "400,0.0412,,\n"
        "500,0.0398,,\n"
        "600,0.05,,\n"
    )

    lines = div("telemetry", name, "--json").stdout.splitlines()
    assert lines[0] == '{"seq": 1, "data": {"step": 100, "loss": 2.31, "eval.loss": 1.88}}'
    assert lines[1] == '{"seq": 2, "data": {"step": 200, "lr": 0.0003}}'
    assert len(lines) == 5

    followed = div("telemetry", name, "loss", "-f")
    assert followed.stdout.splitlines()[-1] == "600\t0.05"

    log = div("log", name).stdout
    assert "hunter2" not in log
    assert "telemetry: dropped a line that is not JSON; write one JSON object per line\n" in log
    assert log.count("not JSON;") == 1
    assert "telemetry: left out a key that is not letters" in log


def test_the_run_records_how_the_command_ended(div, project):
    (project / "fail.py").write_text("import sys\nprint('bad')\nsys.exit(3)\n")

    launched = div("run", str(project), "--", sys.executable, "fail.py")

    assert launched.returncode == 3
    run = Run.objects.get()
    assert (run.status, run.exit_code, run.telemetry_closed) == ("failed", 3, True)
    assert run.started is not None and run.ended is not None


def test_a_refused_layout_creates_no_run(div, project):
    (project / "telemetry.toml").write_text('[[panel]]\ny = "loss"\n[[panel]]\nscael = "log"\n')

    launched = div("run", str(project), "--", sys.executable, "train.py")

    assert launched.returncode == 1
    assert launched.stderr == (
        'div: the API refused the run: telemetry [[panel]] 2 has "scael", which is not one of '
        "title, x, y, scale, min, max, rule, wide\n"
    )
    assert launched.stdout == ""
    assert not Run.objects.exists()


def test_a_run_is_laid_out_by_the_file_named_with_telemetry(div, project, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text('[[panel]]\ntitle = "Loss"\ny = "loss"\nscale = "log"\n')

    launched = div("run", str(project), "--telemetry", str(other), "--", sys.executable, "-c", "1")

    assert launched.returncode == 0, launched.stderr
    layout = Run.objects.get().layout
    assert layout.source == other.read_text()
    assert layout.parsed["panels"][0]["scale"] == "log"


def test_a_detached_run_returns_at_once_and_goes_on(div, project):
    (project / "slow.py").write_text(
        "import json, os, time\n"
        "time.sleep(1)\n"
        "open(os.environ['DIVERGENT_TELEMETRY_PATH'], 'a').write(json.dumps({'step': 1}) + '\\n')\n"
    )

    launched = div("run", str(project), "--detach", "--", sys.executable, "slow.py")

    assert launched.returncode == 0
    assert launched.stdout == f"{Run.objects.get().name}\n"
    assert Run.objects.get().status == "running"
    wait_for(lambda: Run.objects.filter(telemetry_closed=True, points=1).exists(), what="the run")
    assert Run.objects.get().status == "succeeded"


def test_bad_input_gets_one_line_and_a_non_zero_exit(div):
    unknown_run = div("telemetry", "run-99")
    assert (unknown_run.returncode, unknown_run.stderr) == (
        1,
        'div: there is no run "run-99"; div telemetry lists the runs\n',
    )
    unknown_flag = div("telemetry", "--bogus")
    assert unknown_flag.returncode == 2
    assert unknown_flag.stderr == (
        "div telemetry: unrecognized arguments: --bogus; div telemetry --help lists the options\n"
    )
    unknown_command = div("telemtry", "run-1")
    assert (unknown_command.returncode, unknown_command.stderr) == (
        2,
        'div: there is no command "telemtry"; div help lists them\n',
    )
    no_command = div("run", ".")
    assert no_command.returncode == 1
    assert "Traceback" not in no_command.stderr
    assert no_command.stderr.count("\n") == 1


def test_secrets_are_listed_by_name_and_never_shown(div):
    assert div("org", "add", "acme").returncode == 0
    div("secrets", "set", "acme", "WANDB_KEY", input="s3cret-value")
    div("secrets", "set", "acme", "HF_TOKEN", input="other-value")

    listed = div("secrets", "list", "acme")

    assert listed.stdout == "HF_TOKEN\nWANDB_KEY\n"
    assert div("secrets", "delete", "acme", "HF_TOKEN").returncode == 0
    assert div("secrets", "list", "acme").stdout == "WANDB_KEY\n"


def test_an_ingester_killed_mid_file_resumes_with_every_line_stored_once(div, home):
    from telemetry import services

    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    total = 150_000
    with open(run.telemetry_path, "w") as f:
        for step in range(1, total + 1):
            f.write(json.dumps({"step": step, "loss": 1 / step, "lr": 3e-4, "gn": 1.5}) + "\n")
    services.run_finish(run=run, exit_code=0)

    first = subprocess.Popen(
        [sys.executable, "-m", "divergent", "ingest"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stored = wait_for(lambda: Run.objects.get(pk=run.pk).points, what="a first batch")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert stored < total, "the ingester finished before it was killed: nothing was tested"

    resumed = div("ingest", "--once")

    assert resumed.returncode == 0, resumed.stderr
    run.refresh_from_db()
    assert (run.points, run.telemetry_closed) == (total, True)
    steps = sorted(data["step"] for _, data in queries.points(run.pk))
    assert steps == list(range(1, total + 1))
    assert Key.objects.get(run=run, name="step").count == total
    assert not Drop.objects.filter(run=run).exists()


def test_follow_prints_points_as_they_arrive_and_stops_when_the_run_ends(div, project):
    go = project / "go"
    (project / "paced.py").write_text(
        "import json, os, time\n"
        "path = os.environ['DIVERGENT_TELEMETRY_PATH']\n"
        "open(path, 'a').write(json.dumps({'step': 1, 'loss': 0.5}) + '\\n')\n"
        "deadline = time.monotonic() + 60\n"
        "while not os.path.exists('go') and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "open(path, 'a').write(json.dumps({'step': 2, 'loss': 0.25}) + '\\n')\n"
    )
    launched = div("run", str(project), "--detach", "--", sys.executable, "paced.py")
    name = launched.stdout.strip()
    wait_for(lambda: Run.objects.filter(points=1).exists(), what="the first point")

    follower = subprocess.Popen(
        [sys.executable, "-m", "divergent", "telemetry", name, "loss", "-f"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout.readline() == "step\tloss\n"
        assert follower.stdout.readline() == "1\t0.5\n"
        assert follower.poll() is None, "follow stopped while the run goes on"
        (Run.objects.get().files_path / "go").touch()
        assert follower.stdout.readline() == "2\t0.25\n"
        assert follower.wait(timeout=30) == 0
    finally:
        follower.kill()
    assert Run.objects.get().telemetry_closed
    assert not go.exists(), "the run worked in its shipped copy, never in DIR"


def supervisor_of(name: str) -> int | None:
    """The pid of the process supervising a detached run."""
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"supervise" in words and name.encode() in words:
            return int(proc.name)
    return None


def test_a_detached_run_stopped_by_a_signal_records_how_it_ended(div, project):
    (project / "long.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    name = div("run", str(project), "--detach", "--", sys.executable, "long.py").stdout.strip()
    wait_for(lambda: "started" in (Run.objects.get().log_path.read_text()), what="the command")

    os.kill(wait_for(lambda: supervisor_of(name), what="the supervisor"), signal.SIGTERM)

    wait_for(lambda: not Run.objects.get().is_live, what="the run to end")
    run = Run.objects.get()
    assert (run.status, run.exit_code) == ("failed", 143)
