"""div serve [--host H] [--port P] [--demo]: daphne, websockets and the ingester in one process."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
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
        _check_free(host, port)
        url = f"http://{host if host not in ('0.0.0.0', '::') else '127.0.0.1'}:{port}"
        # Held before the demo starts, so its supervisor leaves the ingesting to this process.
        with ingester_present():
            if not get_user_model().objects.exists():
                user = services.user_create(
                    username="admin", orgs=[services.DEFAULT_ORG], staff=True
                )
                self.stdout.write("No user yet: made one. Log in, once, with this link:")
                self.stdout.write("  " + services.login_link(user=user, base=url))
            demo_process = None
            if demo:
                run, demo_process = demo_run.start()
                self.stdout.write(f"Demo run {run.name} is streaming: {url}/runs/{run.name}/")
            self.stdout.write(f"Serving {url}/ (Ctrl-C stops)")
            self.stdout.flush()
            try:
                serve(host, port)
            finally:
                if demo_process is not None:
                    # The demo belongs to this server: it ends with it, its end recorded.
                    demo_process.terminate()
                    demo_process.wait(timeout=30)


def serve(host: str, port: int) -> None:
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    from divergent.asgi import application

    stop = threading.Event()
    ingesting = {}

    def begin():
        ingesting["task"] = asyncio.ensure_future(ingest_forever(stop))

    def finish():
        # The pass under way ends while the loop still runs: its notices need the loop.
        stop.set()
        if "task" in ingesting:
            return Deferred.fromFuture(ingesting["task"])

    reactor.callWhenRunning(begin)
    reactor.addSystemEventTrigger("before", "shutdown", finish)
    Server(
        application=application,
        endpoints=build_endpoint_description_strings(host=host, port=port),
        signal_handlers=True,
        verbosity=0,
    ).run()


def _check_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise CommandError(
                f"cannot serve on {host}:{port}: {e.strerror}; pick another --port"
            ) from None


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
