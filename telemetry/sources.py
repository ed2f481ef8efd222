"""Where the reading commands read from: this machine's database (Local), or the server's API
(Remote, when this machine has a token). Both hand the commands the same values, which the
same pure tables.py prints: `div telemetry`, `div log` and `div secrets` print the same bytes
either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import BinaryIO

from telemetry import following, joins, logs, queries, remote, services
from telemetry.client_api import LOG_BYTES
from telemetry.errors import Refused, RunNotFound
from telemetry.following import Look
from telemetry.ingest import Follower
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

    def reports(self, names: Sequence[str], *, x: str | None) -> list[queries.Report]:
        return queries.reports(names, x=x)

    def watcher(self, report: queries.Report, *, follow: bool) -> Callable[[], None]:
        """One look at the run, as judged: a run whose supervisor has gone ends as lost, and
        following, an ended run's file is read here when nothing else reads it."""
        return Follower(report.run, read=follow).step

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
        keys = _keys(detail)
        return self._report(detail, keys, panel_x({"x": None}, {"x": x}, [k.name for k in keys]))

    def reports(self, names: Sequence[str], *, x: str | None) -> list[queries.Report]:
        """As queries.reports: every run the user sees, or RunNotFound for the first not."""
        details = [self._run(name) for name in names]
        keys = [_keys(detail) for detail in details]
        shared = joins.joined_x(x, [[k.name for k in found] for found in keys])
        return [
            self._report(detail, found, shared) for detail, found in zip(details, keys, strict=True)
        ]

    def _report(self, detail: dict, keys: list[Key], x: str | None) -> queries.Report:
        run = Run(pk=run_number(detail["name"]))
        self._update(run, detail)
        passed = [
            (k.name, k.passed_over, self._x_at(run.name, k.first_passed_seq, x))
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

    def watcher(self, report: queries.Report, *, follow: bool) -> Callable[[], None]:
        """One look at the run: its state and points as the server has them (its ingester
        judges a silent run lost)."""
        return lambda: self._update(report.run, self._run(report.run.name))

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
        """As queries.column_batches: x's column, then each key's (the printer looks for None)."""
        for batch in self.point_batches(report, after, upto):
            xs = [seq for seq, _ in batch] if x is None else [data.get(x) for _, data in batch]
            yield [xs, *([data.get(key) for _, data in batch] for key in keys)], False

    def log(self, name: str, out: BinaryIO, *, follow: bool) -> None:
        """As logs.follow: the bytes as written, until the run has ended (following)."""
        offset = 0

        def look() -> Look:
            nonlocal offset
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
            if len(answer.body) == LOG_BYTES:
                return Look.MORE
            return Look.GOING if answer.headers.get("Divergent-Live") == "1" else Look.ENDED

        following.follow(look, follow=follow, pause=logs.LOG_POLL)

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


def _keys(detail: dict) -> list[Key]:
    return [
        Key(**{field: k[field] for field in KEY_FIELDS}, order=i)
        for i, k in enumerate(detail["keys"], 1)
    ]


def _moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))
