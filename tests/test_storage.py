"""Points stored by key: every reader gets them back as written; a read costs what it returns."""

from __future__ import annotations

import json
import math

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from telemetry import queries, services, storage
from telemetry.chunks import WINDOW
from telemetry.lines import read_line
from telemetry.models import Key, Point

pytest_plugins = ["tests.personas"]


def odd_numbers(step: int) -> dict:
    """A line whose numbers test how they are kept: ints, floats in their shortest repr, ints
    past 64 bits (kept as floats), a key that is an int once and floats after, a key on every
    10th point and a key on points of no regular spacing."""
    line = {
        "step": step,
        "loss": 1 / step,
        "big": 2**63 - step,
        "wide": 2**70 + step,
        "tiny": 5e-324 * step,
        "huge": 1e20 * step,
        "zero": -0.0,
        "mixed": 0 if step == 1 else step / 3,
    }
    if step % 10 == 0:
        line["eval"] = {"loss": step / 7}
    if step % 7 in (1, 4):
        line["odd"] = step * 1.5
    return line


def written(points) -> list:
    """Points as div telemetry --json prints their numbers: the repr of each."""
    return [(seq, {key: repr(value) for key, value in data.items()}) for seq, data in points]


@pytest.fixture
def run_of(make_run):
    def make(lines: list[dict], layout: str = ""):
        telemetry = make_run(layout)
        telemetry.write(*lines)
        telemetry.ingest()
        return telemetry

    return make


def test_points_read_back_as_written_before_and_after_their_window_is_sealed(run_of):
    lines = [odd_numbers(step) for step in range(1, 1501)]
    expected = [
        (seq, read_line(json.dumps(line).encode()).numbers) for seq, line in enumerate(lines, 1)
    ]
    telemetry = run_of(lines)
    run = telemetry.run

    # Live: the first window is sealed, the rest is stored whole.
    assert (run.points, run.sealed, Point.objects.filter(run=run).count()) == (1500, WINDOW, 476)
    assert written(queries.points(run.pk)) == written(expected)
    assert written(queries.points(run.pk, after=1000, upto=1100)) == written(expected[1000:1100])

    telemetry.finish()

    assert (run.sealed, Point.objects.filter(run=run).count()) == (1500, 0)
    assert written(queries.points(run.pk)) == written(expected)
    assert written(queries.points(run.pk, after=1020, upto=1030)) == written(expected[1020:1030])


def test_a_window_sealed_part_full_is_continued_when_the_telemetry_opens_again(run_of):
    """A lost run heard from again: its last window was sealed at 1,030 points when its
    telemetry closed, and the points after it carry on in that window."""
    lines = [odd_numbers(step) for step in range(1, 1101)]
    expected = [
        (seq, read_line(json.dumps(line).encode()).numbers) for seq, line in enumerate(lines, 1)
    ]
    telemetry = run_of(lines[:1030])
    run = telemetry.run
    run.supervisor_host, run.supervisor_pid = "elsewhere", 1
    run.save(update_fields=["supervisor_host", "supervisor_pid"])
    assert services.run_lose(run=run)
    telemetry.ingest()
    assert (run.telemetry_closed, run.sealed) == (True, 1030)

    services.run_heartbeat(run_id=run.pk, host="elsewhere", pid=1)
    telemetry.write(*lines[1030:])
    telemetry.ingest()
    telemetry.finish()

    assert (run.points, run.sealed, Point.objects.filter(run=run).count()) == (1100, 1100, 0)
    assert written(queries.points(run.pk)) == written(expected)
    xs, ys = queries.series(run.pk, "loss", "step", upto=run.points)
    assert (xs, ys) == ([line["step"] for line in lines], [line["loss"] for line in lines])


def test_columns_and_series_read_back_as_written_across_the_sealed_seq(run_of):
    lines = [odd_numbers(step) for step in range(1, 1301)]
    telemetry = run_of(lines)
    keys = ["loss", "wide", "huge", "mixed", "eval.loss", "odd", "nowhere"]

    rows = [
        row
        for columns, _ in queries.column_batches(telemetry.run.pk, "step", keys)
        for row in zip(*columns, strict=True)
    ]
    xs, ys = queries.series(telemetry.run.pk, "odd", "step", upto=1300)

    flat = [read_line(json.dumps(line).encode()).numbers for line in lines]
    assert [list(map(repr, row)) for row in rows] == [
        [repr(n.get(k)) for k in ["step", *keys]] for n in flat
    ]
    assert (xs, list(map(repr, ys))) == (
        [n["step"] for n in flat if "odd" in n],
        [repr(n["odd"]) for n in flat if "odd" in n],
    )


