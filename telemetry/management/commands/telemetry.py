"""div telemetry: the runs, a run's keys, or its points, in the spec's formats."""

from __future__ import annotations

import sys

import click

from telemetry import queries, sources, tables
from telemetry.commands import RUN, command

NEEDS_A_RUN = "name a run for --x, --csv, --json or --follow"
FOLLOW_NEEDS_POINTS = (
    "--follow prints points as they arrive: name the keys to follow, or add --json"
)
X_NEEDS_KEYS = "--x picks the first column of points: name the keys too"


@command(
    writes=False,
    short_help="Print the runs, a run's keys, or its points.",
    help="Prints the runs, a run's keys, or its points.",
)
@click.argument("run", type=RUN, required=False)
@click.argument("keys", nargs=-1)
@click.option("--x", "x_key", metavar="KEY", help="The first column; step when the run writes one.")
@click.option("--csv", "form", flag_value="csv", help="Commas, quoted where needed.")
@click.option("--json", "form", flag_value="json", help='{"seq": 1, "data": {...}} a line.')
@click.option("-f", "--follow", is_flag=True, help="Keep printing points until the run ends.")
def command(run, keys, x_key, form, follow):
    source = sources.current()  # this machine's database, or the server's API
    if run is None:
        if x_key or form or follow:
            raise click.UsageError(NEEDS_A_RUN)
        sys.stdout.write(tables.runs_table(source.runs_listing()))
        return
    points = bool(keys) or form is not None
    if not points and (follow or x_key):
        raise click.UsageError(FOLLOW_NEEDS_POINTS if follow else X_NEEDS_KEYS)

    report = source.report(run, x=x_key)
    if not points:
        sys.stdout.write(tables.key_table(report.key_rows))
    else:
        for key in [*([x_key] if x_key else []), *keys]:
            if key not in report.written:
                sys.stderr.write(tables.missing_key(report.run.name, key, report.written))
        print_points(source, report, list(keys), form, follow)
    sys.stderr.write(tables.notices(report.drops, report.passed_over, report.x))
    sys.stderr.write(tables.state_notes(report.run.name, report.lost, report.unread))


def print_points(source, report: queries.Report, keys: list[str], form: str | None, follow: bool):
    x, out = report.x, sys.stdout
    if form == "json":
        render = tables.JsonLines(keys, x, report.written)

        def read(after, upto):
            return source.point_batches(report, after, upto)
    else:
        sep = "," if form == "csv" else "\t"
        # With no keys asked for, the CSV is the whole run: every point is a row.
        every, keys = not keys, keys or tables.every_key(report.written, x)
        out.write(tables.header_line(x, keys, sep))

        def render(batch):
            columns, whole = batch
            return tables.series_of_columns(columns, sep, every=every, whole=whole)

        def read(after, upto):
            return source.column_batches(report, x, keys, after, upto)

    for after, upto in source.stretches(report, follow=follow):
        for batch in read(after, upto):
            out.writelines(render(batch))
        if follow:
            out.flush()
