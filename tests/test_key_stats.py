"""A key's last, lowest and highest value read back as written, on SQLite and PostgreSQL alike:
an integer as an integer, a float in Python's shortest repr, whatever its size."""

from __future__ import annotations

import math

import pytest
from django.test import Client

from telemetry.models import Key

pytest_plugins = ["tests.personas"]

# Floats PostgreSQL's jsonb keeps as integers (1e20 becomes its 21 digits), -0.0, the first
# integer past 64 bits and one far past them (floats by then: lines.py), and integers at the
# edges of 64 bits, which stay integers.
LINES = [
    {
        "step": 1,
        "huge": 1e20,
        "top": 1e308,
        "zero": -0.0,
        "past": 2**63,
        "wide": 2**70,
        "edge": 2**63 - 1,
        "low": -(2**63),
        "even": 1e17,
        "ten": 10**17,
    },
    {"step": 2, "huge": 3, "top": -1e308, "zero": 0, "even": 2.5},
]

STATS = {
    "step": ("2", "1", "2"),
    "huge": ("3", "3", "1e+20"),
    "top": ("-1e+308", "-1e+308", "1e+308"),
    "zero": ("0", "-0.0", "-0.0"),
    "past": ("9.223372036854776e+18",) * 3,
    "wide": ("1.1805916207174113e+21",) * 3,
    "edge": ("9223372036854775807",) * 3,
    "low": ("-9223372036854775808",) * 3,
    "even": ("2.5", "2.5", "1e+17"),
    "ten": ("100000000000000000",) * 3,
}


KEY_TABLE = """\
key   count  last                    min                     max
step  2      2                       1                       2
huge  2      3                       3                       1e+20
top   2      -1e+308                 -1e+308                 1e+308
zero  2      0                       -0.0                    -0.0
past  1      9.223372036854776e+18   9.223372036854776e+18   9.223372036854776e+18
wide  1      1.1805916207174113e+21  1.1805916207174113e+21  1.1805916207174113e+21
edge  1      9223372036854775807     9223372036854775807     9223372036854775807
low   1      -9223372036854775808    -9223372036854775808    -9223372036854775808
even  2      2.5                     2.5                     1e+17
ten   1      100000000000000000      100000000000000000      100000000000000000
"""


@pytest.fixture
def written(make_run):
    telemetry = make_run()
    telemetry.write(*LINES)
    telemetry.ingest()
    return telemetry.run


def test_key_stats_keep_each_numbers_type_in_the_database(written):
    stats = {k.name: (k.last, k.min, k.max) for k in Key.objects.filter(run=written)}

    assert {name: tuple(map(repr, values)) for name, values in stats.items()} == STATS
    assert math.copysign(1, stats["zero"][1]) == -1


def test_div_telemetry_prints_the_key_table_as_written(written, div):
    shown = div("telemetry", written.name)

    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == KEY_TABLE


def test_the_keys_api_sends_each_number_as_written(written, alice):
    client = Client()
    client.force_login(alice)

    keys = client.get(f"/api/runs/{written.name}/keys/").json()["keys"]

    assert {k["name"]: (repr(k["last"]), repr(k["min"]), repr(k["max"])) for k in keys} == STATS
