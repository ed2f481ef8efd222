"""The text `div telemetry` prints: the spec's tables, exactly. Pure: no Django, no I/O.

>>> print(key_table([("step", 2, 200, 100, 200), ("loss", 2, 0.5, 0.5, 2.31)]), end="")
key   count  last     min      max
step  2      200      100      200
loss  2      0.5      0.5      2.31
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence

from telemetry.lines import Number, format_number, format_row

GAP = "  "
# Value columns are at least this wide, so a short table reads like the spec's example.
VALUE_WIDTH = 7
SEQ = "seq"  # the header of the x column when points are drawn against their place in the run


def aligned(header: Sequence[str], rows: Iterable[Sequence[str]], min_widths: Sequence[int]) -> str:
    """Columns padded to their widest cell and two spaces; the last column is not padded."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(min_widths[i], *(len(row[i]) for row in table)) for i in range(len(header) - 1)]
    lines = []
    for row in table:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append(GAP.join([*cells, row[-1]]))
    return "".join(line + "\n" for line in lines)


def key_table(keys: Iterable[tuple[str, int, Number | None, Number | None, Number | None]]) -> str:
    """Every key the run has written: (name, count, last, min, max) in order of first arrival."""
    rows = [
        (name, str(count), format_number(last), format_number(low), format_number(high))
        for name, count, last, low, high in keys
    ]
    return aligned(
        ("key", "count", "last", "min", "max"), rows, (0, 0, VALUE_WIDTH, VALUE_WIDTH, 0)
    )


def runs_table(runs: Iterable[tuple[str, str, int | str, int, str]]) -> str:
    """The runs there are: (name, status, points, keys, created)."""
    rows = [
        (name, status, f"{points}", f"{keys}", created)
        for name, status, points, keys, created in runs
    ]
    return aligned(("name", "status", "points", "keys", "created"), rows, (0, 0, 0, 0, 0))


LOST_NOTE = (
    "telemetry: {run} was lost: its supervisor went without recording how the command ended; "
    "what it wrote until then is all here"
)
UNREAD = "unread"
UNREAD_NOTE = (
    "telemetry: {run} has ended but its telemetry is not all read yet; "
    "div serve or div ingest reads it"
)


def points_cell(points: int, unread: bool) -> str:
    """A run's points in the runs list; "(unread)" after them when the run has ended before
    its telemetry was read to its end, so 0 points never looks like a run that wrote none.

    >>> points_cell(0, True), points_cell(412, False)
    ('0 (unread)', '412')
    """
    return f"{points} ({UNREAD})" if unread else f"{points}"


def series(rows: Sequence[Sequence[Number | None]], sep: str = "\t") -> list[str]:
    """Lines of x then one cell per key, for the rows carrying at least one of the keys.

    A missing value is an empty cell, never a zero; so is a missing x. A number never needs
    quoting in CSV, so the same lines serve both forms. A row with every value is formatted in
    one step, a list at a time: this runs for each of a run's 200,000 points.
    """
    if not rows:
        return []
    whole = sep.join(["%r"] * len(rows[0])) + "\n"  # %r is format_number's repr
    lines = [whole % row if None not in row else _partial(row, sep) for row in rows]
    return [line for line in lines if line] if "" in lines else lines


def _partial(row: Sequence[Number | None], sep: str) -> str:
    cells = format_row(row)
    return sep.join(cells) + "\n" if any(cells[1:]) else ""


def header(x: str | None, keys: Sequence[str]) -> list[str]:
    return [x or SEQ, *keys]


def tsv(rows: Iterable[Sequence[str]]) -> Iterator[str]:
    for row in rows:
        yield "\t".join(row) + "\n"


def csv_lines(rows: Iterable[Sequence[str]]) -> Iterator[str]:
    """The same table with commas, quoted where a cell needs it."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in rows:
        writer.writerow(row)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()


def json_line(seq: int, data: dict) -> str:
    return json.dumps({"seq": seq, "data": data}) + "\n"
