"""The migration to key stats kept as written carries every stored key's stats over, and back:
on PostgreSQL the ones jsonb had turned into integers (1e20, 1e17, -0.0) become what was written."""

from __future__ import annotations

import orjson
import pytest

from telemetry import chunks
from telemetry.chunks import Column
from telemetry.models import Key
from tests.test_storage_migration import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("telemetry", "0009_point_run_index_dropped")

# Each key's values by seq: seqs 1 to 1024 sealed into chunks, 1025 on whole.
VALUES = {
    "huge": {1: 1e20, 1025: 3},
    "zero": {1: -0.0, 2: 0},
    "even": {1: 1e17, 2: 2.5},
    "ten": {1: 10**17},
    "past": {1: 2.0**63},
    "small": {1: 1e-07, 3: 0.0},
}
AS_WRITTEN = {
    "huge": ("3", "3", "1e+20"),
    "zero": ("0", "-0.0", "-0.0"),
    "even": ("2.5", "2.5", "1e+17"),
    "ten": ("100000000000000000",) * 3,
    "past": ("9.223372036854776e+18",) * 3,
    "small": ("0.0", "0.0", "1e-07"),
}


def store_old_keys(apps) -> int:
    """A run as 0009 stored it: its keys' stats in JSON columns, its values in chunks and rows."""
    Org, Run, Key, Chunk, Point = (
        apps.get_model("telemetry", m) for m in ("Org", "Run", "Key", "Chunk", "Point")
    )
    org = Org.objects.create(name="acme")
    run = Run.objects.create(org_id=org.pk, points=1025, sealed=1024)
    for order, (name, values) in enumerate(VALUES.items(), 1):
        sealed = {seq: value for seq, value in values.items() if seq <= 1024}
        packed = chunks.pack(0, Column(list(sealed), list(sealed.values())))
        Chunk.objects.create(
            run_id=run.pk,
            key_no=order,
            window_no=0,
            count=packed.count,
            first_seq=packed.first,
            stride=packed.stride,
            seqs=packed.seqs,
            kind=packed.kind,
            vals=packed.values,
            low=packed.low,
            high=packed.high,
        )
        ordered = list(values.values())
        low = high = ordered[0]
        for value in ordered[1:]:
            low, high = (value if value < low else low), (value if value > high else high)
        Key.objects.create(
            run_id=run.pk,
            name=name,
            order=order,
            count=len(values),
            last=ordered[-1],
            min=low,
            max=high,
        )
    whole = {name: values[1025] for name, values in VALUES.items() if 1025 in values}
    Point.objects.create(run_id=run.pk, seq=1025, data=orjson.dumps(whole).decode())
    return run.pk


def stats_of(run_id: int) -> dict:
    return {
        k.name: tuple(map(repr, (k.last, k.min, k.max))) for k in Key.objects.filter(run_id=run_id)
    }


def test_key_stats_stored_as_json_read_back_as_written_after_migrating_and_back(home):
    old = migrate(BEFORE)
    try:
        run_id = store_old_keys(old)
    finally:
        migrate()

    assert stats_of(run_id) == AS_WRITTEN

    migrate(BEFORE)
    migrate()
    assert stats_of(run_id) == AS_WRITTEN
