"""`div serve`: daphne (HTTP and websockets) with the ingester inside it, and what it says
once it listens: the first user's login link, the demo run, the address it serves."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from telemetry import address, demo, services
from telemetry.errors import Refused
from telemetry.ingest import IDLE_SECONDS, Ingester, ingester_present

log = logging.getLogger("divergent.serve")

CANNOT_SERVE = "cannot serve on {host}:{port}: {why}; pick another {option}"


def serve(host: str, port: int, *, with_demo: bool, say: Callable[[str], None]) -> None:
    """Serve until stopped (SIGTERM, Ctrl-C). What people need is said once the socket
    listens, so a script waiting for the "Serving" line can connect at once."""
    check_free(host, port)
    demo_process = None

    def listening(bound_port: int) -> None:
        nonlocal demo_process
        url = address.served_on(host, bound_port)
        address.remember_served(url)
        user = services.user_first()
        if user is not None:
            say("No user yet: made one. Log in, once, with this link:")
            say("  " + services.login_link(user=user))
        if with_demo:
            run, demo_process = demo.start()
            say(f"Demo run {run.name} is streaming: {address.public_url()}/runs/{run.name}/")
        say(f"Serving {url}/ (Ctrl-C stops)")

    # Held before the demo starts, so its supervisor leaves the ingesting to this process.
    with ingester_present():
        try:
            run_daphne(host, port, listening)
        finally:
            if demo_process is not None:
                # The demo belongs to this server: it ends with it, its end recorded.
                demo_process.terminate()
                demo_process.wait(timeout=30)


def run_daphne(host: str, port: int, listening: Callable[[int], None]) -> None:
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    from divergent.asgi import application

    stop = threading.Event()
    ingesting = {}
    failed = []

    class Listening(Server):
        def listen_success(self, port):
            super().listen_success(port)
            try:
                listening(port.getHost().port)
            except Exception as e:  # the demo refused, say: told once daphne has stopped
                failed.append(e)
                self.stop()

        def listen_error(self, failure):
            error = getattr(failure.value, "socketError", None)
            why = getattr(error, "strerror", None) or failure.value
            failed.append(Refused(cannot_serve(host, port, why, getattr(error, "errno", None))))
            self.stop()

    def begin():
        ingesting["task"] = asyncio.ensure_future(ingest_forever(stop))

    def finish():
        # The pass under way ends while the loop still runs: its notices need the loop.
        stop.set()
        if "task" in ingesting:
            return Deferred.fromFuture(ingesting["task"])

    reactor.callWhenRunning(begin)
    reactor.addSystemEventTrigger("before", "shutdown", finish)
    Listening(
        application=application,
        endpoints=build_endpoint_description_strings(host=host, port=port),
        signal_handlers=True,
        verbosity=0,
    ).run()
    if failed:
        raise failed[0]


def check_free(host: str, port: int) -> None:
    """Refuse a taken port before anything is made or started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise Refused(cannot_serve(host, port, e.strerror, e.errno)) from None


def cannot_serve(host: str, port: int, why: object, code: int | None) -> str:
    """What to change: the port when it is taken or kept for root, else the address."""
    option = "--port" if code in (errno.EADDRINUSE, errno.EACCES) else "--host"
    return CANNOT_SERVE.format(host=host, port=port, why=why, option=option)


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
