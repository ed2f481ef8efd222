"""The REST API behind the Telemetry tab and the dashboard. docs/api.md describes it.

Every view reads runs through queries.run_named(name, user=...): a run of another org is a
404, never a 403, so its name says nothing either.
"""

from __future__ import annotations

import math
import re

import orjson
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, StreamingHttpResponse
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from telemetry import comparison, downsample, logs, queries
from telemetry.errors import Refused, RunNotFound
from telemetry.layout import KEY_PATTERN, panels_for, stats_for
from telemetry.lines import MAX_POINTS, notice
from telemetry.listing import PER_PAGE, ListingError
from telemetry.listing import pages as pages_of
from telemetry.listing import parse as parse_listing
from telemetry.models import Key, Run

WHOLE = re.compile(r"[0-9]{1,18}")
MAX_BUCKETS = 20_000
MAX_POINTS_PAGE = 10_000
# Points a ?raw=1 answer holds at most, whatever its keys: a run's whole key (lines.MAX_POINTS),
# about 5 MB of JSON. Past it, a range or buckets: an answer is built whole before it is sent.
MAX_RAW_POINTS = MAX_POINTS
MAX_LOG_BYTES = logs.PAGE_BYTES

# What a bad query parameter says, in one place: the text of each 400.
BAD_PARAMS = {
    "number": '"{name}" is "{value}", which is not a number',
    "whole": '"{name}" is "{value}", which is not a whole number from {low} to {high}',
    "key": '"{name}" is "{value}", which is not a key a point can carry',
    "no_y": "give one key or more to draw, like ?y=loss",
    "too_many_y": "up to 4 keys a request: a panel draws up to 4",
    "smooth": '"smooth" is "{value}", which is not a number from 0 to 0.999',
    "range": '"low" is above "high"',
    "scale": '"scale" is "{value}", which is not one of linear, log',
    "panel": '"panel" is "{value}", which is not a panel of this run: it has {count}, from 0',
    "layout": '"layout" is "{value}", which is not one of the runs compared',
    "raw": "raw=1 sends at most {most:,} points, and these keys have more: ask for a range of x"
    " (low, high), or leave raw out for min/max buckets",
}
NDJSON = "application/x-ndjson"
# A streamed answer is never reused without asking again. Not "no-store": Chromium reports a
# no-store stream read to its end by a page as aborted, which keeps tools waiting for the
# network to go idle (Playwright's networkidle) waiting for ever.
NO_CACHE = "no-cache"


def visible_run(request, name: str) -> Run:
    try:
        return queries.run_named(name, user=request.user)
    except RunNotFound:
        raise Http404 from None


def _bad(kind: str, **values) -> ValidationError:
    return ValidationError({"error": BAD_PARAMS[kind].format(**values)})


def _whole(request, name: str, default: int, low: int, high: int) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    if not WHOLE.fullmatch(value) or not low <= int(value) <= high:
        raise _bad("whole", name=name, value=value, low=low, high=high)
    return int(value)


def _number(request, name: str) -> float | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except ValueError:
        raise _bad("number", name=name, value=value) from None
    if not math.isfinite(number):
        raise _bad("number", name=name, value=value)
    return number


def _key(request, name: str, value: str) -> str:
    if not KEY_PATTERN.fullmatch(value):
        raise _bad("key", name=name, value=value)
    return value


def stat_values(run: Run, keys: dict[str, Key], layout: dict | None = None) -> list[dict]:
    """The stats of the run's layout (or of another's, on a comparison) with the run's values."""
    shown = []
    for stat in stats_for(run.layout.parsed if layout is None else layout):
        key = keys.get(stat["y"])
        value = getattr(key, stat["reduce"]) if key is not None else None
        shown.append({**stat, "value": value})
    return shown


def run_summary(run: Run, keys: dict[str, Key]) -> dict:
    return {
        "name": run.name,
        "org": run.org.name,
        "status": run.status,
        "command": run.command,
        "exit_code": run.exit_code,
        "created": run.created,
        "started": run.started,
        "ended": run.ended,
        "duration": run.duration.total_seconds() if run.duration is not None else None,
        "points": run.points,
        "closed": run.telemetry_closed,
        "unread": run.telemetry_unread,
        "stats": stat_values(run, keys),
    }


