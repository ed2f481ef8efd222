"""The remote `div`: a machine with a token talks to the server over its REST API and never
touches a database (a GPU machine gets no database password).

Client mode is on when a token is there: `DIVERGENT_TOKEN` (with `DIVERGENT_URL`) in the
environment, else `~/.config/divergent/config.toml` as `div login URL` writes it (under
`XDG_CONFIG_HOME` when that is set). The environment wins, field by field, except that the
file's token is sent only to the file's server; `DIVERGENT_TOKEN` set to nothing turns client
mode off whatever the file says.

Every way a request can fail is one line that says what to do (`Refused`, or one of its
kinds below, which the uploader tells apart: `Unreachable` and `ServerError` pass, the
others do not). One connection is kept alive for all of a command's requests.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import orjson
from django.conf import settings

from divergent.settings import BadSetting, http_url
from telemetry import api_header
from telemetry.errors import Refused

CONFIG = Path("divergent") / "config.toml"
TIMEOUT = 30.0  # seconds a request may take, connecting included
AGENT = "div"

NO_URL = "DIVERGENT_TOKEN is set but no server is: set DIVERGENT_URL too, or div login URL"
NO_TOKEN_FOR = (
    "there is no token for {url} here: div login kept one for {saved} only; div login {url} "
    "gives one, or DIVERGENT_TOKEN= uses this machine's own database"
)
BAD_CONFIG = "{path} cannot be read ({why}); div login URL writes it again"
UNREACHABLE = (
    "cannot reach the server at {url} ({why}); check {where}, and that div serve runs there"
)
SERVER_FAILED = (
    "the server at {url} failed ({status} {reason}); try again, or ask its admin to read its log"
)
NOT_DIVERGENT = (
    "the server at {url} answered {what} to {path}, which div serve does not: "
    "check that {where} names a div serve"
)
REDIRECTED = "the server at {url} sends its API to {location}; div login {base} uses that address"
SOMETHING_ELSE = "{url} answered as something other than a div serve; check {where}"
TOKEN_HEADER = "Authorization"
# A header and a request line carry printable ASCII alone: anything else would fail as it is
# sent, so it is said first, in one line.
BAD_TOKEN = (
    "{where} holds a line break, a control character or one outside ASCII, which no token "
    "has: copy the token again, as div token create or the account page printed it"
)
BAD_URL = (
    "{where} holds {url!r}, with a space, a control character or one outside ASCII: "
    "write the address as the browser shows it, %-encoded, like https://div.example.com"
)


@dataclass(frozen=True)
class Client:
    """The server this machine's `div` talks to, the token it speaks with, and where they
    were found (for the one line that says what to fix)."""

    url: str
    token: str
    where: str  # "DIVERGENT_URL" or the config file: what to check when it cannot be reached
    token_from: str = "DIVERGENT_TOKEN"  # or the config file

    def __post_init__(self) -> None:
        # Surrounding whitespace (a token file's line end) is left out, as div login does.
        object.__setattr__(self, "token", self.token.strip())
        if not _sendable(self.token):
            raise Refused(BAD_TOKEN.format(where=self.token_from))
        if not _sendable(self.url) or " " in self.url:
            raise Refused(BAD_URL.format(where=self.where, url=self.url))

    def api(self) -> Api:
        return Api(self)


def _sendable(text: str) -> bool:
    return all(" " <= c <= "~" for c in text)


def config_path() -> Path:
    """~/.config/divergent/config.toml, or under XDG_CONFIG_HOME (an absolute path: the XDG
    spec ignores any other)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / CONFIG


