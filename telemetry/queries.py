"""Reads shared by the CLI and the API: a run's keys, drops and points, cheaply."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from django.db import connection

from telemetry.lines import Reason
from telemetry.models import Drop, Key, Point, Run

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