def _keys_by_name(run: Run) -> dict[str, Key]:
    return {k.name: k for k in queries.keys_of(run)}


def key_row(key: Key) -> dict:
    return {
        "name": key.name,
        "count": key.count,
        "last": key.last,
        "min": key.min,
        "max": key.max,
        "passed_over": key.passed_over,
        "first_passed_seq": key.first_passed_seq,
    }


@api_view(["GET"])
def runs(request):
    """The newest 500 runs, as they have always been listed: scripts read this. The dashboard
    reads runs_search."""
    found = list(
        Run.objects.visible_to(request.user)
        .select_related("org", "layout")
        .defer("layout__source")
        .order_by("-pk")[:500]
    )
    # Only the keys the stats show: a run may have 256.
    shown = {stat["y"] for run in found for stat in run.layout.parsed["stats"]}
    keys: dict[int, dict[str, Key]] = {run.pk: {} for run in found}
    for key in Key.objects.filter(run__in=[run.pk for run in found], name__in=shown):
        keys[key.run_id][key.name] = key
    return Response({"runs": [run_summary(run, keys[run.pk]) for run in found]})


@api_view(["GET"])
def run_detail(request, name: str):
    return Response(detail_of(visible_run(request, name)))


def detail_of(run: Run) -> dict:
    """A run as its page needs it; the page embeds the same, so the tab asks for its series
    before Plotly.js has even loaded."""
    keys = _keys_by_name(run)
    layout = run.layout
    return {
        **run_summary(run, keys),
        "layout": {
            "default": layout.parsed.get("default", False),
            "source": layout.source,
            "origin": layout.origin,
        },
        "panels": panels_for(layout.parsed, list(keys)),
        "keys": [key_row(k) for k in keys.values()],
        "drops": [
            {"reason": reason, "count": count, "notice": notice(reason, count)}
            for reason, count in queries.drops_of(run)
        ],
    }


@api_view(["GET"])
def run_keys(request, name: str):
    run = visible_run(request, name)
    return Response({"keys": [key_row(k) for k in queries.keys_of(run)]})


@api_view(["GET"])
def run_points(request, name: str):
    """Points as stored, after a seq: the CLI's remote reads and a tab catching up."""
    run = visible_run(request, name)
    after = _whole(request, "after", 0, 0, 10**9)
    limit = _whole(request, "limit", 1000, 1, MAX_POINTS_PAGE)
    found = list(queries.points(run.pk, after=after, upto=after + limit))
    return Response({"points": [{"seq": s, "data": d} for s, d in found], "last": run.points})


@api_view(["GET"])
def run_series(request, name: str):
    """Each y key against x, downsampled to min/max buckets unless there are few points.

    ?y=loss&y=eval_loss  the keys (1 to 4)
    ?x=step              the key drawn against; left out, the point's place in the run
    ?low=&high=          an x range (zooming in)
    ?buckets=2000        ?raw=1 for every point
    ?smooth=0.6          an EMA on the full-resolution series, sent beside the raw one
    ?scale=log           leave off (and count) the points a log axis cannot show: 0 and below
    """
    run = visible_run(request, name)
    ys = [_key(request, "y", y) for y in request.query_params.getlist("y")]
    if not ys:
        raise _bad("no_y")
    if len(ys) > 4:
        raise _bad("too_many_y")
    x = request.query_params.get("x") or None
    if x is not None:
        _key(request, "x", x)
    low, high, weight = _range_and_smoothing(request)
    buckets = _whole(request, "buckets", downsample.BUCKETS, 10, MAX_BUCKETS)
    raw = request.query_params.get("raw") in ("1", "true")
    scale = request.query_params.get("scale") or "linear"
    if scale not in ("linear", "log"):
        raise _bad("scale", value=scale)

    series = traces(
        run,
        ys,
        x,
        low=low,
        high=high,
        buckets=buckets,
        raw=raw,
        weight=weight,
        scale=scale,
        upto=run.points,
    )
    return Response({"x": x, "last": run.points, "series": series})


