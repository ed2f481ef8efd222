"""Where a run's points are in the database, and the SQL that writes and reads them there.

- Point: the points not sealed yet, a JSON row each: fewer than a window's worth, the newest.
- Chunk: the sealed points, one row per key per window of chunks.WINDOW points.
- Overview and OverviewPart: min/max buckets of each (y, x) pair the panels draw, as of a seq.

The ingester seals a window in one transaction: its chunks in, its Point rows out, the overviews
rewritten, Run.sealed moved on. A reader reads without a transaction, in this order: the Point
rows first, then Run.sealed (or an overview's own `upto`), then the chunks, which never change
once written. A seal between the first read and the second leaves the same points in both
places, and the reader takes the ones past `sealed` from the rows: none is missed, none is
read twice. docs/storage.md says why the points are laid out this way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import orjson
from django.db import connection

from telemetry import chunks, models
from telemetry.chunks import Column, Packed
from telemetry.lines import Number
from telemetry.overview import Overview
from telemetry.sealing import Sealing

SEQ = 0  # the x_no of a pair drawn against the point's seq
CHUNK_FIELDS = "window_no, key_no, count, first_seq, stride, seqs, kind, vals"


def _table(model) -> str:
    return model._meta.db_table


def _marks(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values))


# ---- reads ------------------------------------------------------------------------------------


def tail(run_id: int, *, after: int = 0, upto: int | None = None) -> list[tuple[int, dict]]:
    """The points stored whole after a seq, up to one, in order."""
    sql = f"SELECT seq, data FROM {_table(models.Point)} WHERE run_id = %s AND seq > %s"
    params: list = [run_id, after]
    if upto is not None:
        sql += " AND seq <= %s"
        params.append(upto)
    with connection.cursor() as cursor:
        cursor.execute(sql + " ORDER BY seq", params)
        rows = cursor.fetchall()
    loads = orjson.loads
    return [(seq, loads(data)) for seq, data in rows]


def tails(run_ids: Sequence[int]) -> list[tuple[int, int, dict]]:
    """(run id, seq, data) of the points stored whole of many runs: a live run's newest."""
    if not run_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT run_id, seq, data FROM {_table(models.Point)}"
            f" WHERE run_id IN ({_marks(run_ids)}) ORDER BY run_id, seq",
            list(run_ids),
        )
        rows = cursor.fetchall()
    loads = orjson.loads
    return [(run_id, seq, loads(data)) for run_id, seq, data in rows]


def sealed(run_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT sealed FROM {_table(models.Run)} WHERE id = %s", [run_id])
        row = cursor.fetchone()
    return row[0] if row else 0


def columns(
    run_id: int, key_nos: Sequence[int] | None, first: int, last: int
) -> dict[int, dict[int, Column]]:
    """window -> key_no -> that key's column, for the windows first to last (every key when
    key_nos is None). Chunks never change once written, so any moment's read is the same."""
    sql = f"SELECT {CHUNK_FIELDS} FROM {_table(models.Chunk)} WHERE run_id = %s"
    params: list = [run_id]
    if key_nos is not None:
        if not key_nos:
            return {}
        sql += f" AND key_no IN ({_marks(key_nos)})"
        params += key_nos
    sql += " AND window_no BETWEEN %s AND %s ORDER BY window_no, key_no"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, first, last])
        rows = cursor.fetchall()
    found: dict[int, dict[int, Column]] = {}
    for window, key_no, count, first_seq, stride, seqs, kind, vals in rows:
        packed = Packed(count, first_seq, stride, seqs, kind, vals, 0.0, 0.0)
        found.setdefault(window, {})[key_no] = chunks.unpack(window, packed)
    return found


def pair_points(
    run_id: int, y_no: int, x_no: int | None, windows: Sequence[int], last_seq: int
) -> tuple[list, list]:
    """y's sealed values in these windows (in order), and x's value at each, up to a seq;
    points without x are left off, and x None is the seq. Only y's and x's chunks are read."""
    xs: list = []
    ys: list = []
    if not windows:
        return xs, ys
    last = chunks.window_of(last_seq)
    wanted = [y_no] if x_no is None else [y_no, x_no]
    found = columns(run_id, wanted, windows[0], windows[-1])
    for window in windows:
        own = found.get(window, {})
        column = own.get(y_no)
        if column is None or (x_no is not None and x_no not in own):
            continue
        if window == last:
            column = chunks.within(column, 1, last_seq)
        a, b = chunks.against(own[x_no] if x_no is not None else None, column, window)
        xs += a
        ys += b
    return xs, ys


