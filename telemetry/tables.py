"""The text `div telemetry` prints: the spec's tables, exactly. Pure: no Django, no I/O.

>>> print(key_table([("step", 2, 200, 100, 200), ("loss", 2, 0.5, 0.5, 2.31)]), end="")
key   count  last     min      max
step  2      200      100      200
loss  2      0.5      0.5      2.31
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

from telemetry.lines import MAX_LINE_BYTES, Number, format_number, format_row, notice
from telemetry.names import shown

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


KeyRow = tuple[str, int, Number | None, Number | None, Number | None]
KEY_HEADER = ("key", "count", "last", "min", "max")
KEY_WIDTHS = (0, 0, VALUE_WIDTH, VALUE_WIDTH, 0)


def key_table(keys: Iterable[KeyRow]) -> str:
    """Every key the run has written: (name, count, last, min, max) in order of first arrival."""
    return aligned(KEY_HEADER, map(_key_cells, keys), KEY_WIDTHS)


def runs_key_table(runs: Iterable[tuple[str, Iterable[KeyRow]]]) -> str:
    """The key tables of several runs as one, a first column naming the run: (run, its key
    rows) in the order the runs were named.

    >>> print(runs_key_table([("run-3", [("loss", 2, 0.5, 0.5, 2.31)]), ("run-7", [])]), end="")
    run    key   count  last     min      max
    run-3  loss  2      0.5      0.5      2.31
    """
    rows = [(run, *_key_cells(key)) for run, keys in runs for key in keys]
    return aligned(("run", *KEY_HEADER), rows, (0, *KEY_WIDTHS))


def _key_cells(key: KeyRow) -> tuple[str, ...]:
    name, count, last, low, high = key
    return name, str(count), format_number(last), format_number(low), format_number(high)


def runs_table(runs: Iterable[tuple[str, str, int | str, int, str | datetime]]) -> str:
    """The runs there are: (name, status, points, keys, created)."""
    rows = [
        (name, status, f"{points}", f"{keys}", _minute(created))
        for name, status, points, keys, created in runs
    ]
    return aligned(("name", "status", "points", "keys", "created"), rows, (0, 0, 0, 0, 0))


def tokens_table(tokens: Iterable[tuple[str, str | None, datetime, datetime | None]]) -> str:
    """API tokens: (name, user, created, last used), never their text; the user column only
    when the tokens are of several users (the server's `div token list`).

    >>> at = datetime(2026, 11, 30, 4, 55)
    >>> print(tokens_table([("laptop", None, at, None)]), end="")
    name    created           last used
    laptop  2026-11-30 04:55  never
    """
    tokens = list(tokens)
    whose = any(user is not None for _, user, _, _ in tokens)
    rows = [
        (name, *([user or ""] if whose else []), _minute(made), _minute(used) if used else "never")
        for name, user, made, used in tokens
    ]
    header = ("name", *(["user"] if whose else []), "created", "last used")
    return aligned(header, rows, [0] * len(header))


LOST_NOTE = (
    "telemetry: {run} was lost: its supervisor went without recording how the command ended; "
    "what it wrote until then is all here"
)
UNREAD = "unread"
UNREAD_NOTE = (
    "telemetry: {run} has ended but its telemetry is not all read yet; "
    "div serve or div ingest reads it"
)


def state_notes(run: str, lost: bool, unread: bool) -> str:
    """What `div telemetry RUN` says on stderr of a run that was lost, or is not all read."""
    notes = [LOST_NOTE.format(run=run)] if lost else []
    notes += [UNREAD_NOTE.format(run=run)] if unread else []
    return "".join(note + "\n" for note in notes)


def points_cell(points: int, unread: bool) -> str:
    """A run's points in the runs list; "(unread)" after them when the run has ended before
    its telemetry was read to its end, so 0 points never looks like a run that wrote none.

    >>> points_cell(0, True), points_cell(412, False)
    ('0 (unread)', '412')
    """
    return f"{points} ({UNREAD})" if unread else f"{points}"


def _minute(created: str | datetime) -> str:
    return created if isinstance(created, str) else created.strftime("%Y-%m-%d %H:%M")


def series(
    rows: Sequence[Sequence[Number | None]], sep: str = "\t", *, every: bool = False
) -> list[str]:
    """Lines of x then one cell per key, for the rows carrying at least one of the keys (with
    `every`, for every row: a point that carries only x is still a point of the run).

    A missing value is an empty cell, never a zero; so is a missing x. A number never needs
    quoting in CSV, so the same lines serve both forms. A row with every value is formatted in
    one step, a list at a time: this runs for each of a run's 200,000 points.
    """
    if not rows:
        return []
    whole = sep.join(["%r"] * len(rows[0])) + "\n"  # %r is format_number's repr
    lines = [whole % row if None not in row else _partial(row, sep, every) for row in rows]
    return [line for line in lines if line] if "" in lines else lines


def series_of_columns(
    columns: Sequence[Sequence[Number | None]],
    sep: str = "\t",
    *,
    every: bool = False,
    whole: bool = False,
) -> list[str]:
    r"""What `series` prints for the same points given as columns (x's values, then each key's,
    of equal length). A batch with every value, as most of a run's are, is formatted in one
    step: the cells interleaved, one %-format for them all, no Python step a point. `whole`
    says there is no None, as the chunks know: then it is not looked for.

    >>> series_of_columns([[100, 200], [2.31, 1.2]])
    ['100\t2.31\n200\t1.2\n']
    >>> series_of_columns([[100, 200], [None, 1.2]])
    ['200\t1.2\n']
    """
    count = len(columns[0]) if columns else 0
    if not count:
        return []
    if not whole and any(not isinstance(c, range) and None in c for c in columns):
        return series(list(zip(*columns, strict=True)), sep, every=every)
    width = len(columns)
    cells: list = [None] * (count * width)
    for i, column in enumerate(columns):
        cells[i::width] = column
    return [(sep.join(["%r"] * width) + "\n") * count % tuple(cells)]


def _partial(row: Sequence[Number | None], sep: str, every: bool) -> str:
    cells = format_row(row)
    return sep.join(cells) + "\n" if every or any(cells[1:]) else ""


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


def json_line(seq: int, data: dict, run: str | None = None) -> str:
    """A point of --json; of several runs, with the run it is a point of first."""
    if run is None:
        return json.dumps({"seq": seq, "data": data}) + "\n"
    return json.dumps({"run": run, "seq": seq, "data": data}) + "\n"


def every_key(written: Sequence[str], x: str | None) -> list[str]:
    """The columns of a table with no keys asked for: every key the run wrote, but x."""
    return [key for key in written if key != x]


def header_line(x: str | None, keys: Sequence[str], sep: str) -> str:
    return "".join((csv_lines if sep == "," else tsv)([header(x, keys)]))


def run_columns(runs: Iterable[tuple[str, Sequence[str]]]) -> list[str]:
    """The columns of several runs joined: one a run and key, run by run.

    >>> run_columns([("run-3", ["loss", "eval_loss"]), ("run-7", ["loss"])])
    ['run-3.loss', 'run-3.eval_loss', 'run-7.loss']
    """
    return [f"{run}.{key}" for run, keys in runs for key in keys]


class JsonLines:
    """--json: each point a line, its keys in the order the run first wrote them (on every
    database: PostgreSQL's jsonb keeps no order of its own). With keys, only those keys and
    x, for the points that carry one of the keys."""

    def __init__(
        self, keys: Sequence[str], x: str | None, written: Sequence[str], run: str | None = None
    ):
        self.keys = list(keys)
        self.run = run  # of several runs, each line names its run
        self.wanted = set(keys) | ({x} if x else set())
        self.rank = {name: i for i, name in enumerate(written)}

    def order(self, key: str) -> int:
        return self.rank.get(key, len(self.rank))  # a key first written while following: last

    def __call__(self, batch: Iterable[tuple[int, dict]]) -> Iterator[str]:
        for seq, data in batch:
            if self.keys:
                data = {k: v for k, v in data.items() if k in self.wanted}
                if not any(k in data for k in self.keys):
                    continue
            yield json_line(seq, {k: data[k] for k in sorted(data, key=self.order)}, self.run)


def missing_key(run: str, key: str, written: Sequence[str]) -> str:
    """The note on stderr for a key the run never wrote: its column is empty."""
    near = difflib.get_close_matches(key, written, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    # Typed on the command line, so escaped onto one line; a key a run can write is kept whole.
    return (
        f"telemetry: {run} has no key {shown(key, MAX_LINE_BYTES)} yet; its column is empty{hint}\n"
    )


def passed_over_note(key: str, count: int, x: str | None, at: Number | None) -> str:
    """What a key's NaN and Infinity values come to; the tab's panel note says the same
    (static/telemetry/rules.js passedOver).

    >>> passed_over_note("acc", 1, "step", 6)
    'acc: 1 value passed over as NaN or Infinity, first at step 6'
    """
    values = "value" if count == 1 else "values"
    where = "" if at is None else f", first at {x or 'point'} {format_number(at)}"
    return f"{key}: {count:,} {values} passed over as NaN or Infinity{where}"


TELEMETRY = "telemetry: "


def notices(
    drops: Iterable[tuple[str, int]],
    passed_over: Iterable[tuple[str, int, Number | None]],
    x: str | None,
    run: str | None = None,
) -> str:
    """What `div telemetry RUN` repeats on stderr: what was dropped, then what was passed over.
    Of several runs, each line names its run after "telemetry: ".

    >>> print(notices([("not_json", 2)], [], None, run="run-3"), end="")
    telemetry: run-3: dropped 2 lines that are not JSON; write one JSON object per line
    """
    lines = [notice(reason, count).removeprefix(TELEMETRY) for reason, count in drops]
    lines += [passed_over_note(key, n, x, at) for key, n, at in passed_over]
    where = TELEMETRY if run is None else f"{TELEMETRY}{run}: "
    return "".join(f"{where}{line}\n" for line in lines)


LEFT_OUT_NOTE = "telemetry: {run}: {count} {points} without {x} left out of the join"


def left_out_note(run: str, count: int, x: str | None) -> str:
    """What a run's points without x come to when runs are joined on x: nothing to join on.

    >>> left_out_note("run-7", 3, "epoch")
    'telemetry: run-7: 3 points without epoch left out of the join\\n'
    """
    if not count:
        return ""
    points = "point" if count == 1 else "points"
    return LEFT_OUT_NOTE.format(run=run, count=f"{count:,}", points=points, x=x) + "\n"