def _range_and_smoothing(request) -> tuple[float | None, float | None, float]:
    """?low=&high= (zooming in) and ?smooth=, as /series/ and /panels/ take them."""
    low, high = _number(request, "low"), _number(request, "high")
    if low is not None and high is not None and low > high:
        raise _bad("range")
    weight = _number(request, "smooth") or 0.0
    if not 0 <= weight <= 0.999:
        raise _bad("smooth", value=request.query_params.get("smooth"))
    return low, high, weight


def traces(
    run: Run,
    ys: list[str],
    x: str | None,
    *,
    upto: int,
    low: float | None = None,
    high: float | None = None,
    buckets: int = downsample.BUCKETS,
    raw: bool = False,
    weight: float = 0.0,
    scale: str = "linear",
) -> list[dict]:
    """Each y key against x up to a seq, as /series/ sends it (docs/api.md).

    A pair some panel draws is read from its overview: its first view costs its buckets, not
    its points. A range (zooming in) reads those points alone at full resolution, judged by
    the same gap; smoothing, `raw`, or an x no panel draws read the key's points.
    """
    keys = {k.name: k for k in Key.objects.filter(run=run, name__in=ys)}
    out = []
    sent = 0  # points at full resolution so far: a raw answer holds MAX_RAW_POINTS at most
    first_view = low is None and high is None and not raw and not weight
    for y in ys:
        summary = queries.overview(run.pk, y, x, upto=upto, buckets=first_view)
        # The overview judges gaps once a series is long enough to be drawn from it.
        judged = summary if summary is not None and summary.serves(downsample.BUCKETS) else None
        trace: dict = {"key": y}
        key = keys.get(y)
        # On a log scale a key with a value at or below zero is read whole, to leave those off.
        positive = scale != "log" or key is None or key.min is None or key.min > 0
        if summary is not None and first_view and positive and summary.serves(buckets):
            gap = summary.gap()
            xs, values, drawn = summary.view(buckets, gap=gap)
            total = summary.points
            if scale == "log":
                trace["off_log_scale"] = 0
        else:
            if judged is not None and not weight:
                # Zooming in: the range's points alone, judged by the overview's gap.
                xs, values = queries.series(run.pk, y, x, upto=upto, low=low, high=high)
            else:
                xs, values = queries.series(run.pk, y, x, upto=upto)
            if scale == "log":
                xs, values, off_scale = downsample.on_log_scale(xs, values)
            gap = judged.gap() if judged is not None else downsample.gap_threshold(xs)
            holes = downsample.gaps(xs, gap)
            if weight and values:
                # Smoothed over the whole run, then cut to the range: zooming in never reshapes it.
                sx, sy = _in_range(xs, downsample.smooth(xs, values, weight), low, high)
                trace["smoothed"] = dict(
                    zip(("x", "y"), downsample.min_max(sx, sy, buckets), strict=True)
                )
            xs, values = _in_range(xs, values, low, high)
            total = len(values)
            if scale == "log":
                trace["off_log_scale"] = len(_in_range(off_scale, off_scale, low, high)[0])
            if raw:
                sent += len(values)
                if sent > MAX_RAW_POINTS:
                    raise _bad("raw", most=MAX_RAW_POINTS)
            else:
                xs, values = downsample.min_max(xs, values, buckets)
            drawn = len(values)
            xs, values = downsample.with_breaks(xs, values, holes)
        trace.update(
            total=total,
            x=xs,
            y=values,
            drawn=drawn,
            gap=gap,
            passed_over=key.passed_over if key else 0,
            first_passed_x=queries.x_at(run, key.first_passed_seq, x) if key else None,
        )
        out.append(trace)
    return out


def _in_range(xs: list, ys: list, low: float | None, high: float | None) -> tuple[list, list]:
    if low is None and high is None:
        return xs, ys
    lo = -math.inf if low is None else low
    hi = math.inf if high is None else high
    kept = [(a, b) for a, b in zip(xs, ys, strict=True) if lo <= a <= hi]
    return [a for a, _ in kept], [b for _, b in kept]