def test_a_batch_of_columns_says_it_is_whole_only_when_every_point_has_every_key(run_of):
    lines = [
        {"step": s, "loss": 1 / s, **({"eval": {"loss": s}} if s % 10 == 0 else {})}
        for s in range(1, 3001)
    ]
    telemetry = run_of(lines)
    run_id = telemetry.run.pk

    def batches(x, keys):
        return list(queries.column_batches(run_id, x, keys, after=500, upto=2900))

    # Sealed windows first (2048 points), then the points stored whole.
    whole = batches("step", ["loss"])
    assert [flag for _, flag in whole] == [True, False]
    assert sum(len(columns[0]) for columns, _ in whole) == 2400
    for x, keys in (
        ("step", ["loss", "eval.loss"]),
        ("step", ["nowhere"]),
        ("eval.loss", ["loss"]),
    ):
        sealed = batches(x, keys)[:-1]
        assert sealed and not any(flag for _, flag in sealed), (x, keys)
    assert all(flag for _, flag in batches(None, ["loss"])[:-1])


def chunk_reads(captured) -> list[str]:
    return [q["sql"] for q in captured if "telemetry_chunk" in q["sql"]]


def test_a_keys_series_reads_its_own_chunks_and_its_xs_alone(run_of):
    telemetry = run_of([odd_numbers(step) for step in range(1, 3001)])
    numbers = queries.key_numbers(telemetry.run.pk)

    with CaptureQueriesContext(connection) as captured:
        xs, ys = queries.series(telemetry.run.pk, "eval.loss", "step", upto=3000)

    assert xs == list(range(10, 3001, 10))
    wanted = f"key_no IN ({numbers['eval.loss']}, {numbers['step']})"
    assert chunk_reads(captured) and all(wanted in sql for sql in chunk_reads(captured))


def test_zooming_in_reads_the_windows_of_the_range_alone_at_full_resolution(run_of):
    telemetry = run_of([{"step": s * 2, "loss": math.sin(s)} for s in range(1, 10_001)])

    with CaptureQueriesContext(connection) as captured:
        xs, ys = queries.series(telemetry.run.pk, "loss", "step", upto=10_000, low=5000, high=5100)

    assert xs == list(range(5000, 5101, 2))
    assert ys == [math.sin(s) for s in range(2500, 2551)]
    # step 5000 to 5100 are seqs 2500 to 2550: the third window, and nothing else.
    reads = [sql for sql in chunk_reads(captured) if "vals" in sql]
    assert reads and all("BETWEEN 2 AND 2" in sql for sql in reads)


def test_a_key_arriving_late_moves_the_default_panels_to_step_and_their_overviews_with_them(
    run_of,
):
    lines = [{"loss": 1.0} for _ in range(1100)] + [
        {"step": s, "loss": 1 / s} for s in range(1, 2001)
    ]
    telemetry = run_of(lines)
    numbers = queries.key_numbers(telemetry.run.pk)

    pairs = set(storage.overviews(telemetry.run.pk))

    assert pairs == {(numbers["loss"], numbers["step"])}
    summary = queries.overview(telemetry.run.pk, "loss", "step", upto=3100)
    assert (summary.points, summary.first, summary.last) == (2000, (1, 1.0), (2000, 1 / 2000))


def test_a_long_series_is_drawn_from_its_overview_as_its_points_would_draw_it(
    run_of, alice, client
):
    n = 80_000
    lines = []
    for step in range(1, n + 1):
        loss = float("nan") if 30_001 <= step <= 30_500 else 1 + math.sin(step / 900)
        lines.append({"step": step, "loss": 1e6 if step == 12_345 else loss})
    telemetry = run_of(lines)
    client.force_login(alice)
    url = f"/api/runs/{telemetry.run.name}/series/"

    with CaptureQueriesContext(connection) as captured:
        [first] = client.get(url, {"y": "loss", "x": "step"}).json()["series"]
    # Looked at now: the next request's new connection forgets them.
    read, reads = len(captured), chunk_reads(captured)
    [raw] = client.get(url, {"y": "loss", "x": "step", "raw": 1}).json()["series"]

    # No points but step's where the key first went NaN, for first_passed_x: a window's chunk.
    assert read and len(reads) == 1 and "key_no IN (1) AND window_no BETWEEN 29 AND 29" in reads[0]
    assert (first["total"], raw["total"], first["passed_over"]) == (n - 500, n - 500, 500)
    assert first["drawn"] <= 2 * 2000 + 2 < raw["drawn"]
    assert first["x"][first["y"].index(1e6)] == 12_345
    assert (first["x"][0], first["x"][-1]) == (1, n)
    assert max(y for y in first["y"] if y is not None) == 1e6
    assert min(y for y in first["y"] if y is not None) == min(y for y in raw["y"] if y is not None)
    # One break, where the key went missing, as the full-resolution series has it.
    assert first["x"].count(None) == raw["x"].count(None) == 1
    hole = first["x"].index(None)
    assert first["x"][hole - 1] <= 30_000 and first["x"][hole + 1] >= 30_501
    assert first["gap"] == raw["gap"] == 5.0


