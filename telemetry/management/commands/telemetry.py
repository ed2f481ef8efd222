"""div telemetry [RUN [KEY ...]] [--x KEY] [--csv | --json] [-f]"""

from __future__ import annotations

import difflib
import sys
import time

from django.core.management.base import CommandError
from django.db.models import Count

from telemetry import queries, supervision, tables
from telemetry.commands import DivCommand
from telemetry.ingest import Follower
from telemetry.layout import panel_x
from telemetry.lines import notice
from telemetry.models import Key, Run
from telemetry.services import run_by_name

FOLLOW_POLL = 0.2  # seconds between looks at a followed run
FOLLOW_NEEDS_POINTS = (
    "--follow prints points as they arrive: name the keys to follow, or add --json"
)


class Command(DivCommand):
    help = "Prints the runs, a run's keys, or its points."

    def add_arguments(self, parser):
        parser.add_argument("run", nargs="?", help="run-7 or 7; left out, the runs there are")
        parser.add_argument("keys", nargs="*", help="keys to print as columns, x first")
        parser.add_argument("--x", dest="x_key", metavar="KEY", help="the first column")
        form = parser.add_mutually_exclusive_group()
        form.add_argument("--csv", action="store_true", help="commas, quoted where needed")
        form.add_argument("--json", action="store_true", help='{"seq": 1, "data": {...}} a line')
        parser.add_argument(
            "-f", "--follow", action="store_true", help="keep printing points until the run ends"
        )

    def handle(
        self, *args, run=None, keys=(), x_key=None, csv=False, json=False, follow=False, **options
    ):
        self.out = self.stdout._out
        if run is None:
            if x_key or csv or json or follow:
                raise CommandError("name a run for --x, --csv, --json or --follow")
            self.print_runs()
            return
        try:
            run = run_by_name(run)
        except LookupError as e:
            raise CommandError(str(e)) from None

        written = [k.name for k in queries.keys_of(run)]
        if not keys and not csv and not json:
            if follow:
                raise CommandError(FOLLOW_NEEDS_POINTS)
            if x_key:
                raise CommandError("--x picks the first column of points: name the keys too")
            self.print_keys(run)
        else:
            x = panel_x({"x": None}, {"x": x_key}, written)
            if not keys and csv:
                keys = [k for k in written if k != x]
            for key in [*([x_key] if x_key else []), *keys]:
                if key not in written:
                    self.note_missing(run, key, written)
            self.print_points(run, x, list(keys), written, csv=csv, json=json, follow=follow)
        self.print_drops(run)

    def print_runs(self) -> None:
        supervision.reap_live()  # a run whose supervisor has gone is listed as lost
        runs = Run.objects.annotate(key_count=Count("keys")).order_by("pk")
        self.write(
            tables.runs_table(
                (
                    r.name,
                    r.status,
                    tables.points_cell(r.points, r.telemetry_unread),
                    r.key_count,
                    r.created.strftime("%Y-%m-%d %H:%M"),
                )
                for r in runs
            )
        )

    def print_keys(self, run: Run) -> None:
        self.write(
            tables.key_table(
                (k.name, k.count, k.last, k.min, k.max)
                for k in Key.objects.filter(run=run).order_by("order")
            )
        )

    def print_points(
        self,
        run: Run,
        x: str | None,
        keys: list[str],
        written: list[str],
        *,
        csv: bool,
        json: bool,
        follow: bool,
    ) -> None:
        if json:
            wanted = set(keys) | ({x} if x else set())
            # Each point's keys in the order the run first wrote them, on every database
            # (PostgreSQL's jsonb keeps no order of its own).
            rank = {name: i for i, name in enumerate(written)}
            later = len(rank)  # a key first written while following comes after the rest

            def order(key: str) -> int:
                return rank.get(key, later)

            def render(after, upto):
                for seq, data in queries.points(run.pk, after=after, upto=upto):
                    if keys:
                        data = {k: v for k, v in data.items() if k in wanted}
                        if not any(k in data for k in keys):
                            continue
                    yield tables.json_line(seq, {k: data[k] for k in sorted(data, key=order)})
        else:
            self.write("".join((tables.csv_lines if csv else tables.tsv)([tables.header(x, keys)])))

            def render(after, upto):
                for rows in queries.column_batches(run.pk, x, keys, after=after, upto=upto):
                    yield "".join(tables.series(rows, sep="," if csv else "\t"))

        after = 0
        follower = Follower(run, read=follow)
        while True:
            follower.step()  # ends a lost run, and reads its file when nothing else does
            done = run.telemetry_closed
            upto = run.points
            self.write_all(render(after, upto))
            after = upto
            if not follow or done:
                return
            self.out.flush()
            time.sleep(FOLLOW_POLL)

    def print_drops(self, run: Run) -> None:
        for reason, count in queries.drops_of(run):
            sys.stderr.write(notice(reason, count) + "\n")
        if run.status == Run.Status.LOST and run.telemetry_closed:
            sys.stderr.write(tables.LOST_NOTE.format(run=run.name) + "\n")
        if run.telemetry_unread:
            sys.stderr.write(tables.UNREAD_NOTE.format(run=run.name) + "\n")

    def note_missing(self, run: Run, key: str, written: list[str]) -> None:
        near = difflib.get_close_matches(key, written, n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        sys.stderr.write(
            f'telemetry: {run.name} has no key "{key}" yet; its column is empty{hint}\n'
        )

    def write(self, text: str) -> None:
        self.out.write(text)

    def write_all(self, lines) -> None:
        self.out.writelines(lines)
