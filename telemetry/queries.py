"""Reads shared by the CLI, the API and the pages: a run by name, its keys, drops and points,
cheaply."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import orjson
from django.db import connection
from django.db.models import Count

from telemetry import supervision
from telemetry.errors import RunNotFound
from telemetry.ingest import Follower
from telemetry.layout import panel_x, point_x
from telemetry.lines import Number, Reason
from telemetry.models import Drop, Key, Org, Point, Run, Secret, Token
from telemetry.services import token_digest
from telemetry.tables import points_cell

BATCH = 5000


def keys_of(run: Run) -> list[Key]:
    return list(Key.objects.filter(run=run).order_by("order"))


def drops_of(run: Run) -> list[tuple[str, int]]:
    counts = dict(Drop.objects.filter(run=run, count__gt=0).values_list("reason", "count"))
    return [(reason, counts[reason]) for reason in Reason if reason in counts]


def point_batches(
    run_id: int, *, after: int = 0, upto: int | None = None
) -> Iterator[list[tuple[int, dict]]]:
    """A run's (seq, data) in seq order, after a seq and up to one, a list at a time.

    Read through a raw cursor and decoded once with orjson: a run's 200,000 points through the
    ORM, or the database pulling keys out of each row's JSON, cost more than printing them.
    Whole lists, not a point at a time, since each layer of generators over 200,000 points
    costs as much as the decoding.
    """
    table = Point._meta.db_table
    loads = orjson.loads
    while True:
        sql = f"SELECT seq, data FROM {table} WHERE run_id = %s AND seq > %s"
        params: list = [run_id, after]
        if upto is not None:
            sql += " AND seq <= %s"
            params.append(upto)
        with connection.cursor() as cursor:
            cursor.execute(sql + f" ORDER BY seq LIMIT {BATCH}", params)
            rows = cursor.fetchall()
        # SQLite gives the stored text; so does PostgreSQL's jsonb, as Django reads it.
        yield [(seq, loads(data) if isinstance(data, (str, bytes)) else data) for seq, data in rows]
        if len(rows) < BATCH:
            return
        after = rows[-1][0]


def points(run_id: int, *, after: int = 0, upto: int | None = None) -> Iterator[tuple[int, dict]]:
    """(seq, data) in order, after a seq."""
    for batch in point_batches(run_id, after=after, upto=upto):
        yield from batch


def column_batches(
    run_id: int, x: str | None, keys: list[str], *, after: int = 0, upto: int | None = None
) -> Iterator[list[tuple]]:
    """Lists of (x, value of each key) per point, None where a point lacks one; x None is the
    point's seq."""
    for batch in point_batches(run_id, after=after, upto=upto):
        if x is None:
            yield [(seq, *map(data.get, keys)) for seq, data in batch]
        else:
            wanted = [x, *keys]
            yield [tuple(map(data.get, wanted)) for _, data in batch]


def series(run_id: int, y: str, x: str | None, *, upto: int) -> tuple[list, list]:
    """A key's points up to a seq as (xs, ys) in seq order, leaving off points without the x key.

    `upto` is the run's point count when the request began: the tab then takes live points
    from the seq after it, with none missed and none twice. The database pulls out just the
    two numbers: no point is decoded whole in Python.
    """
    x_sql, x_params = _extract(x)
    y_sql, y_params = _extract(y)
    table = Point._meta.db_table
    where = "WHERE run_id = %s AND seq <= %s ORDER BY seq"
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # Two JSON arrays built in SQLite and decoded in C: no Python object per row. The
            # -> operator hands each number on as written, where json_extract would round it.
            x_json = "seq" if x is None else "data -> %s"
            cursor.execute(
                f"SELECT json_group_array({x_json}), json_group_array(data -> %s)"
                f" FROM (SELECT seq, data FROM {table} {where})",
                [*x_params, *y_params, run_id, upto],
            )
            xs, ys = map(orjson.loads, cursor.fetchone())
        else:
            cursor.execute(
                f"SELECT {x_sql}, {y_sql} FROM {table} {where}",
                [*x_params, *y_params, run_id, upto],
            )
            rows = cursor.fetchall()
            xs, ys = (list(column) for column in zip(*rows, strict=True)) if rows else ([], [])
    if None in xs or None in ys:  # a scan in C: the usual dense key pays nothing more
        kept = [(a, b) for a, b in zip(xs, ys, strict=True) if a is not None and b is not None]
        return [a for a, _ in kept], [b for _, b in kept]
    return xs, ys


