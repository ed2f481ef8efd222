"""The dashboard's websocket: the rows on its screen kept live, and no more.

The protocol (docs/api.md has it for clients):

- The page sends {"watch": ["run-3", "run-7", ...]}: the runs on its screen, up to MAX_WATCH,
  again whenever the rows change. Each must be a run the user sees, or the socket closes with
  NOT_YOURS, as a run's socket does: it never says anything of another org's run.
- The socket answers with a "runs" message holding each watched run's row state (status,
  points, duration...), then another whenever some of them change, holding those alone. A run
  changing is told on its own status-only group (live.changes_group_for), which carries no
  points: fifty rows cost fifty small notes, not fifty runs' points.
- Bounded as a run's socket is (flow.py's idea, with a window of one message): each "runs"
  message carries an ack token, and the next is sent only once the page sends it back. Changes
  meanwhile are kept as a set of run ids, the newest state read when it is sent, so a page that
  stops reading costs one message and the set, however much changes.
- The states are read from the database, at most every FLUSH_SECONDS, and every
  REFRESH_SECONDS whatever was told: a change made by a process whose notes never reach this
  one (`div run` starting its command, or making a run, in a process of its own) still shows.
- Runs made since the socket opened that the user sees are told as {"created": ["run-12"]} in
  the next "runs" message (found by the same refresh): the page decides whether its view
  shows them.

Closing codes are the run socket's (access.py re-checks the session, the user and every
watched run each second): LOGGED_OUT, NOT_YOURS, BAD_MESSAGES.
"""

from __future__ import annotations

import asyncio
import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils import timezone

from telemetry import access, live
from telemetry.access import LOGGED_OUT, NOT_YOURS, Pass
from telemetry.consumers import RunConsumer
from telemetry.flow import new_token
from telemetry.models import Run, run_number

MAX_WATCH = 100  # rows a page may watch: two pages' worth
MAX_CREATED = 50  # new runs told in one message; the page re-reads its view anyway
FLUSH_SECONDS = 0.25
REFRESH_SECONDS = 2.0
SEND_WATCH = f'send {{"watch": [<the names of the runs on screen>]}}, up to {MAX_WATCH} of them'
SEND_ACK = 'send {"ack": "<the ack of the last runs message>"}'
FIELDS = ("pk", "status", "points", "telemetry_closed", "exit_code", "started", "ended")