@api_view(["GET"])
def run_log(request, name: str):
    """The masked log from a byte offset, as written: scripts and a remote `div log`."""
    run = visible_run(request, name)
    text, offset = logs.raw_page(run.log_path, _whole(request, "offset", 0, 0, 2**62))
    return Response({"text": text, "offset": offset, "live": run.is_live})


@api_view(["GET"])
def run_panels(request, name: str):
    """Every panel's first view in one request, each as a line of JSON the moment it is ready,
    so the tab draws each panel as its part arrives (docs/api.md).

    ?panel=0&panel=3  the panels to send, by their place in the run's panels (all, left out)
    ?buckets=2000     as /series/
    ?low=&high=       an x range, in each panel's own x: the panels a tab zooms together
    ?smooth=0.6       as /series/
    """
    run = visible_run(request, name)
    buckets = _whole(request, "buckets", downsample.BUCKETS, 10, MAX_BUCKETS)
    low, high, weight = _range_and_smoothing(request)
    panels = panels_for(run.layout.parsed, [k.name for k in queries.keys_of(run)])
    chosen = [_panel(value, len(panels)) for value in request.query_params.getlist("panel")]
    upto = run.points

    def part(number: int) -> bytes:
        panel = panels[number]
        series = traces(
            run,
            panel["y"],
            panel["x"],
            upto=upto,
            buckets=buckets,
            scale=panel["scale"],
            low=low,
            high=high,
            weight=weight,
        )
        body = {"panel": number, "x": panel["x"], "last": upto, "series": series}
        return orjson.dumps(body) + b"\n"

    numbers = chosen or list(range(len(panels)))
    response = StreamingHttpResponse(_each(request, part, numbers), content_type=NDJSON)
    response["Cache-Control"] = NO_CACHE
    return response


def _panel(value: str, count: int) -> int:
    if not WHOLE.fullmatch(value) or int(value) >= count:
        raise _bad("panel", value=value, count=count)
    return int(value)


def _each(request, part, numbers: list[int]):
    """The parts one after another: under daphne an async iterator, so each is sent as soon as
    it is made (Django would read a plain iterator to its end first); else a plain one."""
    if isinstance(request._request, ASGIRequest):

        async def parts():
            for number in numbers:
                yield await sync_to_async(part)(number)

        return parts()
    return (part(number) for number in numbers)


@api_view(["GET"])
def run_screen(request, name: str):
    """The masked log from a byte offset as a terminal shows it: the Log tab follows it."""
    run = visible_run(request, name)
    page = logs.screen_page(run.log_path, _whole(request, "offset", 0, 0, 2**62))
    return Response(
        {
            "lines": page.lines,
            "partial": page.partial,
            "offset": page.offset,
            "more": page.more,
            "live": run.is_live,
        }
    )


# ---- the dashboard: a page of runs --------------------------------------------------------------


@api_view(["GET"])
def runs_search(request):
    """A page of the user's runs, filtered, searched and sorted as the query string says
    (telemetry/listing.py; docs/api.md), each with its sparkline."""
    orgs = queries.orgs_of(request.user)
    try:
        listing = parse_listing(dict(request.query_params.lists()), orgs)
    except ListingError as e:
        raise ValidationError({"error": str(e)}) from None
    page = queries.run_page(request.user, listing)
    return Response(
        {
            "runs": [
                {**run_summary(run, page.keys[run.pk]), "sparkline": _sparkline(page, run.pk)}
                for run in page.runs
            ],
            "page": listing.page,
            "pages": pages_of(page.total),
            "total": page.total,
            "per_page": PER_PAGE,
            "sort": listing.sort,
            "cards": queries.card_titles(request.user),
            "orgs": orgs,
        }
    )


def _sparkline(page: queries.RunPage, run_id: int) -> dict | None:
    """The row's sparkline: its first panel's first key against its x, and how many points
    carry that key (0: "no points yet"), or None for a run with no panel yet."""
    pair = page.pairs[run_id]
    if pair is None:
        return None
    y, x = pair
    key = page.keys[run_id].get(y)
    xs, ys = page.lines.get(run_id, ([], []))
    return {"y": y, "x": x, "count": key.count if key is not None else 0, "xs": xs, "ys": ys}


