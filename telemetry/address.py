"""The server's address, as the login links printed for people name it.

DIVERGENT_URL, the public address, wins; without it, the address `div serve` last served on,
which it keeps in DIVERGENT_HOME; without that, where `div serve` serves by default.
"""

from __future__ import annotations

from django.conf import settings

DEFAULT_URL = "http://127.0.0.1:8000"
SERVED_FILE = "served-at"


def public_url() -> str:
    if settings.DIVERGENT_URL:
        return settings.DIVERGENT_URL
    try:
        served = (settings.DIVERGENT_HOME / SERVED_FILE).read_text().strip()
    except OSError:
        served = ""
    return served or DEFAULT_URL


def served_on(host: str, port: int) -> str:
    """The address a server listening on host:port is reached at from this machine."""
    if host in ("0.0.0.0", "", "::"):  # every interface: this machine's own is one of them
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def remember_served(url: str) -> None:
    settings.DIVERGENT_HOME.mkdir(parents=True, exist_ok=True)
    (settings.DIVERGENT_HOME / SERVED_FILE).write_text(url + "\n")
