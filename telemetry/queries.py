"""Reads shared by the CLI, the API, the websocket, the pages and the admin: each costs what it
returns.

A key's values are read from its own chunks (storage.py), an index range, whatever else the run
writes; a panel's first view from its pair's overview, about 2,000 buckets. Every read takes
the points not sealed yet from their rows, read first, as storage.py says.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson
from django.db.models import (
    CharField,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FilteredRelation,
    Q,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Concat
from django.utils import timezone

from telemetry import chunks, comparison, joins, sparkline, storage, supervision
from telemetry.chunks import WINDOW, window_of, window_start
from telemetry.errors import RunNotFound
from telemetry.layout import panel_x
from telemetry.lines import Number, Reason
from telemetry.listing import PER_PAGE, Listing, sparkline_pair
from telemetry.models import Drop, Key, Org, Run, Secret, Sparkline, StatValue, Token
from telemetry.overview import Overview
from telemetry.services import token_digest
from telemetry.tables import points_cell

WINDOWS_A_READ = 5  # windows read in one statement: lists of about 5,000 points


def keys_of(run: Run) -> list[Key]:
    return list(Key.objects.filter(run=run).order_by("order"))


def drops_of(run: Run) -> list[tuple[str, int]]:
    counts = dict(Drop.objects.filter(run=run, count__gt=0).values_list("reason", "count"))
    return [(reason, counts[reason]) for reason in Reason if reason in counts]


def key_numbers(run_id: int, names: Sequence[str | None] | None = None) -> dict[str, int]:
    """Key name -> Key.order, the number its chunks are stored under (every key when names is
    None)."""
    found = Key.objects.filter(run_id=run_id)
    if names is not None:
        found = found.filter(name__in=[name for name in names if name is not None])
    return dict(found.values_list("name", "order"))


def _unsealed(run_id: int, after: int, upto: int | None) -> tuple[list[tuple[int, dict]], int]:
    """The points stored whole from after to upto that are past the sealed seq, and the sealed
    seq: the rows are read first (storage.py says why)."""
    rows = storage.tail(run_id, after=after, upto=upto)
    sealed = storage.sealed(run_id)
    return [(seq, data) for seq, data in rows if seq > sealed], sealed


def _window_groups(low: int, high: int) -> Iterator[tuple[int, int]]:
    """(first, last) windows of the seqs low to high, a few windows at a time."""
    first, last = window_of(low), window_of(high)
    for start in range(first, last + 1, WINDOWS_A_READ):
        yield start, min(last, start + WINDOWS_A_READ - 1)


def point_batches(
    run_id: int, *, after: int = 0, upto: int | None = None
) -> Iterator[list[tuple[int, dict]]]:
    """A run's (seq, data) in seq order, after a seq and up to one, a list at a time.

    Sealed points are put back together from every key's chunks of a few windows at a time
    (each point's keys in the order the run first wrote them), the newest from their rows.
    """
    unsealed, sealed = _unsealed(run_id, after, upto)
    high = sealed if upto is None else min(upto, sealed)
    if high > after:
        names = {number: name for name, number in key_numbers(run_id).items()}
        for first, last in _window_groups(after + 1, high):
            found = storage.columns(run_id, None, first, last)
            batch: list[tuple[int, dict]] = []
            for window in range(first, last + 1):
                start = max(after + 1, window_start(window))
                end = min(high, window_start(window) + WINDOW - 1)
                batch += chunks.points_of(found.get(window, {}), names, start, end)
            yield batch
    yield unsealed


def points(run_id: int, *, after: int = 0, upto: int | None = None) -> Iterator[tuple[int, dict]]:
    """(seq, data) in order, after a seq."""
    for batch in point_batches(run_id, after=after, upto=upto):
        yield from batch


def column_batches(
    run_id: int, x: str | None, keys: list[str], *, after: int = 0, upto: int | None = None
) -> Iterator[tuple[list[Sequence], bool]]:
    """The points a few windows at a time, as columns of equal length: x's values (the point's
    seq when x is None), then each key's, None where a point lacks one; with whether there is
    no None at all, as the chunks tell without looking. Columns, not rows: the printing takes a
    batch with every value in one step (tables.series_of_columns). Only x's and the keys'
    chunks are read."""
    unsealed, sealed = _unsealed(run_id, after, upto)
    high = sealed if upto is None else min(upto, sealed)
    if high > after:
        numbers = key_numbers(run_id, [x, *keys])
        x_no, key_nos = numbers.get(x), [numbers.get(name) for name in keys]
        stored = [number for number in [x_no, *key_nos] if number is not None]
        for first, last in _window_groups(after + 1, high):
            found = storage.columns(run_id, stored, first, last)
            xs: list = []
            values: list[list] = [[] for _ in keys]
            whole = True
            for window in range(first, last + 1):
                start = window_start(window)
                low, end = max(after + 1, start) - start, min(high, start + WINDOW - 1) - start + 1
                own = found.get(window, {})
                if x is None:
                    xs += range(start + low, start + end)
                else:
                    whole = whole and chunks.covers(own.get(x_no), window, low, end)
                    xs += chunks.cells(own.get(x_no), window, low, end)
                for column, number in zip(values, key_nos, strict=True):
                    whole = whole and chunks.covers(own.get(number), window, low, end)
                    column += chunks.cells(own.get(number), window, low, end)
            yield [xs, *values], whole
    xs = [seq for seq, _ in unsealed] if x is None else [data.get(x) for _, data in unsealed]
    yield [xs, *([data.get(key) for _, data in unsealed] for key in keys)], False


def series(
    run_id: int,
    y: str,
    x: str | None,
    *,
    upto: int,
    low: float | None = None,
    high: float | None = None,
) -> tuple[list, list]:
    """A key's points up to a seq as (xs, ys) in seq order, leaving off points without the x
    key; with low or high, only those with x in that range (zooming in).

    `upto` is the run's point count when the request began: the tab then takes live points
    from the seq after it, with none missed and none twice. Only y's and x's chunks are read,
    and with a range of x only the windows x's values say it is in.
    """
    unsealed, sealed = _unsealed(run_id, 0, upto)
    numbers = key_numbers(run_id, [y, x])
    if y not in numbers or (x is not None and x not in numbers):
        return [], []
    y_no, x_no = numbers[y], numbers.get(x)
    lo = -math.inf if low is None else low
    hi = math.inf if high is None else high
    xs: list = []
    ys: list = []
    last_seq = min(upto, sealed)
    if last_seq > 0:
        last = window_of(last_seq)
        if x_no is not None and (low is not None or high is not None):
            windows = storage.windows_within(run_id, x_no, lo, hi, last)
        elif x_no is None:  # x is the seq: the range is a range of windows
            first_seq = max(1, math.ceil(lo)) if lo > 0 else 1
            last_in = last_seq if hi == math.inf else min(last_seq, math.floor(hi))
            windows = list(range(window_of(first_seq), window_of(last_in) + 1))
        else:
            windows = list(range(last + 1))
        xs, ys = storage.pair_points(run_id, y_no, x_no, windows, last_seq)
    for seq, data in unsealed:
        value = data.get(y)
        if value is not None:
            at = seq if x is None else data.get(x)
            if at is not None:
                xs.append(at)
                ys.append(value)
    if low is not None or high is not None:
        kept = [(a, b) for a, b in zip(xs, ys, strict=True) if lo <= a <= hi]
        return [a for a, _ in kept], [b for _, b in kept]
    return xs, ys


def overview(
    run_id: int, y: str, x: str | None, *, upto: int, buckets: bool = True
) -> Overview | None:
    """The pair's overview up to a seq, when a panel draws the pair: its stored buckets, with
    the points not sealed yet taken in. None for a pair no panel draws (or when a window was
    sealed past `upto` during the read: the caller reads the points then).

    Without buckets, only what its size, point count and gap say: enough to tell whether it
    draws the series, and to judge the series' gaps when its points are read instead.
    """
    unsealed = storage.tail(run_id, upto=upto)
    numbers = key_numbers(run_id, [y, x])
    if y not in numbers or (x is not None and x not in numbers):
        return None
    x_no = storage.SEQ if x is None else numbers[x]
    found = storage.overview(run_id, numbers[y], x_no, buckets=buckets)
    if found is None or found[1] > upto:
        return None
    summary, taken = found
    xs, ys = _pairs(unsealed, taken, y, x)
    if buckets:
        summary.add(xs, ys)
    else:
        summary.count(len(ys))
    return summary


def _pairs(points: Sequence[tuple[int, dict]], after: int, y: str, x: str | None):
    xs: list = []
    ys: list = []
    for seq, data in points:
        if seq > after and y in data:
            at = seq if x is None else data.get(x)
            if at is not None:
                xs.append(at)
                ys.append(data[y])
    return xs, ys


def value_at(run_id: int, key: str, seq: int) -> Number | None:
    """The key's value at a seq, if the point there carries it."""
    unsealed, sealed = _unsealed(run_id, seq - 1, seq)
    if seq > sealed:
        return unsealed[0][1].get(key) if unsealed else None
    number = key_numbers(run_id, [key]).get(key)
    if number is None:
        return None
    column = storage.columns(run_id, [number], window_of(seq), window_of(seq))
    found = column.get(window_of(seq), {}).get(number)
    if found is None:
        return None
    found = chunks.within(found, seq, seq)
    return found.values[0] if found.values else None


