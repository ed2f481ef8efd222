"""What `div telemetry RUN` prints of a run, and `div telemetry RUN,RUN` of several: the keys,
or the points, read from a source (sources.py: this machine's database or the server's API,
the same values either way), joined on x by joins.py, printed by tables.py, and followed by
following.py until every run has ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from telemetry import following, joins, tables
from telemetry.following import Look
from telemetry.queries import Report

FOLLOW_POLL = 0.2  # seconds between looks at followed runs


def telemetry(
    source,
    runs: str | tuple[str, ...],
    keys: Sequence[str],
    *,
    x: str | None,
    form: str | None,
    follow: bool,
    out: TextIO,
    err: TextIO,
    wait: Callable[[float], object] = time.sleep,
) -> None:
    """Print a run's key table (no keys, no form) or points; of several runs (a tuple of
    names), their key tables as one, or their points joined on x (--json: run by run).
    Every run is read before anything is printed: a run not found fails the whole."""
    joined = not isinstance(runs, str)
    reports = source.reports(runs, x=x) if joined else [source.report(runs, x=x)]
    if not keys and form is None:
        rows = [(r.run.name, r.key_rows) for r in reports]
        out.write(tables.runs_key_table(rows) if joined else tables.key_table(rows[0][1]))
        printer = None
    else:
        for report in reports:
            for key in [*([x] if x else []), *keys]:
                if key not in report.written:
                    err.write(tables.missing_key(report.run.name, key, report.written))
        printer = _printer(reports, list(keys), form, joined)
        out.write(printer.header)
        _print_points(source, reports, printer, follow=follow, out=out, wait=wait)
    for i, report in enumerate(reports):
        name = report.run.name if joined else None
        if isinstance(printer, Joined):
            err.write(tables.left_out_note(report.run.name, printer.join.left_out[i], report.x))
        err.write(tables.notices(report.drops, report.passed_over, report.x, run=name))
        err.write(tables.state_notes(report.run.name, report.lost, report.unread))


def _print_points(
    source, reports: list[Report], printer: Printer, *, follow: bool, out: TextIO, wait
) -> None:
    tails = [Tail(source, report, follow=follow) for report in reports]

    def look() -> Look:
        # Every run once a round, in the order named, then one pause for them all.
        for i, tail in enumerate(tails):
            if tail.closed:
                continue  # it has ended: nothing more comes
            after, upto = tail.new()
            for batch in printer.read(source, i, tail.report, after, upto):
                out.writelines(printer.lines(i, batch))
            if tail.closed:
                printer.ended(i)
        out.writelines(printer.ready())
        if follow:
            out.flush()
        return Look.ENDED if all(tail.closed for tail in tails) else Look.GOING

    following.follow(look, follow=follow, pause=FOLLOW_POLL, wait=wait)
    out.writelines(printer.rest())


class Tail:
    """A run's points as they are stored: each look gives the seqs stored since the last."""

    def __init__(self, source, report: Report, *, follow: bool):
        self.report = report
        self.refresh = source.watcher(report, follow=follow)
        self.after = 0
        self.closed = False  # ended, and its last line stored: the last look read the rest

    def new(self) -> tuple[int, int]:
        self.refresh()
        run = self.report.run
        self.closed = run.telemetry_closed
        after, self.after = self.after, run.points
        return after, run.points


def _printer(reports: list[Report], keys: list[str], form: str | None, joined: bool) -> Printer:
    if form == "json":
        return Json(reports, keys, joined)
    sep = "," if form == "csv" else "\t"
    return Joined(reports, keys, sep) if joined else Table(reports[0], keys, sep)


class Printer:
    """How points are printed as the runs are read: `lines` as each batch of a run is read,
    `ready` after each round, `rest` once the last round is done."""

    header = ""

    def ended(self, i: int) -> None:
        pass  # the i-th run has ended: it writes no more

    def ready(self) -> list[str]:
        return []

    def rest(self) -> list[str]:
        return []


class Table(Printer):
    """One run's points, x first then a column a key, in seq order; with no keys (the whole
    CSV), a column for every key the run wrote, and a row for every point."""

    def __init__(self, report: Report, keys: list[str], sep: str):
        self.x, self.sep, self.every = report.x, sep, not keys
        self.keys = keys or tables.every_key(report.written, report.x)
        self.header = tables.header_line(self.x, self.keys, sep)

    def read(self, source, i: int, report: Report, after: int, upto: int):
        return source.column_batches(report, self.x, self.keys, after, upto)

    def lines(self, i: int, batch: tuple[list, bool]) -> Iterable[str]:
        columns, whole = batch
        return tables.series_of_columns(columns, self.sep, every=self.every, whole=whole)


class Joined(Printer):
    """Several runs' points joined on x (joins.py): a column a run and key, run by run; a row
    is printed once no point still to come can join it."""

    def __init__(self, reports: list[Report], keys: list[str], sep: str):
        self.x, self.sep, self.every = reports[0].x, sep, not keys
        self.columns = [keys or tables.every_key(r.written, self.x) for r in reports]
        names = zip([r.run.name for r in reports], self.columns, strict=True)
        self.header = tables.header_line(self.x, tables.run_columns(names), sep)
        self.join = joins.Join([len(columns) for columns in self.columns], every=self.every)

    def read(self, source, i: int, report: Report, after: int, upto: int):
        return source.column_batches(report, self.x, self.columns[i], after, upto)

    def lines(self, i: int, batch: tuple[list, bool]) -> Iterable[str]:
        columns, _ = batch
        self.join.add(i, zip(*columns, strict=True))
        return []

    def ended(self, i: int) -> None:
        self.join.end(i)

    def ready(self) -> list[str]:
        return tables.series(self.join.ready(), self.sep, every=True)

    def rest(self) -> list[str]:
        return tables.series(self.join.rest(), self.sep, every=True)


class Json(Printer):
    """--json: each point a line, run by run in the order named; of several runs, each line
    names its run."""

    def __init__(self, reports: list[Report], keys: list[str], joined: bool):
        self.renders = [
            tables.JsonLines(keys, r.x, r.written, r.run.name if joined else None) for r in reports
        ]

    def read(self, source, i: int, report: Report, after: int, upto: int):
        return source.point_batches(report, after, upto)

    def lines(self, i: int, batch: list) -> Iterable[str]:
        return self.renders[i](batch)
