"""The migration to the dashboard fills in, for the runs stored before it, what the dashboard
searches and sorts by: each command's search text, and each stat card's value."""

from __future__ import annotations

import textwrap

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from telemetry import services
from telemetry.layout import parse_layout
from telemetry.models import Run, StatValue

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("telemetry", "0005_remote_runs")
AFTER = ("telemetry", "0006_dashboard")
CARDS = textwrap.dedent(
    """\
    [[stat]]
    title = "Best"
    y = "loss"
    reduce = "min"

    [[stat]]
    title = "Best"
    y = "acc"

    [[stat]]
    y = "never"
    """
)


@pytest.fixture(autouse=True)
def latest_after():
    """Every test after these finds the schema at the latest migration, as the models are."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("telemetry"))


def migrate(target: tuple[str, str]):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()
    return executor.loader.project_state([target]).apps


def test_runs_stored_before_get_their_search_text_and_card_values():
    apps = migrate(BEFORE)
    Org, Run_, Layout, Key = (
        apps.get_model("telemetry", m) for m in ("Org", "Run", "Layout", "Key")
    )
    org = Org.objects.create(name="acme")
    carded = Run_.objects.create(org_id=org.pk, command=["python", "Train.py", "--LR=3e-4"])
    Layout.objects.create(run_id=carded.pk, source=CARDS, parsed=parse_layout(CARDS))
    Key.objects.create(run_id=carded.pk, name="loss", order=1, count=3, last=0.5, min=0.25, max=2)
    Key.objects.create(run_id=carded.pk, name="acc", order=2, count=1, last=0.9, min=0.9, max=0.9)
    plain = Run_.objects.create(org_id=org.pk, command=["bash", "ÉTÉ.sh"])
    Layout.objects.create(run_id=plain.pk, source="", parsed={"x": None, "panels": [], "stats": []})

    migrate(AFTER)

    assert dict(Run.objects.values_list("pk", "search_text")) == {
        carded.pk: "python train.py --lr=3e-4",
        plain.pk: "bash été.sh",
    }
    # The first card of a title; a card whose key was never written has no value.
    assert list(StatValue.objects.values_list("run_id", "title", "value")) == [
        (carded.pk, "Best", 0.25)
    ]


def test_a_run_made_after_it_is_searched_as_it_is_shown(home):
    run = services.run_create(
        org=services.org_get_or_create(name="acme"), command=["python", "Ünï.py", "--Seed", "7"]
    )

    assert Run.objects.get(pk=run.pk).search_text == "python ünï.py --seed 7"