def _extract(key: str | None) -> tuple[str, list]:
    """SQL for one number of a point's data, and its parameters; None is the point's seq."""
    if key is None:
        return "seq", []
    if connection.vendor == "postgresql":
        return "(data -> %s)::float8", [key]
    return "json_extract(data, %s)", ['$."' + key + '"']


# ---- what the CLI, the API and the pages look up by name ---------------------------------

UNKNOWN_RUN = 'there is no run "{name}"; div telemetry lists the runs'
EVERY_RUN = object()  # the CLI on the server's own machine reads every org's runs
FOLLOW_POLL = 0.2  # seconds between looks at a followed run


def run_named(name: str, *, user) -> Run:
    """run-7 or 7 -> the run, if `user` may see it (EVERY_RUN: any run), or RunNotFound:
    another org's run is not found either, so its name says nothing."""
    runs = Run.objects.all() if user is EVERY_RUN else Run.objects.visible_to(user)
    run = runs.named(name).select_related("org", "layout").first()
    if run is None:
        raise RunNotFound(UNKNOWN_RUN.format(name=name))
    return run


def runs_listing(*, user=EVERY_RUN) -> list[tuple[str, str, str, int, datetime]]:
    """Every run (the user's, over the API), oldest first: (name, status, points, keys,
    created); a run whose supervisor has gone is listed as lost, and an ended run not all
    read says so by its points."""
    supervision.reap_live()
    runs = Run.objects.all() if user is EVERY_RUN else Run.objects.visible_to(user)
    runs = runs.annotate(key_count=Count("keys")).order_by("pk")
    return [
        (r.name, r.status, points_cell(r.points, r.telemetry_unread), r.key_count, r.created)
        for r in runs
    ]


@dataclass
class Report:
    """What `div telemetry RUN` says about a run besides its points."""

    run: Run
    keys: list[Key]  # in order of first arrival
    drops: list[tuple[str, int]]
    x: str | None  # the x its points are printed against; None: their place in the run
    # (key, values passed over, the x of the point where the first was) for each such key
    passed_over: list[tuple[str, int, Number | None]]

    @property
    def written(self) -> list[str]:
        return [k.name for k in self.keys]

    @property
    def lost(self) -> bool:
        return self.run.status == Run.Status.LOST and self.run.telemetry_closed

    @property
    def unread(self) -> bool:
        return self.run.telemetry_unread

    @property
    def key_rows(self) -> list[tuple]:
        return [(k.name, k.count, k.last, k.min, k.max) for k in self.keys]


def report(name: str, *, x: str | None = None) -> Report:
    """A run's keys, drops and passed-over values, with x resolved as a panel's is."""
    run = run_named(name, user=EVERY_RUN)
    keys = keys_of(run)
    x = panel_x({"x": None}, {"x": x}, [k.name for k in keys])
    passed = [
        (k.name, k.passed_over, x_at(run, k.first_passed_seq, x)) for k in keys if k.passed_over
    ]
    return Report(run, keys, drops_of(run), x, passed)


def x_at(run: Run, seq: int | None, x: str | None) -> Number | None:
    """The x of the point at a seq: its seq when x is None; None when it has no such x."""
    if seq is None:
        return None
    data = Point.objects.filter(run=run, seq=seq).values_list("data", flat=True).first()
    return point_x(x, seq, data or {})


def stretches(run: Run, *, follow: bool) -> Iterator[tuple[int, int]]:
    """(after, upto): the seqs stored so far, then, following, each new stretch as it is
    stored, until the run has ended and its last line is stored."""
    after = 0
    follower = Follower(run, read=follow)
    while True:
        follower.step()  # ends a lost run, and reads its file when nothing else does
        closed, upto = run.telemetry_closed, run.points
        yield after, upto
        after = upto
        if not follow or closed:
            return
        time.sleep(FOLLOW_POLL)


def secret_names(org: str) -> list[str]:
    return list(
        Secret.objects.filter(org__name=org).order_by("name").values_list("name", flat=True)
    )


def token_named(text: str) -> Token | None:
    """The token whose text this is, with its user; None for one this server does not know."""
    return Token.objects.select_related("user").filter(digest=token_digest(text)).first()


def tokens_of(user=None) -> list[Token]:
    """A user's tokens by name; every user's (user, then name) when none is named."""
    tokens = Token.objects.select_related("user").order_by("user__username", "name")
    return list(tokens if user is None else tokens.filter(user=user))


def org_of(user, name: str) -> Org | None:
    """The org by name if the user is a member of it: any other is as if there were none."""
    return Org.objects.filter(name=name, membership__user=user).first()


def orgs_of(user) -> list[str]:
    return list(
        Org.objects.filter(membership__user=user).order_by("name").values_list("name", flat=True)
    )
