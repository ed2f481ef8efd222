"""Following until the end, written once (pure, in telemetry/following.py): div log -f and
div telemetry -f, of one run or several, locally or over the API."""

from __future__ import annotations

import io

import pytest

from telemetry import following, logs, services
from telemetry.following import Look

pytest_plugins = ["tests.personas"]


@pytest.mark.parametrize(
    "looks, follow, waits",
    [
        ([Look.GOING, Look.GOING, Look.ENDED], True, 2),  # a pause between looks
        ([Look.MORE, Look.MORE, Look.ENDED], True, 0),  # more at once: no pause
        ([Look.GOING], False, 0),  # one look without -f
        ([Look.MORE, Look.GOING], False, 0),  # ...and the pages a full one asks for
        ([Look.ENDED], True, 0),
    ],
)
def test_following_looks_until_the_end_with_one_pause_a_round(looks, follow, waits):
    said = iter(looks)
    paused: list[float] = []

    following.follow(lambda: next(said), follow=follow, pause=0.2, wait=paused.append)

    assert paused == [0.2] * waits
    assert next(said, None) is None  # every look was made, and no more


@pytest.mark.database
def test_an_attached_run_prints_what_is_written_to_its_log_after_its_end_is_recorded(make_run):
    """The run's end is recorded before its ingester has drained the telemetry and written
    its notes: an attached div run prints them, since it follows until its supervisor is done,
    not until the run's status says ended."""
    run = make_run().run
    services.run_finish(run=run, exit_code=0)
    run.log_path.write_bytes(b"line 1\n")
    supervisor_done = []

    def meanwhile(_seconds: float) -> None:
        services.log_append(run, "telemetry: a note of the ingester's\n")
        supervisor_done.append(True)

    printed = io.BytesIO()
    logs.follow(run, printed, follow=True, wait=meanwhile, done=lambda: bool(supervisor_done))

    assert printed.getvalue() == b"line 1\ntelemetry: a note of the ingester's\n"
