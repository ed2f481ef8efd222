"""Reads shared by the CLI and the API: a run's keys, drops and points, cheaply."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from django.db import connection

from telemetry.lines import Reason
from telemetry.models import Drop, Key, Point, Run

BATCH = 20_000


def keys_of(run: Run) -> list[Key]:
    return list(Key.objects.filter(run=run).order_by("order"))


def drops_of(run: Run) -> list[tuple[str, int]]:
    counts = dict(Drop.objects.filter(run=run, count__gt=0).values_list("reason", "count"))
    return [(reason, counts[reason]) for reason in Reason if reason in counts]


def _rows(columns: str, params: list, run_id: int, after: int, upto: int | None) -> Iterator[tuple]:
    """(seq, *columns) of a run's points in seq order, after a seq and up to one, in batches
    through a raw cursor: a run's 200,000 points through the ORM cost more than printing them."""
    table = Point._meta.db_table
    while True:
        sql = f"SELECT seq, {columns} FROM {table} WHERE run_id = %s AND seq > %s"
        bounds: list = [run_id, after]
        if upto is not None:
            sql += " AND seq <= %s"
            bounds.append(upto)
        with connection.cursor() as cursor:
            cursor.execute(sql + f" ORDER BY seq LIMIT {BATCH}", [*params, *bounds])
            rows = cursor.fetchall()
        yield from rows
        if len(rows) < BATCH:
            return
        after = rows[-1][0]


def points(run_id: int, *, after: int = 0, upto: int | None = None) -> Iterator[tuple[int, dict]]:
    """(seq, data) in order, after a seq."""
    for seq, data in _rows("data", [], run_id, after, upto):
        # SQLite gives the stored text, PostgreSQL an already decoded jsonb.
        yield seq, orjson.loads(data) if isinstance(data, (str, bytes)) else data


def columns(
    run_id: int, x: str | None, keys: list[str], *, after: int = 0, upto: int | None = None
) -> Iterator[tuple]:
    """(x, value of each key) per point, None where a point lacks one: the database pulls out
    just these keys, where decoding whole points would cost more than printing them."""
    sql, params = [], []
    for key in [x, *keys]:
        part, values = _extract(key, as_float=False)
        sql.append(part)
        params += values
    rows = _rows(", ".join(sql), params, run_id, after, upto)
    if connection.vendor == "postgresql":
        # Django reads jsonb as its text: 41200 stays an integer, 0.0412 a float.
        for row in rows:
            yield tuple(None if v is None else orjson.loads(v) for v in row[1:])
    else:
        for row in rows:
            yield row[1:]


def _extract(key: str | None, *, as_float: bool = True) -> tuple[str, list]:
    """SQL for one key of a point's data, and its parameters; None is the point's seq."""
    if key is None:
        return "seq", []
    if connection.vendor == "postgresql":
        # float8 for charts; the jsonb itself where an integer must stay one.
        return ("(data -> %s)::float8" if as_float else "(data -> %s)"), [key]
    return "json_extract(data, %s)", ['$."' + key + '"']


def series(run_id: int, y: str, x: str | None, *, upto: int) -> tuple[list, list]:
    """A key's points up to a seq as (xs, ys) in seq order, leaving off points without the x key.

    `upto` is the run's point count when the request began: the tab then takes live points
    from the seq after it, with none missed and none twice. Two values are pulled out of each
    row in SQL and the filtering done here: asking SQLite to test them too would pull each
    out twice.
    """
    x_sql, x_params = _extract(x)
    y_sql, y_params = _extract(y)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {x_sql}, {y_sql} FROM {Point._meta.db_table}"
            " WHERE run_id = %s AND seq <= %s ORDER BY seq",
            [*x_params, *y_params, run_id, upto],
        )
        rows = cursor.fetchall()
    if not rows:
        return [], []
    xs, ys = map(list, zip(*rows, strict=True))
    if None in xs or None in ys:  # scans in C: the usual dense key pays nothing more
        kept = [(a, b) for a, b in rows if b is not None and a is not None]
        return [a for a, _ in kept], [b for _, b in kept]
    return xs, ys