def windows_within(run_id: int, key_no: int, low: float, high: float, last: int) -> list[int]:
    """The windows up to `last` where the key has a value from low to high: where an x range
    is. A run's x grows as a rule, so these are a few neighbouring windows."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT window_no FROM {_table(models.Chunk)} WHERE run_id = %s AND key_no = %s"
            " AND window_no <= %s AND high >= %s AND low <= %s ORDER BY window_no",
            [run_id, key_no, last, low, high],
        )
        return [row[0] for row in cursor.fetchall()]


def overview(
    run_id: int, y_no: int, x_no: int, *, buckets: bool = True
) -> tuple[Overview, int] | None:
    """A pair's overview and the seq it is as of; one statement, so its parts agree with it.
    Without its buckets: what its size, point count and gap say, for the price of a row."""
    where = "o.run_id = %s AND o.y_no = %s AND o.x_no = %s"
    if not buckets:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT o.head, o.upto FROM {_table(models.Overview)} o WHERE {where}",
                [run_id, y_no, x_no],
            )
            row = cursor.fetchone()
        return None if row is None else (Overview.stored(row[0], [], b""), row[1])
    found = _overviews(where, [run_id, y_no, x_no])
    return next(iter(found.values()), None)


def overviews(run_id: int) -> dict[tuple[int, int], tuple[Overview, int]]:
    """Every overview of a run, by (y_no, x_no): what the ingester takes up."""
    return _overviews("o.run_id = %s", [run_id])


def _overviews(where: str, params: list) -> dict[tuple[int, int], tuple[Overview, int]]:
    o, p = _table(models.Overview), _table(models.OverviewPart)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT o.y_no, o.x_no, o.upto, o.head, o.coarse, p.buckets FROM {o} o"
            f" LEFT JOIN {p} p ON p.overview_id = o.id WHERE {where}"
            " ORDER BY o.y_no, o.x_no, p.part",
            params,
        )
        rows = cursor.fetchall()
    found: dict[tuple[int, int], tuple] = {}
    for y_no, x_no, upto, head, coarse, part in rows:
        entry = found.setdefault((y_no, x_no), (head, coarse, upto, []))
        if part is not None:
            entry[3].append(part)
    return {
        pair: (Overview.stored(head, parts, coarse), upto)
        for pair, (head, coarse, upto, parts) in found.items()
    }


def coarse_overviews(run_ids: Sequence[int], y: str, x: str | None) -> dict[int, tuple]:
    """run id -> (overview head, coarse level, upto) of y against x, for many runs in one read:
    the part a sparkline needs, and nothing of the fine level."""
    if not run_ids:
        return {}
    o, k = _table(models.Overview), _table(models.Key)
    order = connection.ops.quote_name("order")
    sql = (
        f"SELECT o.run_id, o.head, o.coarse, o.upto FROM {o} o"
        f" JOIN {k} ky ON ky.run_id = o.run_id AND ky.{order} = o.y_no"
    )
    params: list = []
    if x is None:
        condition = "o.x_no = 0"
    else:
        sql += f" JOIN {k} kx ON kx.run_id = o.run_id AND kx.{order} = o.x_no"
        condition = "kx.name = %s"
        params.append(x)
    sql += f" WHERE o.run_id IN ({_marks(run_ids)}) AND ky.name = %s AND {condition}"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*run_ids, y, *params])
        return {run_id: (head, coarse, upto) for run_id, head, coarse, upto in cursor.fetchall()}


# ---- writes: the caller holds the transaction ---------------------------------------------------


def tail_append(run_id: int, points: Iterable[tuple[int, dict[str, Number]]]) -> None:
    rows = [(run_id, seq, orjson.dumps(numbers).decode()) for seq, numbers in points]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {_table(models.Point)} (run_id, seq, data) VALUES (%s, %s, %s)", rows
            )


def seal(
    run_id: int,
    *,
    sealing: Sealing,
    windows: Sequence[tuple[int, dict[str, Column]]],
    key_nos: dict[str, int],
) -> None:
    """Store windows the sealing has just completed as chunks, drop their whole points, and
    take them into the overviews of the pairs the panels draw. key_nos: every key written so
    far, in order of first arrival, with its Key.order."""
    rows = []
    continued = {}
    if windows:
        first, found = windows[0]
        if min(column.seqs[0] for column in found.values()) > chunks.window_start(first):
            continued = _continued(run_id, first)
    for window, found in windows:
        for name, column in found.items():
            before = continued.get(key_nos[name]) if window == windows[0][0] else None
            if before is not None:
                column = chunks.joined(before, column)
            c = chunks.pack(window, column)
            rows.append(
                (run_id, key_nos[name], window, c.count, c.first, c.stride)
                + (c.seqs, c.kind, c.values, c.low, c.high)
            )
    with connection.cursor() as cursor:
        if continued:
            cursor.execute(
                f"DELETE FROM {_table(models.Chunk)} WHERE run_id = %s AND window_no = %s"
                f" AND key_no IN ({_marks(continued)})",
                [run_id, windows[0][0], *continued],
            )
        cursor.executemany(
            f"INSERT INTO {_table(models.Chunk)} (run_id, key_no, window_no, count, first_seq,"
            " stride, seqs, kind, vals, low, high) VALUES"
            " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        cursor.execute(
            f"DELETE FROM {_table(models.Point)} WHERE run_id = %s AND seq <= %s",
            [run_id, sealing.sealed],
        )

    def numbered(pair: tuple[str, str | None]) -> tuple[int, int]:
        y, x = pair
        return key_nos[y], SEQ if x is None else key_nos[x]

    changed, gone = sealing.fold(windows, list(key_nos))
    for pair in changed:
        summary = sealing.overviews[pair]
        if summary.wants_fine():
            # Long enough now to draw a first view: its fine level from every point it has.
            y_no, x_no = numbered(pair)
            last = range(chunks.window_of(sealing.sealed) + 1)
            points = pair_points(run_id, y_no, None if x_no == SEQ else x_no, last, sealing.sealed)
            summary.begin_fine(*points)
    overviews_store(
        run_id,
        changed=[(numbered(pair), sealing.overviews[pair]) for pair in changed],
        gone=[numbered(pair) for pair in gone],
        upto=sealing.sealed,
    )


def _continued(run_id: int, window: int) -> dict[int, Column]:
    """The chunks a window already has: none, but for a window sealed part-full when its run's
    telemetry closed and read on since (a lost run heard from again). Their columns are
    continued, not written twice; the overviews hold their points already."""
    return columns(run_id, None, window, window).get(window, {})


def overviews_store(
    run_id: int,
    *,
    changed: Iterable[tuple[tuple[int, int], Overview]],
    gone: Iterable[tuple[int, int]],
    upto: int,
) -> None:
    """Write the overviews that took in new points (or are new), as of `upto`; drop the gone."""
    o, p = _table(models.Overview), _table(models.OverviewPart)
    with connection.cursor() as cursor:
        for y_no, x_no in gone:
            where = "run_id = %s AND y_no = %s AND x_no = %s"
            cursor.execute(
                f"DELETE FROM {p} WHERE overview_id IN (SELECT id FROM {o} WHERE {where})",
                [run_id, y_no, x_no],
            )
            cursor.execute(f"DELETE FROM {o} WHERE {where}", [run_id, y_no, x_no])
        upsert = (
            f"INSERT INTO {o} (run_id, y_no, x_no, upto, head, coarse)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_id, y_no, x_no)"
            " DO UPDATE SET upto = excluded.upto, head = excluded.head, coarse = excluded.coarse"
        )
        alone = []  # overviews without fine buckets (yet): one statement for them all
        for (y_no, x_no), summary in changed:
            head, parts, count, coarse = summary.settle()
            if summary.fine is None:
                alone.append((run_id, y_no, x_no, upto, head, coarse))
                continue
            cursor.execute(upsert + " RETURNING id", [run_id, y_no, x_no, upto, head, coarse])
            (overview_id,) = cursor.fetchone()
            cursor.executemany(
                f"INSERT INTO {p} (overview_id, part, buckets) VALUES (%s, %s, %s)"
                " ON CONFLICT (overview_id, part) DO UPDATE SET buckets = excluded.buckets",
                [(overview_id, part, blob) for part, blob in parts],
            )
            cursor.execute(
                f"DELETE FROM {p} WHERE overview_id = %s AND part >= %s", [overview_id, count]
            )
        if alone:
            cursor.executemany(upsert, alone)
