"""The migration to points stored by key carries every stored run over, and back."""

from __future__ import annotations

import math

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from telemetry import queries
from telemetry.layout import default_layout, parse_layout
from telemetry.models import Overview, Point, Run

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("telemetry", "0003_runs_and_files")


def migrate(target: tuple[str, str] | None = None):
    """Migrate telemetry to target (its latest when None); the models as they were there."""
    executor = MigrationExecutor(connection)
    if target is None:
        target = executor.loader.graph.leaf_nodes("telemetry")[0]
    executor.migrate([target])
    executor.loader.build_graph()
    return executor.loader.project_state([target]).apps


def numbers(seq: int) -> dict:
    """Numbers the old column held on SQLite and PostgreSQL alike."""
    data = {"step": seq * 10, "loss": 1 / seq, "lr": 3e-4 * seq, "big": 2**62 + seq}
    if seq % 10 == 0:
        data["eval.loss"] = math.sqrt(seq)
    if seq % 7 == 3:
        data["odd"] = -seq
    return data


def store_old_run(apps, org, *, points: int, closed: bool, layout: str = "") -> int:
    """A run as the old schema stored it: a JSON row a point, and its keys."""
    Run, Layout, Key, Point = (
        apps.get_model("telemetry", m) for m in ("Run", "Layout", "Key", "Point")
    )
    run = Run.objects.create(org_id=org.pk, points=points, telemetry_closed=closed)
    Layout.objects.create(
        run_id=run.pk, source=layout, parsed=parse_layout(layout) if layout else default_layout()
    )
    Point.objects.bulk_create(
        Point(run_id=run.pk, seq=s, data=numbers(s)) for s in range(1, points + 1)
    )
    names = list(dict.fromkeys(k for s in range(1, 21) for k in numbers(s)))
    Key.objects.bulk_create(
        Key(run_id=run.pk, name=name, order=i, count=1) for i, name in enumerate(names, 1)
    )
    return run.pk


def written(points) -> list:
    return [(seq, {key: repr(value) for key, value in data.items()}) for seq, data in points]


def test_points_stored_a_row_each_read_back_the_same_after_migrating_and_back(home):
    old = migrate(BEFORE)
    try:
        org = old.get_model("telemetry", "Org").objects.create(name="acme")
        closed = store_old_run(old, org, points=2500, closed=True)
        open_ = store_old_run(
            old, org, points=1500, closed=False, layout='[[panel]]\ny = ["loss", "eval.loss"]\n'
        )
    finally:
        migrate()

    for run_id, points in ((closed, 2500), (open_, 1500)):
        assert written(queries.points(run_id)) == written(
            (s, numbers(s)) for s in range(1, points + 1)
        )
    assert (Run.objects.get(pk=closed).sealed, Point.objects.filter(run_id=closed).count()) == (
        2500,
        0,
    )
    assert (Run.objects.get(pk=open_).sealed, Point.objects.filter(run_id=open_).count()) == (
        1024,
        476,
    )
    xs, ys = queries.series(open_, "eval.loss", "step", upto=1500)
    assert (xs, ys) == (
        [s * 10 for s in range(10, 1501, 10)],
        [math.sqrt(s) for s in range(10, 1501, 10)],
    )
    # The default layout draws every key against step; the file's panel, loss and eval.loss.
    assert Overview.objects.filter(run_id=closed).count() == 5
    assert Overview.objects.filter(run_id=open_).count() == 2
    summary = queries.overview(open_, "loss", "step", upto=1500)
    assert (summary.points, summary.last) == (1500, (15_000, 1 / 1500))

    old = migrate(BEFORE)
    try:
        back = (
            old.get_model("telemetry", "Point")
            .objects.filter(run_id=closed)
            .order_by("seq")
            .values_list("seq", "data")
        )
        assert written(back) == written((s, numbers(s)) for s in range(1, 2501))
    finally:
        migrate()
    assert written(queries.points(open_)) == written((s, numbers(s)) for s in range(1, 1501))
