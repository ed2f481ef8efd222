"""A websocket client on a plain socket, to talk to a real `div serve` as any client may: with
paths no browser would send, or without ever reading what the server sends.

RFC 6455, as little of it as that needs: the opening handshake, masked text frames out, whole
messages and the close frame in. bench/backlog.py uses it too.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time

TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


class Refused(Exception):
    """The server answered the handshake with an HTTP status other than 101."""

    def __init__(self, status: int, head: bytes):
        super().__init__(f"HTTP {status}")
        self.status = status
        self.head = head


class WebSocket:
    def __init__(self, sock: socket.socket, rest: bytes = b""):
        self.sock = sock
        self.buffer = rest

    @classmethod
    def open(
        cls,
        port: int,
        path: str | bytes,
        *,
        cookie: str | None = None,
        receive_buffer: int | None = None,
        timeout: float = 10,
    ) -> WebSocket:
        """Connect to 127.0.0.1:port and open path (bytes go on the wire as they are). A small
        receive_buffer makes a client that does not read fall behind sooner."""
        sock = socket.socket()
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(timeout)
        sock.connect(("127.0.0.1", port))
        raw = path if isinstance(path, bytes) else path.encode("ascii")
        key = base64.b64encode(os.urandom(16))
        head = [
            b"GET " + raw + b" HTTP/1.1",
            f"Host: 127.0.0.1:{port}".encode(),
            f"Origin: http://127.0.0.1:{port}".encode(),
            b"Upgrade: websocket",
            b"Connection: Upgrade",
            b"Sec-WebSocket-Key: " + key,
            b"Sec-WebSocket-Version: 13",
        ]
        if cookie:
            head.append(b"Cookie: " + cookie.encode())
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        head_bytes, _, rest = answer.partition(b"\r\n\r\n")
        status = int(head_bytes.split(b" ", 2)[1]) if head_bytes.startswith(b"HTTP/") else 0
        if status != 101:
            sock.close()
            raise Refused(status, head_bytes)
        return cls(sock, rest)

    def send_text(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x80 | TEXT, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x80 | TEXT, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | TEXT, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_json(self, content) -> None:
        self.send_text(json.dumps(content))

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def receive(self) -> tuple[int, bytes]:
        """The next whole message: (opcode, payload); pings are answered on the way."""
        message, opcode = b"", None
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            payload = self._read(n)
            code = first & 0x0F
            if code == PING:
                self.sock.sendall(struct.pack("!BB", 0x80 | PONG, 0x80) + os.urandom(4))
                continue
            if code != 0:
                opcode = code
            message += payload
            if first & 0x80:
                return opcode, message

    def until_close(self, timeout: float = 10) -> tuple[list[dict], int | None]:
        """Every message up to the server's close frame, and the close's code (None when the
        connection ended without one)."""
        deadline = time.monotonic() + timeout
        messages = []
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                opcode, payload = self.receive()
            except TimeoutError:
                break
            except OSError:  # reset, or closed without a close frame
                return messages, None
            if opcode == CLOSE:
                return messages, struct.unpack("!H", payload[:2])[0] if payload else None
            messages.append(json.loads(payload))
        raise TimeoutError(f"no close in {timeout} s; got {messages[-3:]}")

    def close(self) -> None:
        self.sock.close()
