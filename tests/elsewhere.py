"""Addresses that are not a div serve: one that only takes notes of what a client sent there
(a test proves a client never spoke to it), and one that answers every request as some other
web app might, 200 and `{}`.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Listener:
    """Takes notes of what arrives and answers nothing."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.received = bytearray()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def _listen(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(1)
                try:
                    self.received += connection.recv(65536)
                except OSError:
                    pass

    def heard(self) -> bytes:
        """Everything sent here so far; the listening stops."""
        self.stopped.set()
        self.thread.join()
        self.socket.close()
        return bytes(self.received)


class _Empty(BaseHTTPRequestHandler):
    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args) -> None:
        pass


class Impostor:
    """Answers 200 `{}`, as JSON, to every request: an app that is not a div serve."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Empty)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
