"""One websocket per open Telemetry tab: the points after the seq the tab has, then live ones.

The protocol (docs/api.md has it for clients):

- The tab sends {"after": seq} once connected (and again after each reconnect); the socket
  answers with the stored points after it, then a status message, then forwards each batch
  the ingester commits. It only ever sends a seq once, so a reconnect leaves no gap and no
  duplicate. Another {"after": seq} on the same socket is refused: a socket starts once.
- Every points message carries an "ack" token, which the tab sends back as {"ack": token} once
  it has drawn the message. With more than flow.WINDOW_BYTES unacknowledged, the socket sends
  no more points until an ack comes: they wait in the database, not in the server's memory.
- A tab more than flow.MAX_BEHIND points short of the run is closed with BEHIND; it reads what
  it lacks from the REST API and reconnects after that.
- A status message follows every point sent before it, so "closed": true means the tab has all.

Closing codes: NOT_A_RUN when the path names no run, NOT_YOURS when the user may not see it (or
no longer may), LOGGED_OUT when the session is over (access.py re-checks each second), BEHIND,
and BAD_MESSAGES for a socket that keeps sending something else. After closing, the socket
sends nothing more and is in no group.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from telemetry import access, comparison, queries
from telemetry.access import LOGGED_OUT, NOT_YOURS, Pass
from telemetry.errors import Refused
from telemetry.flow import (
    RUN_PAGE_BYTES,
    RunsWindow,
    Window,
    new_token,
    pages,
    points_message,
    run_points_message,
)
from telemetry.live import group_for
from telemetry.models import Run, run_number

__all__ = ["LOGGED_OUT", "NOT_YOURS", "CompareConsumer", "RunConsumer"]

NOT_A_RUN = 4404
BEHIND = 4413  # like HTTP's 413: what the tab lacks is too much for the socket
BAD_MESSAGES = 4400
MAX_BAD_MESSAGES = 20
BACKLOG_BATCH = 2000  # points read from the database at a time
MAX_SEQ = 2**62  # past any run, and within what the database can compare
SEND_AFTER = 'send {"after": <the last seq you have>}'
STARTED_ALREADY = "this socket has started already; open another to start after another seq"
SEND_ACK = 'send {"ack": "<the ack of a points message you have drawn>"}'

log = logging.getLogger("divergent.sockets")


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.run_id = None  # set once the socket is let in and in its run's group
        self.cursor = None  # the last seq sent; None until the tab says where it is
        self.last = 0  # the run's last seq, as far as this socket knows
        self.window = Window()
        self.status_due = None  # the status to send once the tab has every point before it
        self.bad = 0
        await self.accept()  # then closed with a code the tab can tell apart: not a 403 page
        name = self.scope["url_route"]["kwargs"].get("name")
        number = run_number(name) if name else None
        if number is None or Run(pk=number).name != name:
            await self.not_a_run()
        granted = await self.grant(number)
        if granted is None:
            await self.shut(NOT_YOURS)
        self.run_id = number
        await self.channel_layer.group_add(group_for(number), self.channel_name)
        access.watch().add(self.channel_name, granted, self.channel_layer)

    async def disconnect(self, code):
        await self.leave()

    async def not_a_run(self):
        """A path that names no run, or no comparison of runs: one line in the server's log, the
        path escaped so that nothing a client puts in it can make it two, and NOT_A_RUN."""
        log.warning(
            "websocket %s names no run: closed with %d", ascii(self.scope["path"]), NOT_A_RUN
        )
        await self.shut(NOT_A_RUN)

    async def shut(self, code: int):
        """Close with code and stop: nothing is sent after the close, no group holds the socket,
        and nothing the client sends after it is read."""
        await self.leave()
        await self.close(code=code)
        raise StopConsumer

    async def leave(self):
        if self.run_id is not None:
            access.watch().discard(self.channel_name)
            await self.channel_layer.group_discard(group_for(self.run_id), self.channel_name)
            self.run_id = None

    # ---- what the tab sends -------------------------------------------------------------------

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        # Anything but the two messages gets a one-line answer, never a traceback.
        try:
            content = json.loads(text_data) if text_data else None
        except (ValueError, RecursionError):
            content = None
        if isinstance(content, dict) and "ack" in content:
            await self.acked(content["ack"])
        else:
            await self.resume(content.get("after") if isinstance(content, dict) else None)

    async def resume(self, after):
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            await self.refuse(SEND_AFTER)
            return
        if self.cursor is not None:
            # Once a socket: saying it again would send the same points again.
            await self.refuse(STARTED_ALREADY)
            return
        self.cursor = self.window.drawn = min(after, MAX_SEQ)
        state = await self.run_state()
        if state is None:
            await self.shut(NOT_YOURS)
        self.last = max(self.last, state.pop("points"))
        self.status_due = state
        if self.window.behind(self.last):
            await self.shut(BEHIND)
        await self.pump()

    async def acked(self, token):
        if not isinstance(token, str) or not self.window.ack(token):
            await self.refuse(SEND_ACK)
            return
        await self.pump()

    async def refuse(self, error: str):
        self.bad += 1
        if self.bad > MAX_BAD_MESSAGES:
            await self.shut(BAD_MESSAGES)
        await self.send_json({"type": "error", "error": error})

    # ---- what the channel layer brings --------------------------------------------------------

    async def run_points(self, event):
        if self.cursor is None:
            return  # the backlog read after the tab says hello will carry these
        self.last = max(self.last, event["last"])
        if self.window.behind(self.last):
            await self.shut(BEHIND)
        points = event["points"]
        if points is not None and points[0]["seq"] <= self.cursor + 1:
            # Straight on from the message: the live path, no database read.
            await self.send_points((p["seq"], p["data"]) for p in points if p["seq"] > self.cursor)
        await self.pump()  # whatever the message did not carry, or the window held back

    async def run_status(self, event):
        self.status_due = {"status": event["status"], "closed": event["closed"]}
        if self.cursor is not None:
            await self.flush_status()

    async def access_lost(self, event):
        await self.shut(event["code"])

    # ---- sending ------------------------------------------------------------------------------

    async def pump(self):
        """The stored points after the cursor, a page at a time, while the window has room."""
        while self.cursor < self.last and self.window.room():
            batch = await self.points_after(self.cursor)
            if not batch:
                self.last = self.cursor
                break
            await self.send_points(batch)
        await self.flush_status()

    async def send_points(self, points):
        for body, last in pages(points):
            if not self.window.room():
                return
            ack = new_token()
            text = points_message(body, ack)
            await self.send(text_data=text)
            self.window.sent(ack, len(text), last)
            self.cursor = last
            self.last = max(self.last, last)

    async def flush_status(self):
        if self.status_due is not None and self.cursor >= self.last:
            status, self.status_due = self.status_due, None
            await self.send_json({"type": "status", **status})

    # ---- the database -------------------------------------------------------------------------

    @database_sync_to_async
    def grant(self, number: int) -> Pass | None:
        user = self.scope.get("user")
        if not Run.objects.visible_to(user).filter(pk=number).exists():
            return None
        # A user set by other middleware has no session: only the user and run are re-checked.
        session = self.scope.get("session")
        return Pass(session.session_key if session is not None else None, user.pk, number)

    @database_sync_to_async
    def run_state(self) -> dict | None:
        run = Run.objects.filter(pk=self.run_id).only("status", "telemetry_closed", "points")
        run = run.first()
        if run is None:
            return None
        return {"status": run.status, "closed": run.telemetry_closed, "points": run.points}

    @database_sync_to_async
    def points_after(self, seq: int) -> list[tuple[int, dict]]:
        return list(queries.points(self.run_id, after=seq, upto=seq + BACKLOG_BATCH))


# ---- a comparison's socket: every running run of /compare/ on one websocket --------------------

SEND_AFTER_RUNS = 'send {"after": {"run-3": <the last seq you have of run-3>, ...}}, each run once'


def _seq(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass
class Follow:
    """Where a comparison's socket is with one of its runs, as a run's socket is with its one."""

    name: str
    cursor: int | None = None  # the last seq sent; None until the page says where it is
    last: int = 0  # the run's last seq, as far as this socket knows
    status_due: dict | None = None


class CompareConsumer(RunConsumer):
    """/ws/compare/run-3,run-7/: each run listed as /ws/runs/ sends it (its points after the
    seq the page has, then live ones, each seq once, then its status, each message naming its
    run), all in one window of unacknowledged bytes. Let in only when the user may see every
    run listed, and closed as soon as one of them is no longer theirs (docs/api.md)."""

    async def connect(self):
        self.run_id = None  # RunConsumer's; a comparison follows runs instead
        self.follows: dict[int, Follow] = {}  # run id -> its Follow, once let in
        self.started = False
        self.window = RunsWindow()
        self.bad = 0
        await self.accept()
        listed = self.scope["url_route"]["kwargs"].get("runs") or ""
        try:
            numbers = comparison.run_numbers(listed)
        except Refused:
            numbers = []
        # Only as the page writes it: each run once, by its full name.
        if not numbers or ",".join(Run(pk=n).name for n in numbers) != listed:
            await self.not_a_run()
        granted = await self.grant_all(numbers)
        if granted is None:
            await self.shut(NOT_YOURS)
        self.follows = {n: Follow(Run(pk=n).name) for n in numbers}
        for number in numbers:
            await self.channel_layer.group_add(group_for(number), self.channel_name)
        access.watch().add(self.channel_name, granted, self.channel_layer)

    async def leave(self):
        if self.follows:
            access.watch().discard(self.channel_name)
            for number in self.follows:
                await self.channel_layer.group_discard(group_for(number), self.channel_name)
            self.follows = {}

    async def resume(self, after):
        names = {follow.name: number for number, follow in self.follows.items()}
        well_said = isinstance(after, dict) and set(after) == set(names)
        if not well_said or not all(map(_seq, after.values())):
            await self.refuse(SEND_AFTER_RUNS)
            return
        if self.started:
            await self.refuse(STARTED_ALREADY)
            return
        self.started = True
        for name, number in names.items():
            self.follows[number].cursor = self.window.drawn_of[number] = min(after[name], MAX_SEQ)
        states = await self.run_states()
        if states is None:
            await self.shut(NOT_YOURS)
        for number, follow in self.follows.items():
            follow.last = max(follow.last, states[number].pop("points"))
            follow.status_due = states[number]
        if any(self.window.run_behind(n, f.last) for n, f in self.follows.items()):
            await self.shut(BEHIND)
        await self.pump()

    async def run_points(self, event):
        number = event.get("run")
        follow = self.follows.get(number)
        if follow is None or follow.cursor is None:
            return  # the backlog read after the page says hello will carry these
        follow.last = max(follow.last, event["last"])
        if self.window.run_behind(number, follow.last):
            await self.shut(BEHIND)
        points = event["points"]
        if points is not None and points[0]["seq"] <= follow.cursor + 1:
            # Straight on from the message: the live path, no database read.
            fresh = [(p["seq"], p["data"]) for p in points if p["seq"] > follow.cursor]
            await self.send_points(number, fresh)
        await self.pump()

    async def run_status(self, event):
        follow = self.follows.get(event.get("run"))
        if follow is None:
            return
        follow.status_due = {"status": event["status"], "closed": event["closed"]}
        if follow.cursor is not None:
            await self.flush_status()

    async def pump(self):
        """Each run's stored points after its cursor, a page of each in turn, while the window
        has room: no run waits for another's backlog."""
        moved = True
        while moved and self.window.room():
            moved = False
            for number, follow in self.follows.items():
                if follow.cursor is None or follow.cursor >= follow.last or not self.window.room():
                    continue
                batch = await self.points_after(number, follow.cursor)
                if not batch:
                    follow.last = follow.cursor
                    continue
                await self.send_points(number, batch)
                moved = True
        await self.flush_status()

    async def send_points(self, number, points):
        follow = self.follows[number]
        for body, last in pages(points, RUN_PAGE_BYTES):
            if not self.window.room():
                return
            ack = new_token()
            text = run_points_message(follow.name, body, ack)
            await self.send(text_data=text)
            self.window.sent_of(number, ack, len(text), last)
            follow.cursor = last
            follow.last = max(follow.last, last)

    async def flush_status(self):
        for follow in self.follows.values():
            due = follow.status_due
            if due is not None and follow.cursor is not None and follow.cursor >= follow.last:
                follow.status_due = None
                await self.send_json({"type": "status", "run": follow.name, **due})

    @database_sync_to_async
    def grant_all(self, numbers: list[int]) -> Pass | None:
        """A pass for the runs, when the user may see every one of them; else None."""
        user = self.scope.get("user")
        if Run.objects.visible_to(user).filter(pk__in=numbers).count() != len(numbers):
            return None
        session = self.scope.get("session")
        key = session.session_key if session is not None else None
        return Pass(key, user.pk, None, frozenset(numbers))

    @database_sync_to_async
    def run_states(self) -> dict[int, dict] | None:
        found = Run.objects.filter(pk__in=list(self.follows))
        states = {
            run.pk: {"status": run.status, "closed": run.telemetry_closed, "points": run.points}
            for run in found.only("status", "telemetry_closed", "points")
        }
        return states if len(states) == len(self.follows) else None

    @database_sync_to_async
    def points_after(self, number: int, seq: int) -> list[tuple[int, dict]]:
        return list(queries.points(number, after=seq, upto=seq + BACKLOG_BATCH))