def row_state(values: dict, now) -> dict:
    """What a row shows of a run that can change while it is on screen."""
    started, ended = values["started"], values["ended"]
    duration = None if started is None else ((ended or now) - started).total_seconds()
    closed = values["telemetry_closed"]
    status = values["status"]
    return {
        "name": Run(pk=values["pk"]).name,
        "status": status,
        "points": values["points"],
        "closed": closed,
        "unread": status != Run.Status.RUNNING and not closed,
        "exit_code": values["exit_code"],
        "started": started,
        "ended": ended,
        "duration": duration,
    }


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.watched: dict[int, dict | None] = {}  # run id -> the state last sent
        self.dirty: set[int] = set()  # watched runs told to have changed since
        self.created: list[str] = []
        self.newest = 0  # the newest run the user saw when the socket opened, or told since
        self.unacked: str | None = None
        self.granted: Pass | None = None
        self.groups_in: set[str] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.ticker: asyncio.Task | None = None
        self.last_flush = 0.0
        self.bad = 0
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.shut(LOGGED_OUT)
        session = self.scope.get("session")
        self.granted = Pass(session.session_key if session is not None else None, user.pk, None)
        self.newest = await self.newest_run()
        access.watch().add(self.channel_name, self.granted, self.channel_layer)
        self.ticker = asyncio.get_running_loop().create_task(self.tick_forever())

    # As a run's socket does: closed for good (nothing sent after, in no group, nothing more
    # read), and a one-line error for what is not the protocol, closing after too many.
    disconnect = RunConsumer.disconnect
    shut = RunConsumer.shut
    refuse = RunConsumer.refuse

    async def leave(self):
        if self.granted is not None:
            access.watch().discard(self.channel_name)
            self.granted = None
        for task in (self.ticker, self.timer):
            if task is not None:
                task.cancel()
        self.ticker = self.timer = None
        for group in list(self.groups_in):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_in.clear()

    async def join(self, group: str):
        await self.channel_layer.group_add(group, self.channel_name)
        self.groups_in.add(group)

    # ---- what the page sends ------------------------------------------------------------------

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        try:
            content = json.loads(text_data) if text_data else None
        except (ValueError, RecursionError):
            content = None
        if isinstance(content, dict) and "ack" in content:
            await self.acked(content["ack"])
        elif isinstance(content, dict) and "watch" in content:
            await self.watch(content["watch"])
        else:
            await self.refuse(SEND_WATCH)

    async def watch(self, names):
        numbers = _numbers(names)
        if numbers is None:
            await self.refuse(SEND_WATCH)
            return
        if await self.visible(numbers) != numbers:
            await self.shut(NOT_YOURS)
        for run_id in set(self.watched) - numbers:
            await self.channel_layer.group_discard(
                live.changes_group_for(run_id), self.channel_name
            )
            self.groups_in.discard(live.changes_group_for(run_id))
            del self.watched[run_id]
        for run_id in numbers - set(self.watched):
            await self.join(live.changes_group_for(run_id))
            self.watched[run_id] = None
        self.granted = Pass(
            self.granted.session_key, self.granted.user_id, None, frozenset(numbers)
        )
        access.watch().add(self.channel_name, self.granted, self.channel_layer)
        # Every run newly watched is sent once, whatever the page was sent before.
        self.dirty |= {run_id for run_id, sent in self.watched.items() if sent is None}
        self.last_flush = 0.0
        await self.flush()

    async def acked(self, token):
        if not isinstance(token, str) or token != self.unacked:
            await self.refuse(SEND_ACK)
            return
        self.unacked = None
        await self.flush()

    # ---- what the channel layer brings --------------------------------------------------------

    async def run_changed(self, event):
        if event["run"] in self.watched:
            self.dirty.add(event["run"])
            await self.flush()

    async def dashboard_flush(self, event):
        self.timer = None
        await self.flush()

    async def dashboard_refresh(self, event):
        self.dirty |= set(self.watched)
        made = await self.made_since(self.newest)
        if made:
            self.newest = made[-1]
            self.created = (self.created + [Run(pk=n).name for n in made])[-MAX_CREATED:]
        await self.flush()

    async def access_lost(self, event):
        await self.shut(event["code"])

    # ---- sending ------------------------------------------------------------------------------

    async def flush(self):
        """Send what changed, when the page has acknowledged the last message and the last
        read was FLUSH_SECONDS ago; else later."""
        if self.unacked is not None or not (self.dirty or self.created):
            return
        loop = asyncio.get_running_loop()
        wait = self.last_flush + FLUSH_SECONDS - loop.time()
        if wait > 0:
            if self.timer is None:
                self.timer = loop.call_later(wait, self.wake, "dashboard.flush")
            return
        self.last_flush = loop.time()
        ids, self.dirty = self.dirty & set(self.watched), set()
        states = await self.states(ids) if ids else {}
        # A running run's duration grows by itself: the page counts it on from what it was sent.
        changed = [
            state
            for run_id, state in states.items()
            if _lasting(self.watched.get(run_id)) != _lasting(state)
        ]
        for state in changed:
            self.watched[run_number(state["name"])] = state
        created, self.created = self.created, []
        if not changed and not created:
            return
        self.unacked = new_token()
        message = {"type": "runs", "runs": changed, "ack": self.unacked}
        if created:
            message["created"] = created
        await self.send(text_data=json.dumps(message, default=_iso))

    def wake(self, kind: str) -> None:
        """Tell this socket's own channel, so the consumer handles it between its messages."""
        asyncio.ensure_future(self.channel_layer.send(self.channel_name, {"type": kind}))

    async def tick_forever(self):
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            self.wake("dashboard.refresh")

    # ---- the database -------------------------------------------------------------------------

    @database_sync_to_async
    def newest_run(self) -> int:
        found = Run.objects.visible_to(self.scope["user"]).order_by("-pk")
        return found.values_list("pk", flat=True).first() or 0

    @database_sync_to_async
    def made_since(self, newest: int) -> list[int]:
        """The runs the user sees made after that one, oldest first: a few at most."""
        found = Run.objects.visible_to(self.scope["user"]).filter(pk__gt=newest)
        return sorted(found.order_by("-pk").values_list("pk", flat=True)[:MAX_CREATED])

    @database_sync_to_async
    def visible(self, numbers: set[int]) -> set[int]:
        runs = Run.objects.visible_to(self.scope["user"]).filter(pk__in=numbers)
        return set(runs.values_list("pk", flat=True))

    @database_sync_to_async
    def states(self, ids: set[int]) -> dict[int, dict]:
        now = timezone.now()
        found = Run.objects.visible_to(self.scope["user"]).filter(pk__in=ids).values(*FIELDS)
        return {values["pk"]: row_state(values, now) for values in found}


def _numbers(names) -> set[int] | None:
    """The run numbers of a watch list of names as the pages write them (run-7), or None for
    anything else."""
    if not isinstance(names, list) or len(names) > MAX_WATCH:
        return None
    numbers = set()
    for name in names:
        number = run_number(name) if isinstance(name, str) else None
        if not number or Run(pk=number).name != name:
            return None
        numbers.add(number)
    return numbers


def _lasting(state: dict | None) -> dict | None:
    return None if state is None else {**state, "duration": None}


def _iso(value):
    return value.isoformat().replace("+00:00", "Z")