def sparklines(
    run_ids: Sequence[int], y: str, x: str | None, *, buckets: int = 64
) -> dict[int, tuple[list, list]]:
    """y against x for many runs at once, at about `buckets` min/max buckets each: read from
    each pair's coarse level (128 buckets at most) and its points not sealed yet, never from
    the fine level or the sealed points; a run no window of which is sealed yet, from those
    points alone. The runs named are ones whose panels draw the pair; those without a point of
    it are left out."""
    run_ids = list(run_ids)
    unsealed: dict[int, list] = {}
    for run_id, seq, data in storage.tails(run_ids):
        unsealed.setdefault(run_id, []).append((seq, data))
    stored = storage.coarse_overviews(run_ids, y, x)
    drawn = {}
    for run_id in run_ids:
        if run_id in stored:
            head, coarse, taken = stored[run_id]
            summary = Overview.stored(head, [], coarse)
        elif run_id in unsealed:
            # Not a window sealed yet that carries the pair: its points are all still whole.
            summary, taken = Overview.empty(), 0
        else:
            continue
        xs, ys = _pairs(unsealed.get(run_id, []), taken, y, x)
        summary.add(xs, ys, fine=False)
        line = sparkline.view(summary, buckets)
        if line is not None:
            drawn[run_id] = line
    return drawn


