"""Where the reading commands read from: this machine's database (Local), or the server's API
(Remote, when this machine has a token). Both hand the commands the same values, which the
same pure tables.py prints: `div telemetry`, `div log` and `div secrets` print the same bytes
either way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import BinaryIO

from telemetry import logs, queries, remote, services
from telemetry.client_api import LOG_BYTES
from telemetry.errors import Refused, RunNotFound
from telemetry.layout import panel_x, point_x
from telemetry.models import Key, Run, run_number

PAGE = 10_000  # points a request: the API's most


def current():
    """Remote when this machine talks to a server, else Local."""
    client = remote.client()
    return Local() if client is None else Remote(client)


class Local:
    def runs_listing(self) -> list[tuple]:
        return queries.runs_listing()

    def report(self, name: str, *, x: str | None) -> queries.Report:
        return queries.report(name, x=x)

    def stretches(self, report: queries.Report, *, follow: bool) -> Iterator[tuple[int, int]]:
        return queries.stretches(report.run, follow=follow)

    def point_batches(self, report: queries.Report, after: int, upto: int):
        return queries.point_batches(report.run.pk, after=after, upto=upto)

    def column_batches(self, report, x, keys, after: int, upto: int):
        return queries.column_batches(report.run.pk, x, keys, after=after, upto=upto)

    def log(self, name: str, out: BinaryIO, *, follow: bool) -> None:
        logs.follow(queries.run_named(name, user=queries.EVERY_RUN), out, follow=follow)

    def secret_names(self, org: str) -> list[str]:
        return queries.secret_names(services.secrets_org(name=org).name)

    def secret_put(self, org: str, name: str, value: str) -> None:
        services.secret_put(org=org, name=name, value=value)

    def secret_delete(self, org: str, name: str) -> None:
        services.secret_delete(org=org, name=name)

    def tokens(self, user: str | None) -> list[tuple]:
        """(name, user, created, last used) of a user's tokens, or of everyone's."""
        owner = None if user is None else services.user_named(user)
        return [(t.name, t.user.username, t.created, t.last_used) for t in queries.tokens_of(owner)]

    def token_create(self, user: str | None, name: str | None) -> str:
        if user is None:
            raise Refused(NAME_THE_USER)
        return services.token_create(user=services.user_named(user), name=name)[1]

    def token_revoke(self, user: str | None, name: str) -> None:
        if user is None:
            raise Refused(NAME_THE_USER)
        services.token_revoke(user=services.user_named(user), name=name)


NAME_THE_USER = "name whose token it is with --user, like --user alice"


class Remote:
    """The same reads over the API, as the token's user sees them."""

    def __init__(self, client: remote.Client):
        self.api = client.api()

    def _run(self, name: str) -> dict:
        try:
            return self.api.get(f"/api/runs/{name}/")
        except remote.NotFound:
            raise RunNotFound(queries.UNKNOWN_RUN.format(name=name)) from None

    def runs_listing(self) -> list[tuple]:
        runs = self.api.get("/api/runs/listing/")["runs"]
        return [
            (r["name"], r["status"], r["points"], r["keys"], _moment(r["created"])) for r in runs
        ]

    def report(self, name: str, *, x: str | None) -> queries.Report:
        """The run as `div telemetry RUN` reads it locally (queries.report), from its detail."""
        detail = self._run(name)
        run = Run(pk=run_number(detail["name"]))
        self._update(run, detail)
        keys = [
            Key(**{field: k[field] for field in KEY_FIELDS}, order=i)
            for i, k in enumerate(detail["keys"], 1)
        ]
        x = panel_x({"x": None}, {"x": x}, [k.name for k in keys])
        passed = [
            (k.name, k.passed_over, self._x_at(name, k.first_passed_seq, x))
            for k in keys
            if k.passed_over
        ]
        drops = [(d["reason"], d["count"]) for d in detail["drops"]]
        return queries.Report(run, keys, drops, x, passed)

    @staticmethod
    def _update(run: Run, detail: dict) -> None:
        run.status, run.telemetry_closed, run.points = (
            detail["status"],
            detail["closed"],
            detail["points"],
        )

    def _x_at(self, name: str, seq: int | None, x: str | None):
        if seq is None:
            return None
        found = self.api.get(f"/api/runs/{name}/points/", after=seq - 1, limit=1)["points"]
        return point_x(x, seq, found[0]["data"] if found else {})

    def stretches(self, report: queries.Report, *, follow: bool) -> Iterator[tuple[int, int]]:
        """As queries.stretches: the points so far, then each new stretch until the run has
        ended and its last line is stored (the server's ingester judges a silent run lost)."""
        after = 0
        while True:
            self._update(report.run, self._run(report.run.name))
            closed, upto = report.run.telemetry_closed, report.run.points
            yield after, upto
            after = upto
            if not follow or closed:
                return
            time.sleep(queries.FOLLOW_POLL)

    def point_batches(self, report: queries.Report, after: int, upto: int):
        while after < upto:
            found = self.api.get(
                f"/api/runs/{report.run.name}/points/", after=after, limit=min(PAGE, upto - after)
            )["points"]
            if not found:
                return
            yield [(p["seq"], p["data"]) for p in found]
            after = found[-1]["seq"]

    def column_batches(self, report, x, keys, after: int, upto: int):
        for batch in self.point_batches(report, after, upto):
            if x is None:
                yield [(seq, *map(data.get, keys)) for seq, data in batch]
            else:
                wanted = [x, *keys]
                yield [tuple(map(data.get, wanted)) for _, data in batch]

    def log(self, name: str, out: BinaryIO, *, follow: bool) -> None:
        """As logs.follow: the bytes as written, until the run has ended (following)."""
        offset = 0
        while True:
            try:
                answer = self.api.request(
                    "GET", f"/api/runs/{name}/log/bytes/", query={"offset": offset}
                )
            except remote.NotFound:
                raise RunNotFound(queries.UNKNOWN_RUN.format(name=name)) from None
            if answer.body:
                out.write(answer.body)
                out.flush()
                offset += len(answer.body)
            ended = answer.headers.get("Divergent-Live") != "1"
            if len(answer.body) == LOG_BYTES:
                continue  # more at once
            if not follow or ended:
                return
            time.sleep(logs.LOG_POLL)

    def secret_names(self, org: str) -> list[str]:
        return self.api.get(f"/api/orgs/{org}/secrets/")["names"]

    def secret_put(self, org: str, name: str, value: str) -> None:
        self.api.send("PUT", f"/api/orgs/{org}/secrets/{name}/", {"value": value})

    def secret_delete(self, org: str, name: str) -> None:
        self.api.send("DELETE", f"/api/orgs/{org}/secrets/{name}/")

    def tokens(self, user: str | None) -> list[tuple]:
        _own_only(user)
        found = self.api.get("/api/tokens/")["tokens"]
        return [(t["name"], None, _moment(t["created"]), _moment(t["last_used"])) for t in found]

    def token_create(self, user: str | None, name: str | None) -> str:
        _own_only(user)
        return self.api.send("POST", "/api/tokens/", {"name": name}, again=False)["token"]

    def token_revoke(self, user: str | None, name: str) -> None:
        _own_only(user)
        try:
            self.api.send("DELETE", f"/api/tokens/{name}/")
        except remote.NotFound as e:
            raise Refused(str(e)) from None


OWN_TOKENS = "--user works on the server; here, the tokens are those of the token's own user"


def _own_only(user: str | None) -> None:
    if user is not None:
        raise Refused(OWN_TOKENS)


KEY_FIELDS = ("name", "count", "last", "min", "max", "passed_over", "first_passed_seq")


def _moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))