def test_many_runs_sparklines_are_read_from_their_coarse_buckets(run_of):
    ended = run_of([{"step": s, "loss": 10 - s / 1000} for s in range(1, 5001)])
    ended.finish()
    live = run_of([{"step": s, "loss": s / 100} for s in range(1, 1500)])
    other = run_of([{"step": s, "acc": 0.5} for s in range(1, 100)])

    lines = queries.sparklines([ended.run.pk, live.run.pk, other.run.pk], "loss", "step")

    assert set(lines) == {ended.run.pk, live.run.pk}
    xs, ys = lines[ended.run.pk]
    assert len(xs) <= 2 * 64 + 2
    assert (xs[0], ys[0], xs[-1], ys[-1]) == (1, 10 - 1 / 1000, 5000, 5.0)
    xs, ys = lines[live.run.pk]  # its last 475 points are not sealed yet: they are there too
    assert (xs[-1], ys[-1], max(ys)) == (1499, 14.99, 14.99)


def test_a_run_deleted_takes_its_chunks_and_overviews_with_it(run_of):
    telemetry = run_of([{"step": s, "loss": 1.0} for s in range(1, 3000)])

    telemetry.run.delete()

    assert not Key.objects.exists()
    for model in ("Chunk", "Overview", "OverviewPart", "Point"):
        assert not getattr(storage.models, model).objects.exists(), model


def plan_of(sql: str, params: list) -> str:
    """How the database would run a statement; PostgreSQL told to use an index if it can, as
    it would on a table of many runs."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            return " ".join(row[-1] for row in cursor.fetchall())
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return " ".join(row[0] for row in cursor.fetchall())


def test_whole_points_have_one_index_the_unique_run_and_seq_which_serves_the_run_too(run_of):
    telemetry = run_of([{"step": s, "loss": 1.0} for s in range(1, 1500)])
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, Point._meta.db_table)

    indexes = {
        name: c["columns"]
        for name, c in found.items()
        if (c["index"] or c["unique"]) and not c["primary_key"]
    }
    assert indexes == {"one_point_per_seq": ["run_id", "seq"]}
    # What deleting a run asks of its whole points, and the foreign key's check: by index.
    plan = plan_of(f"SELECT 1 FROM {Point._meta.db_table} WHERE run_id = %s", [telemetry.run.pk])
    assert "SCAN" not in plan and "Seq Scan" not in plan, plan
    telemetry.run.delete()
    assert not Point.objects.exists()


def test_the_points_api_reads_across_the_sealed_seq(run_of, alice):
    telemetry = run_of([{"step": s, "loss": s / 4} for s in range(1, 1201)])
    client = Client()
    client.force_login(alice)

    body = client.get(f"/api/runs/{telemetry.run.name}/points/", {"after": 1020, "limit": 8}).json()

    assert body == {
        "points": [{"seq": s, "data": {"step": s, "loss": s / 4}} for s in range(1021, 1029)],
        "last": 1200,
    }


def test_a_run_whose_layout_names_a_key_never_written_is_sealed_and_closes(run_of):
    layout = '[[panel]]\ny = ["loss", "never"]\n\n[[panel]]\ny = "acc"\nx = "nowhere"\n'
    telemetry = run_of([{"step": s, "loss": 1 / s, "acc": 0.5} for s in range(1, 1101)], layout)

    telemetry.finish()

    assert (telemetry.run.telemetry_closed, telemetry.run.sealed) == (True, 1100)
    numbers = queries.key_numbers(telemetry.run.pk)
    assert set(storage.overviews(telemetry.run.pk)) == {(numbers["loss"], numbers["step"])}
    assert queries.overview(telemetry.run.pk, "loss", "step", upto=1100).points == 1100
