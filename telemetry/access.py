"""Whether each open Telemetry socket may still see its run: every socket re-checked each second.

A socket is let in once, by the session its browser holds. What takes that back can be done by
any process: logging out (in any `div serve` worker), the session expiring or being deleted,
the user made inactive or given a new password, the user taken out of the run's org, the run
given to another org, by the admin, a `div` command or a script. No signal reaches every
server from all of those, and none comes when a session merely expires, so each server process
asks the database instead, for all of its sockets at once: three queries a second, however
many sockets are open. A socket whose pass no longer holds is told on its own channel, so it
closes itself between its other messages, within RECHECK_SECONDS and the query's time.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from telemetry.models import Run

RECHECK_SECONDS = 1.0
LOGGED_OUT = 4401  # the session is over: log in again
NOT_YOURS = 4403  # the user may not see the run (any more)

log = logging.getLogger("divergent.sockets")


@dataclass(frozen=True)
class Pass:
    """What let a socket in: a user's session, and the run it watches."""

    session_key: str | None  # None for a user that other middleware set: no session to check
    user_id: int
    run_id: int | None
    # A socket of several runs (a dashboard's rows, a comparison's runs) holds while the user
    # sees them all.
    run_ids: frozenset[int] = frozenset()

    @property
    def runs(self) -> frozenset[int]:
        return self.run_ids if self.run_id is None else self.run_ids | {self.run_id}


def revoked(passes: Iterable[Pass]) -> dict[Pass, int]:
    """The passes that no longer hold, each with the code its socket closes with.

    A session holds while it is in the database, unexpired, for the same user, with the hash
    Django checks on every request (a new password ends the user's other sessions); the user
    while active; the run while the user is in its org (Run.objects.viewers).
    """
    passes = set(passes)
    if not passes:
        return {}
    sessions = dict(
        Session.objects.filter(
            session_key__in={p.session_key for p in passes if p.session_key},
            expire_date__gt=timezone.now(),
        ).values_list("session_key", "session_data")
    )
    user_ids = {p.user_id for p in passes}
    users = {u.pk: u for u in get_user_model().objects.filter(pk__in=user_ids, is_active=True)}
    seen = Run.objects.viewers({run_id for p in passes for run_id in p.runs}, user_ids)
    store = import_string(settings.SESSION_ENGINE + ".SessionStore")()
    held = {key: store.decode(data) for key, data in sessions.items()}
    lost = {}
    for p in passes:
        user = users.get(p.user_id)
        if user is None or (p.session_key and not _session_holds(held.get(p.session_key), user)):
            lost[p] = LOGGED_OUT
        elif any((run_id, p.user_id) not in seen for run_id in p.runs):
            lost[p] = NOT_YOURS
    return lost


def _session_holds(session: dict | None, user) -> bool:
    """As django.contrib.auth.get_user decides it, without a request."""
    if not session or str(session.get(SESSION_KEY)) != str(user.pk):
        return False
    kept = session.get(HASH_SESSION_KEY) or ""
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return bool(kept) and any(constant_time_compare(kept, h) for h in hashes)


class Watch:
    """The open sockets of one event loop (one server process), re-checked together."""

    def __init__(self) -> None:
        self.sockets: dict[str, tuple[Pass, object]] = {}  # channel name -> (pass, its layer)
        self.task: asyncio.Task | None = None

    def add(self, channel: str, granted: Pass, layer) -> None:
        self.sockets[channel] = (granted, layer)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.recheck_forever())

    def discard(self, channel: str) -> None:
        self.sockets.pop(channel, None)
        if not self.sockets and self.task is not None:
            self.task.cancel()
            self.task = None

    async def recheck_forever(self) -> None:
        while self.sockets:
            await asyncio.sleep(RECHECK_SECONDS)
            await self.recheck()

    async def recheck(self) -> None:
        open_now = dict(self.sockets)
        try:
            lost = await database_sync_to_async(revoked)([p for p, _ in open_now.values()])
        except Exception as e:  # the database is away: the next second tries again
            log.warning("could not re-check the open sockets' access: %s", e)
            return
        for channel, (granted, layer) in open_now.items():
            if granted in lost and channel in self.sockets:
                try:
                    await layer.send(channel, {"type": "access.lost", "code": lost[granted]})
                except ChannelFull:
                    pass  # told again in a second


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Watch] = weakref.WeakKeyDictionary()


def watch() -> Watch:
    """This event loop's Watch."""
    loop = asyncio.get_running_loop()
    if loop not in _watches:
        _watches[loop] = Watch()
    return _watches[loop]
