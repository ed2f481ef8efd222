"""div telemetry: the runs, a run's keys, or its points, in the spec's formats; of several
runs, joined on x."""

from __future__ import annotations

import sys

import click

from telemetry import reading, sources, tables
from telemetry.commands import RUNS, command

NEEDS_A_RUN = "name a run for --x, --csv, --json or --follow"
FOLLOW_NEEDS_POINTS = (
    "--follow prints points as they arrive: name the keys to follow, or add --json"
)
X_NEEDS_KEYS = "--x picks the first column of points: name the keys too"
ONE_FORM = "--csv and --json are two forms of the points: name one of them"
NO_X = "name the key of the first column, like --x epoch"
X = "The first column; step when the run writes one."
CSV = "Commas, quoted where needed."
JSON = '{"seq": 1, "data": {...}} a line.'
HELP = """Prints the runs, a run's keys, or its points.

Runs joined by commas (run-3,run-7; each once, up to 20) are printed together. Their points are
one table: a column for each run and key (run-3.loss), the rows joined on x (--x, else step when
every run wrote it, else seq) and sorted by it. A run with no point at an x has an empty cell
there; a point without x is left out, counted on stderr. With no keys, the key table gets a
first column, run. --json adds "run" to each point, run by run. -f follows every run until all
have ended, printing a row once every run still going has passed its x."""


def one_form(ctx: click.Context, param: click.Parameter, given: bool) -> None:
    """--csv and --json are one option, the form of the points: either, never both."""
    if given:
        if ctx.params.get("form", param.name) != param.name:
            raise click.UsageError(ONE_FORM, ctx)
        ctx.params["form"] = param.name
    else:
        ctx.params.setdefault("form", None)


def a_key(ctx: click.Context, param: click.Parameter, key: str | None) -> str | None:
    if key == "":
        raise click.BadParameter(NO_X, ctx, param)
    return key


@command(writes=False, short_help="Print the runs, a run's keys, or its points.", help=HELP)
@click.argument("run", type=RUNS, required=False)
@click.argument("keys", nargs=-1)
@click.option("--x", "x_key", metavar="KEY", callback=a_key, help=X)
@click.option("--csv", is_flag=True, expose_value=False, callback=one_form, help=CSV)
@click.option("--json", is_flag=True, expose_value=False, callback=one_form, help=JSON)
@click.option("-f", "--follow", is_flag=True, help="Keep printing points until the runs end.")
def command(run, keys, x_key, form, follow):
    source = sources.current()  # this machine's database, or the server's API
    if run is None:
        if x_key or form or follow:
            raise click.UsageError(NEEDS_A_RUN)
        sys.stdout.write(tables.runs_table(source.runs_listing()))
        return
    if not (keys or form) and (follow or x_key):
        raise click.UsageError(FOLLOW_NEEDS_POINTS if follow else X_NEEDS_KEYS)
    reading.telemetry(
        source, run, keys, x=x_key, form=form, follow=follow, out=sys.stdout, err=sys.stderr
    )
