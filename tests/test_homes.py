"""Two DIVERGENT_HOMEs on one database: each ingester takes only the runs whose files its own
home holds, so a server never closes another machine's run with none of its points."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import textwrap
import time

from telemetry import homes, services
from telemetry.ingest import Ingester
from telemetry.models import Run
from tests.browser import serve, stop
from tests.conftest import ROOT, wait_for

LINES = 200

WRITER = textwrap.dedent(
    f"""\
    import json, os, time
    with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
        for step in range(1, {LINES} + 1):
            f.write(json.dumps({{"step": step, "loss": 1 / step}}) + "\\n")
            f.flush()
            if step % 50 == 0:
                time.sleep(0.3)
    """
)


def test_the_servers_ingester_never_takes_a_run_whose_files_another_home_holds(div, tmp_path):
    served = serve(div.env, tmp_path / "serve.out")  # home A's ingester, started first
    other = tmp_path / "other-home"
    other.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "writer.py").write_text(WRITER)
    env_b = {**div.env, "DIVERGENT_HOME": str(other)}
    owners: set[str] = set()
    # Home B's own ingester is kept back at first, so the server has every chance to take the
    # run: it looks every 0.2 s, and the run waits a second for B's.
    held = open(other / "ingester.lock", "a")
    fcntl.flock(held, fcntl.LOCK_SH)
    launched = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--", sys.executable, "writer.py"],
        env=env_b,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ingesting = None
    try:
        run = wait_for(lambda: Run.objects.first(), 30, "the run to be made")

        def watch():
            owners.add(Run.objects.get(pk=run.pk).lease_owner)

        # An observation window, not a wait for a condition: "never" is watched for 5 passes.
        until = time.monotonic() + 1.0
        while time.monotonic() < until:
            watch()
            time.sleep(0.02)
        ingesting = subprocess.Popen(
            [sys.executable, "-m", "divergent", "ingest"], env=env_b, cwd=ROOT
        )
        fcntl.flock(held, fcntl.LOCK_UN)

        def closed() -> bool:
            watch()
            return Run.objects.get(pk=run.pk).telemetry_closed

        wait_for(closed, 60, "the run's telemetry to close")
        out, err = launched.communicate(timeout=30)
    finally:
        held.close()
        launched.kill()
        if ingesting is not None:
            stop(ingesting)
        stop(served.process)

    assert launched.returncode == 0, err
    run = Run.objects.get()
    assert (run.status, run.points) == ("succeeded", LINES)
    server = f":{served.process.pid}:"
    assert not [owner for owner in owners if server in owner], owners
    assert run.home == (other / homes.HOME_ID_FILE).read_text().strip()
    assert "Traceback" not in served.said()


def test_a_run_made_before_homes_were_recorded_is_taken_by_the_home_that_holds_its_folder(
    home, transactional_db, tmp_path, settings
):
    run = services.run_create(org=services.org_get_or_create(), command=["train"])
    Run.objects.filter(pk=run.pk).update(home="")
    run.telemetry_path.write_text(json.dumps({"step": 1}) + "\n")

    elsewhere = tmp_path / "elsewhere"
    settings.DIVERGENT_HOME, settings.RUNS_DIR = elsewhere, elsewhere / "runs"
    assert Ingester().tail_once() is False  # its folder is not in this home: left alone
    assert Run.objects.get().home == ""

    settings.DIVERGENT_HOME, settings.RUNS_DIR = home, home / "runs"
    assert Ingester().tail_once() is True
    run.refresh_from_db()
    assert (run.home, run.points) == (homes.home_id(), 1)
