"""An address where something listens and only takes notes: what a client sent there, if it sent
anything, for tests that prove a client never spoke to a server (or said what to it)."""

from __future__ import annotations

import socket
import threading


class Listener:
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