# ---- what the CLI, the API and the pages look up by name ---------------------------------

UNKNOWN_RUN = 'there is no run "{name}"; div telemetry lists the runs'
EVERY_RUN = object()  # the CLI on the server's own machine reads every org's runs


def run_named(name: str, *, user) -> Run:
    """run-7 or 7 -> the run, if `user` may see it (EVERY_RUN: any run), or RunNotFound:
    another org's run is not found either, so its name says nothing."""
    runs = Run.objects.all() if user is EVERY_RUN else Run.objects.visible_to(user)
    run = runs.named(name).select_related("org", "layout").first()
    if run is None:
        raise RunNotFound(UNKNOWN_RUN.format(name=name))
    return run


def runs_listing(*, user=EVERY_RUN) -> list[tuple[str, str, str, int, datetime]]:
    """Every run (the user's, over the API), oldest first: (name, status, points, keys,
    created); a run whose supervisor has gone is listed as lost, and an ended run not all
    read says so by its points."""
    supervision.reap_live()
    runs = Run.objects.all() if user is EVERY_RUN else Run.objects.visible_to(user)
    runs = runs.annotate(key_count=Count("keys")).order_by("pk")
    return [
        (r.name, r.status, points_cell(r.points, r.telemetry_unread), r.key_count, r.created)
        for r in runs
    ]


@dataclass
class Report:
    """What `div telemetry RUN` says about a run besides its points."""

    run: Run
    keys: list[Key]  # in order of first arrival
    drops: list[tuple[str, int]]
    x: str | None  # the x its points are printed against; None: their place in the run
    # (key, values passed over, the x of the point where the first was) for each such key
    passed_over: list[tuple[str, int, Number | None]]

    @property
    def written(self) -> list[str]:
        return [k.name for k in self.keys]

    @property
    def lost(self) -> bool:
        return self.run.status == Run.Status.LOST and self.run.telemetry_closed

    @property
    def unread(self) -> bool:
        return self.run.telemetry_unread

    @property
    def key_rows(self) -> list[tuple]:
        return [(k.name, k.count, k.last, k.min, k.max) for k in self.keys]


