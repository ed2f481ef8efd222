"""One websocket per open Telemetry tab: the points after the seq the tab has, then live ones.

The tab sends {"after": seq} once connected (and again after each reconnect); the consumer
answers with the stored points after it, then forwards each batch the ingester commits. It
only ever sends a seq once, so a reconnect leaves no gap and no duplicate.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from telemetry import queries
from telemetry.live import group_for
from telemetry.models import Run

NOT_YOURS = 4403
BACKLOG_BATCH = 2000
MAX_SEQ = 2**62


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        self.sent = None  # the last seq sent; None until the tab says where it is
        await self.accept()
        if not await self.visible():
            await self.close(code=NOT_YOURS)
            return
        await self.channel_layer.group_add(group_for(self.run_id), self.channel_name)

    async def disconnect(self, code):
        await self.channel_layer.group_discard(group_for(self.run_id), self.channel_name)

    async def receive_json(self, content, **kwargs):
        after = content.get("after") if isinstance(content, dict) else None
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            await self.send_json(
                {"type": "error", "error": 'send {"after": <the last seq you have>}'}
            )
            return
        self.sent = after
        await self.send_backlog()
        status = await self.status()
        await self.send_json({"type": "status", **status})

    async def run_points(self, event):
        if self.sent is None:
            return  # the backlog read after the tab says hello will carry these
        if event["points"] is None or event["points"][0]["seq"] > self.sent + 1:
            await self.send_backlog()
            return
        fresh = [p for p in event["points"] if p["seq"] > self.sent]
        if fresh:
            self.sent = fresh[-1]["seq"]
            await self.send_json({"type": "points", "points": fresh})

    async def run_status(self, event):
        await self.send_json(
            {"type": "status", "status": event["status"], "closed": event["closed"]}
        )

    async def send_backlog(self):
        while True:
            points = await self.points_after(self.sent)
            if not points:
                return
            self.sent = points[-1]["seq"]
            await self.send_json({"type": "points", "points": points})

    @database_sync_to_async
    def visible(self) -> bool:
        return Run.objects.visible_to(self.scope.get("user")).filter(pk=self.run_id).exists()

    @database_sync_to_async
    def points_after(self, seq: int) -> list[dict]:
        seq = min(seq, MAX_SEQ)  # past any run, and within what the database can compare
        return [
            {"seq": s, "data": d}
            for s, d in queries.points(self.run_id, after=seq, upto=seq + BACKLOG_BATCH)
        ]

    @database_sync_to_async
    def status(self) -> dict:
        run = Run.objects.only("status", "telemetry_closed").get(pk=self.run_id)
        return {"status": run.status, "closed": run.telemetry_closed}
