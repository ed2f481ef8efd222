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


def points(run_id: int, *, after: int = 0, upto: int | None = None) -> Iterator[tuple[int, dict]]:
    """(seq, data) in order, after a seq: read in batches with a raw cursor, since a run's
    200,000 points through the ORM cost more than printing them."""
    table = Point._meta.db_table
    while True:
        sql = f"SELECT seq, data FROM {table} WHERE run_id = %s AND seq > %s"
        params: list = [run_id, after]
        if upto is not None:
            sql += " AND seq <= %s"
            params.append(upto)
        with connection.cursor() as cursor:
            cursor.execute(sql + f" ORDER BY seq LIMIT {BATCH}", params)
            rows = cursor.fetchall()
        for seq, data in rows:
            # SQLite gives the stored text, PostgreSQL an already decoded jsonb.
            yield seq, orjson.loads(data) if isinstance(data, (str, bytes)) else data
        if len(rows) < BATCH:
            return
        after = rows[-1][0]
