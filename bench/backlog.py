"""Websocket clients that never read: the server's memory while they ask for a run's backlog.

    python bench/backlog.py [--points 200000] [--clients 20] [--messages 20] [--rounds 3]

Builds an ended run of POINTS points (and a wide one: 64 numbers a line, 5,000 lines, about
8 MB of points) on a fresh DIVERGENT_HOME, starts `div serve` on it, and measures the server's
RSS (/proc/PID/status VmRSS) idle, then while CLIENTS websocket clients each send MESSAGES
{"after": ...} and never read a byte, then after they close. Each client is a plain socket with
a 4 KB receive buffer (tests/wsclient.py), so what the server sends it stays in the server's
own buffers. Prints progress on stderr and a table on stdout, and writes it with every sample to
bench/out/backlog.json. Target from issue 8 item 17: under 300 MB with 20 such clients.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

from common import MB, ROOT, Row, command_line, progress, scratch, table, write_json
from tab import build_run, serving, setup_django

sys.path.insert(0, str(ROOT))
from tests.wsclient import WebSocket  # noqa: E402  (the checkout's root, just put on the path)

TARGET_MB = 300
WIDE_LINES = 5000  # the most points a socket sends before saying "read the API" (flow.py)


def rss(pid: int) -> int:
    """The process's resident set, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def sample(pid: int, seconds: float, every: float = 0.05) -> list[int]:
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samples.append(rss(pid))
        time.sleep(every)
    return samples


def build_wide_run(lines: int):
    """An ended run of LINES lines of 64 numbers each, the most a line may carry."""
    from telemetry import services
    from telemetry.ingest import Ingester

    run = services.run_create(org=services.org_get_or_create(), command=["python", "wide.py"])
    with open(run.telemetry_path, "w") as f:
        for i in range(1, lines + 1):
            f.write("{" + ",".join(f'"key_{k:02d}": {i + k / 7!r}' for k in range(64)) + "}\n")
    services.run_finish(run=run, exit_code=0)
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    run.refresh_from_db()
    progress(f"ingested {run.name}: {run.points:,} points of 64 numbers")
    return run


def session_cookie(user) -> str:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}"


def drain(client: WebSocket, quiet: float = 1.0) -> tuple[int, int | None]:
    """What the server had sent a client that never read: (bytes, close code or None)."""
    client.sock.settimeout(quiet)
    received = len(client.buffer)
    client.buffer = b""
    code = None
    try:
        while True:
            chunk = client.sock.recv(1 << 16)
            if not chunk:
                break
            received += len(chunk)
            if b"\x88\x02" in chunk[-4:]:  # a close frame with its code
                code = int.from_bytes(chunk[-2:], "big")
    except (TimeoutError, OSError):
        pass
    return received, code


def one_round(
    port: int, pid: int, path: str, cookie: str, after: int, args: argparse.Namespace
) -> dict:
    clients = [
        WebSocket.open(port, path, cookie=cookie, receive_buffer=4096) for _ in range(args.clients)
    ]
    for client in clients:
        for _ in range(args.messages):
            client.send_json({"after": after})
    during = sample(pid, args.hold)
    sent = [drain(client) for client in clients[:3]]  # what a few were sent, once measured
    for client in clients:
        client.close()
    after_close = sample(pid, args.settle)
    return {
        "peak": max(during),
        "after_close": statistics.median(after_close[-10:]),
        "sent_bytes": [s[0] for s in sent],
        "close_codes": [s[1] for s in sent],
    }


def warm_up(port: int, path: str, cookie: str, last: int) -> None:
    """One ordinary client, so the server has loaded what a socket needs before it is measured."""
    client = WebSocket.open(port, path, cookie=cookie)
    client.send_json({"after": last})
    while (message := client.receive())[1] and b'"status"' not in message[1]:
        pass
    client.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=200_000, help="points in the main run")
    parser.add_argument("--clients", type=int, default=20, help="clients at once")
    parser.add_argument("--messages", type=int, default=20, help='{"after": ...} each sends')
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each scenario")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds the clients stay open")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after they close")
    parser.add_argument("--tmp", type=Path, default=None, help="where the scratch files go")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser.parse_args(argv)


def run_all(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    home = work / "home"
    progress(f"scratch directory {work}")
    setup_django(home)
    from django.db import connections

    user, run, _ = build_run(args.points)
    wide = build_wide_run(WIDE_LINES)
    cookie = session_cookie(user)
    connections.close_all()
    scenarios = {
        f'{{"after": 0}} on {run.name}, {args.points:,} points': (run.name, 0),
        f'{{"after": 0}} on {wide.name}, {WIDE_LINES:,} points of 64 numbers': (wide.name, 0),
    }
    raw: dict = {"scenarios": {}}
    with serving(home, work / "serve.log") as server:
        pid = server.process.pid
        port = int(server.url.rsplit(":", 1)[1])
        warm_up(port, f"/ws/runs/{run.name}/", cookie, args.points)
        idle = statistics.median(sample(pid, 1.0))
        progress(f"idle server: {idle / MB:.0f} MB")
        for label, (name, after) in scenarios.items():
            rounds = []
            for i in range(args.rounds):
                rounds.append(one_round(port, pid, f"/ws/runs/{name}/", cookie, after, args))
                progress(
                    f"{label}, round {i + 1}: peak {rounds[-1]['peak'] / MB:.0f} MB,"
                    f" {rounds[-1]['after_close'] / MB:.0f} MB after they closed;"
                    f" a client was sent {rounds[-1]['sent_bytes'][0] / MB:.2f} MB,"
                    f" closed with {rounds[-1]['close_codes'][0]}"
                )
            raw["scenarios"][label] = rounds
        raw["idle"] = idle
        raw["server_output"] = server.output()[-5000:]
    rows = [Row("idle server", f"{idle / MB:.0f} MB", "", None, "report", None)]
    for label, rounds in raw["scenarios"].items():
        peak = statistics.median(r["peak"] for r in rounds)
        after_close = statistics.median(r["after_close"] for r in rounds)
        sent = statistics.median(b for r in rounds for b in r["sent_bytes"])
        rows.append(
            Row(
                f"{args.clients} clients x {args.messages} {label}: peak",
                f"{peak / MB:.0f} MB ({sent / MB:.2f} MB sent a client)",
                f"idle {idle / MB:.0f} MB",
                peak / idle,
                f"< {TARGET_MB} MB",
                peak < TARGET_MB * MB,
            )
        )
        rows.append(
            Row(
                "  ... once they closed",
                f"{after_close / MB:.0f} MB",
                f"idle {idle / MB:.0f} MB",
                after_close / idle,
                "report",
                None,
            )
        )
    return rows, raw


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    with scratch("div-bench-backlog-", args.tmp, args.keep) as work:
        rows, raw = run_all(args, work)
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"$ {command_line()}")
    print(table(rows), end="")
    print(
        f"medians of {args.rounds} rounds; load average (1 min) {load['before'][0]:.1f} before,"
        f" {load['after'][0]:.1f} after, on {os.cpu_count()} CPUs"
    )
    write_json("backlog.json", rows, started=started, raw=raw, load_average=load)


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
