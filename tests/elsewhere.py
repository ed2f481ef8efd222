"""Addresses that are not a div serve: one that only takes notes of what a client sent there
(a test proves a client never spoke to it), one that answers every request as some other web
app might, 200 and `{}`, and a reverse proxy in front of a real div serve that fails a request
as proxies do.
"""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


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


class _Serving:
    """An HTTP server of this test's, in a thread of its own, on a free port."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Impostor(_Serving):
    """Answers 200 `{}`, as JSON, to every request: an app that is not a div serve."""

    def __init__(self) -> None:
        self._serve(_Empty)


class Proxy(_Serving):
    """A reverse proxy in front of a server, as nginx is: it passes every request on, except
    that it answers `502 Bad Gateway` itself (its own page, as a proxy does) to the first
    `failing` requests whose path ends with `path`."""

    def __init__(self, target: str, *, path: str, failing: int = 1) -> None:
        parts = urlsplit(target)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # kept alive, as the client keeps its connection

            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    fail = self.path.split("?")[0].endswith(path) and proxy.failing > 0
                    proxy.failing -= fail
                if fail:
                    proxy.failed.append(self.path)
                    self.reply(502, {"Content-Type": "text/html"}, BAD_GATEWAY)
                    return
                upstream = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    got = upstream.getresponse()
                    data = got.read()
                    passed = {
                        k: v
                        for k, v in got.getheaders()
                        if k.lower() not in ("connection", "transfer-encoding", "content-length")
                    }
                except OSError:
                    self.reply(502, {"Content-Type": "text/html"}, BAD_GATEWAY)
                    return
                finally:
                    upstream.close()
                self.reply(got.status, passed, data)

            def reply(self, status: int, headers: dict, body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *args) -> None:
                pass

        self.lock = threading.Lock()
        self.failing = failing
        self.failed: list[str] = []
        self._serve(Handler)


BAD_GATEWAY = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"
