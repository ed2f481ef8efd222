"""Telling the open Telemetry tabs that a run has new points, and the open dashboards that a run
changed, through the channel layer."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

# Past this many points a message only says how far the run has got, and each tab reads
# the points from the database: a channel layer is no place for a 200,000-point backlog.
MAX_POINTS_PER_MESSAGE = 500


def group_for(run_id: int) -> str:
    """The one group a run's tabs listen on."""
    return f"run-{run_id}"


def points_message(points: list[tuple[int, dict]], last: int) -> dict:
    """A batch's (seq, data) pairs as the tabs receive them; a big batch only says how far the
    run has got, so its points are never copied into a message that will not carry them."""
    if len(points) > MAX_POINTS_PER_MESSAGE:
        return {"type": "run.points", "last": last, "points": None}
    carried = [{"seq": seq, "data": data} for seq, data in points]
    return {"type": "run.points", "last": last, "points": carried}


def notify(run_id: int, message: dict) -> None:
    layer = get_channel_layer()
    if layer is not None:
        # The run named too: a comparison's socket listens on several runs' groups.
        async_to_sync(layer.group_send)(group_for(run_id), {**message, "run": run_id})


def notify_points(run_id: int, points: list[tuple[int, dict]], last: int) -> None:
    notify(run_id, points_message(points, last))
    notify_changed(run_id)


def notify_status(run_id: int, status: str, closed: bool) -> None:
    notify(run_id, {"type": "run.status", "status": status, "closed": closed})
    notify_changed(run_id)


# ---- the dashboard: what changed, never the points ------------------------------------------


def changes_group_for(run_id: int) -> str:
    """The group of the dashboards showing a run's row: told that it changed, with no points,
    so a page of 50 rows never receives 50 runs' points to learn their statuses."""
    return f"run-{run_id}.changes"


def notify_changed(run_id: int) -> None:
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(
            changes_group_for(run_id), {"type": "run.changed", "run": run_id}
        )