# ---- a comparison of runs: /api/compare/ ----------------------------------------------------


def _compared(request) -> tuple[list[Run], Run]:
    """The runs of ?runs=, every one of them visible to the user, and the one whose layout is
    shown (?layout=, the first by default). Any other list is a 404, as a run the user may not
    see is: never a comparison of the others."""
    runs = comparison.listed(request.query_params.getlist("runs"))
    try:
        numbers = comparison.run_numbers(runs)
    except Refused:
        raise Http404 from None
    layout = request.query_params.get("layout") or None
    try:
        comparison.shown_layout(layout, numbers)
    except Refused:
        raise _bad("layout", value=layout) from None
    try:
        return queries.runs_compared(runs, user=request.user, layout=layout)
    except Refused:
        raise Http404 from None


def _aligned(request) -> str | None:
    """?x=: the key every panel is drawn against instead of its own."""
    x = request.query_params.get("x") or None
    return None if x is None else _key(request, "x", x)


@api_view(["GET"])
def compare(request):
    """The comparison: its runs with their keys, the panels and stats of the layout shown, and
    the keys every run wrote, which the panels may be aligned on (docs/api.md)."""
    runs, shown = _compared(request)
    return Response(comparison_of(runs, shown, _aligned(request)))


def comparison_of(runs: list[Run], shown: Run, x: str | None) -> dict:
    """A comparison as its page needs it; the page embeds the same, so it asks for its panels
    before Plotly.js has even loaded."""
    keys = {run.pk: _keys_by_name(run) for run in runs}
    layout = shown.layout.parsed
    stats = stats_for(layout)
    values = {run.pk: stat_values(run, keys[run.pk], layout) for run in runs}
    return {
        "runs": [
            {**run_summary(run, keys[run.pk]), "keys": [key_row(k) for k in keys[run.pk].values()]}
            for run in runs
        ],
        "layout": shown.name,
        "default": layout.get("default", False),
        "x": x,
        "align": comparison.common_keys([list(keys[run.pk]) for run in runs]),
        "buckets": comparison.trace_buckets(len(runs)),
        "panels": panels_for(layout, list(keys[shown.pk])),
        "stats": [
            {**stat, "values": [values[run.pk][i]["value"] for run in runs]}
            for i, stat in enumerate(stats)
        ],
    }


@api_view(["GET"])
def compare_panels(request):
    """Every panel of the comparison, each with a trace a run and a key, as lines of JSON sent
    the moment each is ready (docs/api.md).

    ?runs=run-3,run-7&layout=run-7  the comparison
    ?x=epoch          every panel against this key instead of its own
    ?panel=0&panel=3  the panels to send (all, left out)
    ?buckets=         min/max buckets a trace (comparison.trace_buckets by default)
    ?low=&high=&smooth=  as /panels/
    """
    runs, shown = _compared(request)
    x = _aligned(request)
    buckets = _whole(request, "buckets", comparison.trace_buckets(len(runs)), 10, MAX_BUCKETS)
    low, high, weight = _range_and_smoothing(request)
    panels = panels_for(shown.layout.parsed, [k.name for k in queries.keys_of(shown)])
    chosen = [_panel(value, len(panels)) for value in request.query_params.getlist("panel")]
    upto = {run.pk: run.points for run in runs}

    def part(number: int) -> bytes:
        panel = panels[number]
        against = panel["x"] if x is None else x
        sent = [
            {
                "run": run.name,
                "last": upto[run.pk],
                "series": traces(
                    run,
                    panel["y"],
                    against,
                    upto=upto[run.pk],
                    buckets=buckets,
                    scale=panel["scale"],
                    low=low,
                    high=high,
                    weight=weight,
                ),
            }
            for run in runs
        ]
        return orjson.dumps({"panel": number, "x": against, "runs": sent}) + b"\n"

    numbers = chosen or list(range(len(panels)))
    response = StreamingHttpResponse(_each(request, part, numbers), content_type=NDJSON)
    response["Cache-Control"] = NO_CACHE
    return response
