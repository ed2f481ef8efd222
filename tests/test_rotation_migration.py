"""A run stored before rotated files were read one by one has read its rotated files the old
way: after the migration, only those rotated from then on are unread."""

from __future__ import annotations

import json
import os

import pytest

from telemetry import homes, queries
from telemetry.ingest import Ingester
from telemetry.models import Run
from telemetry.tailing import fingerprint, head_length
from tests.test_storage_migration import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("telemetry", "0006_dashboard")


def lines(first: int, count: int) -> bytes:
    return "".join(json.dumps({"step": s}) + "\n" for s in range(first, first + count)).encode()


def test_a_run_read_before_the_migration_never_reads_its_old_rotated_files_again(home):
    old = migrate(BEFORE)
    org = old.get_model("telemetry", "Org").objects.create(name="acme")
    run = old.get_model("telemetry", "Run").objects.create(org_id=org.pk, home=homes.home_id())
    folder = home / "runs" / f"run-{run.pk}"
    (folder / "files").mkdir(parents=True)
    (folder / "log").touch()
    (folder / "telemetry.jsonl.1").write_bytes(lines(1, 20))  # rotated, and read, before
    current = folder / "telemetry.jsonl"
    current.write_bytes(lines(21, 20))
    info = os.stat(current)
    old.get_model("telemetry", "Run").objects.filter(pk=run.pk).update(
        offset=info.st_size,
        points=0,  # the points themselves are not what this is about
        telemetry_inode=f"{info.st_dev}:{info.st_ino}",
        telemetry_head=fingerprint(current.read_bytes()[: head_length(info.st_size)]),
    )

    migrate()
    current.unlink()  # gone, and a new one made: what was rotated before is not unread
    current.write_bytes(lines(41, 5))
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass

    assert [data["step"] for _, data in queries.points(run.pk)] == [41, 42, 43, 44, 45]
    assert Run.objects.get(pk=run.pk).telemetry_after > 0
