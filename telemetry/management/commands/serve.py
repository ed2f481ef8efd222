"""div serve [--host H] [--port P] [--demo]: daphne, websockets and the ingester in one process."""

from __future__ import annotations

import asyncio
import logging
import threading

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import close_old_connections

from telemetry import demo as demo_run
from telemetry import services
from telemetry.commands import DivCommand
from telemetry.ingest import IDLE_SECONDS, Ingester, ingester_present

log = logging.getLogger("divergent.serve")


class Command(DivCommand):
    help = "Serves the web app, with the ingester running inside it."
    migrates = True

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--demo", action="store_true", help="start a demo run streaming telemetry"
        )

    def handle(self, *args, host, port, demo: bool = False, **options):
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server
        from twisted.internet import reactor

        from divergent.asgi import application

        presence = ingester_present()
        presence.__enter__()  # before the demo starts, so its supervisor leaves ingesting to us
        url = f"http://{host if host not in ('0.0.0.0', '::') else '127.0.0.1'}:{port}"
        out = self.stdout
        if not get_user_model().objects.exists():
            user = services.user_create(username="admin", orgs=[services.DEFAULT_ORG], staff=True)
            out.write("No user yet: made one. Log in, once, with this link:")
            out.write("  " + services.login_link(user=user, base=url))
        if demo:
            run = demo_run.start()
            out.write(f"Demo run {run.name} is streaming: {url}/runs/{run.name}/")
        out.write(f"Serving {url}/ (Ctrl-C stops)")
        out._out.flush()

        stop = threading.Event()
        reactor.callWhenRunning(lambda: asyncio.ensure_future(ingest_forever(stop)))
        try:
            Server(
                application=application,
                endpoints=build_endpoint_description_strings(host=host, port=port),
                signal_handlers=True,
                verbosity=0,
            ).run()
        finally:
            stop.set()
            presence.__exit__(None, None, None)


async def ingest_forever(stop: threading.Event) -> None:
    """The ingester on the server's own event loop, so its notices reach the in-memory
    channel layer from the loop that owns it; the database work runs in a thread."""
    ingester = Ingester()

    def tail() -> bool:
        close_old_connections()
        return ingester.tail_once()

    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        try:
            await sync_to_async(tail, thread_sensitive=False)()
        except Exception:
            log.exception("the ingester's pass failed; trying again")
        await asyncio.sleep(max(0.0, IDLE_SECONDS - (loop.time() - started)))