def _read_config(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            found = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise Refused(BAD_CONFIG.format(path=path, why=getattr(e, "strerror", None) or e)) from None
    return {k: v for k, v in found.items() if k in ("url", "token") and isinstance(v, str)}


def client() -> Client | None:
    """This machine's server and token; None when there is no token: `div` is then local.

    A token kept by `div login` goes only to the server it was kept for: DIVERGENT_URL naming
    another, with no DIVERGENT_TOKEN, is refused rather than given that token."""
    token = os.environ.get("DIVERGENT_TOKEN")
    if token == "":
        return None
    if token is not None and settings.DIVERGENT_URL:
        return Client(settings.DIVERGENT_URL, token, "DIVERGENT_URL")
    path = config_path()
    saved = _read_config(path)
    if token is None and not saved.get("token"):
        return None
    if not saved.get("url"):
        raise Refused(NO_URL if token is not None else BAD_CONFIG.format(path=path, why="no url"))
    try:
        url = http_url("url", saved["url"])
    except BadSetting as e:
        raise Refused(BAD_CONFIG.format(path=path, why=e)) from None
    if token is not None:
        return Client(url, token, str(path))  # the token is DIVERGENT_TOKEN
    if settings.DIVERGENT_URL and settings.DIVERGENT_URL != url:
        raise Refused(NO_TOKEN_FOR.format(url=settings.DIVERGENT_URL, saved=url))
    where = "DIVERGENT_URL" if settings.DIVERGENT_URL else str(path)
    return Client(url, saved["token"], where, str(path))


def save(url: str, token: str) -> Path:
    """Keep the server and token for later commands: readable by this user alone, written
    whole (a draft renamed into place) so a reader never sees half of it."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        # JSON's string escapes are TOML's basic strings'.
        f.write("# Written by div login: the server div talks to, and its token.\n")
        f.write(f"url = {json.dumps(url)}\ntoken = {json.dumps(token)}\n")
    os.chmod(draft, 0o600)
    os.replace(draft, path)
    return path


# ---- talking to the server -------------------------------------------------------------------


class Unreachable(Refused):
    """No answer: the network, or the server, is away. Worth trying again later."""


class ServerError(Refused):
    """The server answered that it failed (5xx). Worth trying again later."""


class Unauthorized(Refused):
    """A 401: the token is not one the server takes (revoked, mistyped), whatever is asked."""


class NotFound(Refused):
    """A 404: whoever asks knows what was not found (a run, an org, a token)."""


class Conflict(Refused):
    """A 409: the answer says what the server has (`data`)."""

    def __init__(self, message: str, data: dict):
        super().__init__(message)
        self.data = data


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> dict:
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return json.loads(self.body)  # numbers orjson will not take; still JSON


class Api:
    """Requests to the server on one kept-alive connection, each answer judged (see above)."""

    def __init__(self, client: Client, *, timeout: float = TIMEOUT):
        self.client = client
        self.timeout = timeout
        parts = urlsplit(client.url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.prefix = parts.path.rstrip("/")
        self.connection: http.client.HTTPConnection | None = None

    @property
    def url(self) -> str:
        return self.client.url

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.connection is None:
            if self.https:
                self.connection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=ssl.create_default_context()
                )
            else:
                self.connection = http.client.HTTPConnection(
                    self.host, self.port, timeout=self.timeout
                )
        return self.connection

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body: bytes | None = None,
        data: dict | None = None,
        headers: dict | None = None,
        again: bool = True,
    ) -> Answer:
        """One request; `again`: when a connection kept alive was closed by the server
        meanwhile, send it once more on a new one (never for a request that must not be
        made twice)."""
        target = self.prefix + path + (f"?{urlencode(query)}" if query else "")
        sent = {TOKEN_HEADER: f"Bearer {self.client.token}", "User-Agent": AGENT}
        if data is not None:
            body = orjson.dumps(data)
            sent["Content-Type"] = "application/json"
        elif body is not None:
            sent["Content-Type"] = "application/octet-stream"
        sent.update(headers or {})
        if not again:
            self.close()
        while True:
            reused = self.connection is not None
            connection = self._connect()
            try:
                connection.request(method, target, body=body, headers=sent)
                response = connection.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                self.close()
                if reused and again:
                    continue
                raise self.unreachable(e) from None
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise self.unreachable(e) from None
            if response.will_close:
                self.close()
            return self.judge(Answer(response.status, response.headers, payload), path)

    def unreachable(self, error: Exception) -> Unreachable:
        return Unreachable(
            UNREACHABLE.format(url=self.url, why=_why(error), where=self.client.where)
        )

    def judge(self, answer: Answer, path: str) -> Answer:
        """The answer when it is div serve's and a success; else the Refused that says why.
        A redirect or a server failure is told whoever answered (a proxy's 502 is worth trying
        again); any other answer is read only when it carries the API's header."""
        status = answer.status
        ours = answer.headers.get(api_header.HEADER) is not None
        if 200 <= status < 300 and ours:
            return answer
        said = self._said(answer) if ours else None
        if 300 <= status < 400:
            location = answer.headers.get("Location", "")
            base = location.split("/api/")[0] if "/api/" in location else location
            raise Refused(REDIRECTED.format(url=self.url, location=location, base=base))
        if status >= 500:
            if said and status == 503:
                raise ServerError(said)
            reason = http.client.responses.get(status, "")
            raise ServerError(SERVER_FAILED.format(url=self.url, status=status, reason=reason))
        if not ours:
            raise Refused(SOMETHING_ELSE.format(url=self.url, where=self.client.where))
        if status == 401 and said is not None:
            raise Unauthorized(said)
        if status == 404:
            raise NotFound(said or self._not_divergent(f"{status}", path))
        if said is None:
            raise Refused(self._not_divergent(f"{status}", path))
        if status == 409:
            raise Conflict(said, answer.json())
        raise Refused(said)

    def _said(self, answer: Answer) -> str | None:
        """The server's one line: "error", or DRF's "detail"; None when it is not our JSON."""
        if "json" not in answer.headers.get("Content-Type", ""):
            return None
        try:
            data = answer.json()
        except ValueError:
            return None
        said = data.get("error", data.get("detail")) if isinstance(data, dict) else None
        return said if isinstance(said, str) else None

    def _not_divergent(self, what: str, path: str) -> str:
        return NOT_DIVERGENT.format(url=self.url, what=what, path=path, where=self.client.where)

    def get(self, path: str, **query) -> dict:
        return self._json(self.request("GET", path, query=query or None), path)

    def send(self, method: str, path: str, data: dict | None = None, *, again: bool = True):
        answer = self.request(method, path, data=data if data is not None else {}, again=again)
        return self._json(answer, path) if answer.body else {}

    def _json(self, answer: Answer, path: str) -> dict:
        try:
            found = answer.json()
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise Refused(self._not_divergent("something other than JSON", path))
        return found


def _why(error: Exception) -> str:
    """What went wrong, in a few words: "connection refused", "timed out"."""
    if isinstance(error, socket.gaierror):
        return f"no such host: {error.strerror or error}".lower()
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted: {error.verify_message}"
    if isinstance(error, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(error, http.client.RemoteDisconnected):
        return "it closed the connection"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__


# ---- div login -------------------------------------------------------------------------------

NO_TOKEN_GIVEN = 'no token on stdin; pipe it in, like: printf %s "$TOKEN" | div login URL'


def login(url: str, token: str) -> tuple[dict, Path]:
    """Check the token against the server (who it is, in which orgs) and only then keep both;
    a token the server refuses, or a server out of reach, keeps nothing."""
    try:
        url = http_url("URL", url)
    except BadSetting as e:
        raise Refused(str(e)) from None
    if not token:
        raise Refused(NO_TOKEN_GIVEN)
    me = Client(url, token, "the address given", "the token given").api().get("/api/me/")
    return me, save(url, token)