def report(name: str, *, x: str | None = None) -> Report:
    """A run's keys, drops and passed-over values, with x resolved as a panel's is."""
    run = run_named(name, user=EVERY_RUN)
    keys = keys_of(run)
    return _report(run, keys, panel_x({"x": None}, {"x": x}, [k.name for k in keys]))


def reports(names: Sequence[str], *, x: str | None = None) -> list[Report]:
    """The reports of runs joined on one x (joins.joined_x), in the order named: all of them,
    or RunNotFound for the first that does not exist, before any is printed."""
    runs = [run_named(name, user=EVERY_RUN) for name in names]
    keys = [keys_of(run) for run in runs]
    shared = joins.joined_x(x, [[k.name for k in found] for found in keys])
    return [_report(run, found, shared) for run, found in zip(runs, keys, strict=True)]


def _report(run: Run, keys: list[Key], x: str | None) -> Report:
    passed = [
        (k.name, k.passed_over, x_at(run, k.first_passed_seq, x)) for k in keys if k.passed_over
    ]
    return Report(run, keys, drops_of(run), x, passed)


def x_at(run: Run, seq: int | None, x: str | None) -> Number | None:
    """The x of the point at a seq: its seq when x is None; None when it has no such x."""
    if seq is None or x is None:
        return seq
    return value_at(run.pk, x, seq)


def secret_names(org: str) -> list[str]:
    return list(
        Secret.objects.filter(org__name=org).order_by("name").values_list("name", flat=True)
    )


def token_named(text: str) -> Token | None:
    """The token whose text this is, with its user; None for one this server does not know."""
    return Token.objects.select_related("user").filter(digest=token_digest(text)).first()


def tokens_of(user=None) -> list[Token]:
    """A user's tokens by name; every user's (user, then name) when none is named."""
    tokens = Token.objects.select_related("user").order_by("user__username", "name")
    return list(tokens if user is None else tokens.filter(user=user))


def org_of(user, name: str) -> Org | None:
    """The org by name if the user is a member of it: any other is as if there were none."""
    return Org.objects.filter(name=name, membership__user=user).first()


def orgs_of(user) -> list[str]:
    return list(
        Org.objects.filter(membership__user=user).order_by("name").values_list("name", flat=True)
    )


# ---- the dashboard: a page of runs ------------------------------------------------------------

MAX_CARDS = 500  # card titles offered to sort by


@dataclass
class RunPage:
    """A page of the dashboard: its runs, how many match, and what each row draws."""

    runs: list[Run]
    total: int
    keys: dict[int, dict[str, Key]]  # run id -> the keys its stats and sparkline name
    pairs: dict[int, tuple[str, str | None] | None]  # run id -> its sparkline's (y, x)
    lines: dict[int, tuple[list, list]]  # run id -> its sparkline's (xs, ys), when it has points


def matching(user, listing: Listing):
    """The user's runs the listing's filters and search let through, in no order."""
    runs = Run.objects.visible_to(user)
    if listing.statuses:
        runs = runs.filter(status__in=listing.statuses)
    if listing.orgs:
        runs = runs.filter(org__name__in=listing.orgs)
    if listing.search:
        text = listing.search.casefold()
        name = Concat(Value("run-"), Cast("id", CharField()))
        runs = runs.annotate(run_name=name).filter(
            Q(search_text__contains=text) | Q(run_name__contains=text)
        )
    return runs


def _ordered(runs, listing: Listing):
    """The runs in the listing's order; ties (and runs without the value) end newest first
    when sorting descending, oldest first ascending: never two pages with one run."""
    if listing.column == "stat":
        runs = runs.annotate(
            card=FilteredRelation("stat_values", condition=Q(stat_values__title=listing.card))
        )
        value = F("card__value")
    elif listing.column == "duration":
        ended = Coalesce("ended", Value(timezone.now(), output_field=DateTimeField()))
        runs = runs.annotate(
            ran=ExpressionWrapper(ended - F("started"), output_field=DurationField())
        )
        value = F("ran")
    else:
        value = F(listing.column)
    if listing.descending:
        return runs.order_by(value.desc(nulls_last=True), "-pk")
    return runs.order_by(value.asc(nulls_last=True), "pk")


