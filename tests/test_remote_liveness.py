"""A remote run's supervisor is a `div` that speaks over the API: judged by its silence alone,
2 minutes by default, whatever its host and pid say to this machine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from telemetry.supervision import gone

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TWO_MINUTES = timedelta(seconds=120)


def judged(silent: float, *, alive: bool | None, heartbeat: bool = True) -> bool:
    return gone(
        heartbeat=NOW - timedelta(seconds=silent) if heartbeat else None,
        host="gpu-7",
        pid=4242,
        created=NOW - timedelta(seconds=silent),
        now=NOW,
        alive=lambda host, pid: alive,
        booted=NOW - timedelta(days=1),
        remote_after=TWO_MINUTES,
    )


def test_a_remote_run_is_lost_after_two_minutes_of_silence_and_not_before():
    assert not judged(119, alive=None)
    assert judged(121, alive=None)


def test_a_remote_run_is_never_judged_by_a_pid_of_this_machine():
    # Its host may share this machine's name (a container, a test): its pid means nothing here.
    assert not judged(5, alive=False)
    assert judged(121, alive=True)


def test_a_remote_run_never_heard_from_is_judged_by_when_it_was_made():
    assert not judged(60, alive=None, heartbeat=False)
    assert judged(121, alive=None, heartbeat=False)