def run_page(user, listing: Listing) -> RunPage:
    """The page of the user's runs that the listing asks for, with what its rows draw: the
    stats' keys and each run's sparkline from the coarse overview (never its points)."""
    found = matching(user, listing)
    total = found.count()
    if listing.offset >= total:
        return RunPage([], total, {}, {}, {})  # past the last page: nothing more to read
    page = _ordered(found, listing).select_related("org", "layout").defer("layout__source")
    runs = list(page[listing.offset : listing.offset + PER_PAGE])
    ids = [run.pk for run in runs]
    names = {"step"}
    for run in runs:
        names.update(stat["y"] for stat in run.layout.parsed["stats"])
        for panel in run.layout.parsed["panels"][:1]:
            names.update(key for key in (panel["y"][0], panel.get("x")) if key)
    # A run's first two keys and step decide its first panel, whatever its layout.
    wanted = Key.objects.filter(Q(order__lte=2) | Q(name__in=names), run_id__in=ids)
    keys: dict[int, dict[str, Key]] = {run_id: {} for run_id in ids}
    for key in wanted.order_by("run_id", "order"):
        keys[key.run_id][key.name] = key
    pairs = {run.pk: sparkline_pair(run.layout.parsed, list(keys[run.pk])) for run in runs}
    return RunPage(runs, total, keys, pairs, _lines(pairs, keys))


def _lines(
    pairs: dict[int, tuple[str, str | None] | None], keys: dict[int, dict[str, Key]]
) -> dict[int, tuple[list, list]]:
    """Each run's sparkline as the ingester stored it with its last batch (a line of no point
    when none of the key's points carries the x), never read from the run's points. Only a run
    with no row at all, one ingested before rows were kept, is read from the pair's coarse
    level and its points not sealed yet, as rows were drawn then."""
    drawn = {run_id: pair for run_id, pair in pairs.items() if pair and pair[0] in keys[run_id]}
    lines: dict[int, tuple[list, list]] = {}
    stored = Sparkline.objects.filter(run_id__in=list(drawn)).values_list(
        "run_id", "y", "x", "line"
    )
    kept = set()
    for run_id, y, x, line in stored:
        kept.add(run_id)
        # The ingester rewrites the row in the batch that changes the pair, so a row of
        # another pair is never one a page sees; were it, it draws nothing rather than read.
        if drawn[run_id] == (y, x):
            lines[run_id] = tuple(orjson.loads(line))
    groups: dict[tuple[str, str | None], list[int]] = {}
    for run_id, pair in drawn.items():
        if run_id not in kept:
            groups.setdefault(pair, []).append(run_id)
    for (y, x), run_ids in groups.items():
        lines.update(sparklines(run_ids, y, x))
    return lines


def card_titles(user) -> list[str]:
    """The titles of the stat cards the user's runs have values for: what the dashboard offers
    to sort by."""
    titles = StatValue.objects.filter(run__in=Run.objects.visible_to(user).values("pk"))
    found = titles.values_list("title", flat=True).distinct().order_by("title")[:MAX_CARDS]
    return sorted(found, key=lambda title: (title.casefold(), title))


# ---- a comparison of runs -----------------------------------------------------------------

NOT_ALL_YOURS = "not every run of the comparison is one you can see"


def runs_compared(text: str | None, *, user, layout: str | None = None) -> tuple[list[Run], Run]:
    """The runs a comparison's list names, in its order, and the one whose layout it shows.

    All of them or none: a name that is malformed, or of a run that does not exist or that the
    user may not see, is NotAComparison or RunNotFound, never a comparison of the others. One
    query, however long the list (comparison.MOST_RUNS at most).
    """
    numbers = comparison.run_numbers(text)
    shown = comparison.shown_layout(layout, numbers)
    found = Run.objects.visible_to(user).filter(pk__in=numbers).select_related("org", "layout")
    runs = {run.pk: run for run in found}
    if len(runs) != len(numbers):
        raise RunNotFound(NOT_ALL_YOURS)
    return [runs[number] for number in numbers], runs[shown]
