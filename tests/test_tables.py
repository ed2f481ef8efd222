"""The text `div telemetry` prints, as the spec's "Reading it" shows it."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.lines import format_number
from telemetry.tables import (
    csv_lines,
    header,
    json_line,
    key_table,
    missing_key,
    runs_table,
    series,
    tsv,
)

# Copied from the spec, byte for byte.
SPEC_KEY_TABLE = """\
key        count  last     min      max
step       412    41200    100      41200
loss       412    0.0412   0.0398   2.31
eval_loss  41     0.0267   0.0261   1.88
"""

SPEC_KEYS = [
    ("step", 412, 41200, 100, 41200),
    ("loss", 412, 0.0412, 0.0398, 2.31),
    ("eval_loss", 41, 0.0267, 0.0261, 1.88),
]

POINTS = [
    (1, {"step": 100, "loss": 2.31}),
    (2, {"step": 200, "loss": 1.2, "eval_loss": 1.88}),
    (3, {"step": 300, "lr": 0.0003}),
    (4, {"step": 400, "loss": 0.0412, "eval_loss": 0.0267}),
]


def table(points: list[tuple[int, dict]], x: str | None, keys: list[str]) -> list[list[str]]:
    """The rows printed for these points and keys. The database hands `series` (x, value of each
    key) per point, None where the point lacks one; without an x key, x is the point's seq."""
    columns = [
        (seq if x is None else data.get(x), *(data.get(k) for k in keys)) for seq, data in points
    ]
    return [line.removesuffix("\n").split("\t") for line in series(columns)]


def column_starts(line: str) -> list[int]:
    """Where each cell of an aligned line starts."""
    starts, previous = [], " "
    for i, char in enumerate(line):
        if char != " " and previous == " ":
            starts.append(i)
        previous = char
    return starts


# With no keys: the key table


def test_the_key_table_is_the_specs_example():
    assert key_table(SPEC_KEYS) == SPEC_KEY_TABLE


def test_the_key_table_of_a_run_with_no_keys_is_its_header():
    assert key_table([]) == "key  count  last     min      max\n"


def test_the_key_table_widens_a_column_for_a_long_value():
    text = key_table([("loss", 3, 1.8446744073709552e19, -0.5, 2.0), ("step", 3, 300, 100, 300)])
    assert text == (
        "key   count  last                    min      max\n"
        "loss  3      1.8446744073709552e+19  -0.5     2.0\n"
        "step  3      300                     100      300\n"
    )


@settings(max_examples=100)
@given(
    st.lists(
        st.tuples(
            st.text(alphabet="abz_-.0", min_size=1, max_size=12),
            st.integers(1, 200_000),
            st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False),
            st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False),
            st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_every_row_of_the_key_table_lines_up_with_its_header(keys):
    lines = key_table(keys).splitlines()
    assert len(lines) == len(keys) + 1
    assert all(column_starts(line) == column_starts(lines[0]) for line in lines)
    assert [line.split() for line in lines[1:]] == [
        [name, str(count), *(format_number(v) for v in values)] for name, count, *values in keys
    ]


# The runs there are


def test_the_runs_table_lists_each_run_aligned():
    text = runs_table(
        [
            ("run-7", "running", 412, 3, "2025-01-02 10:00"),
            ("run-12", "succeeded", 200000, 256, "2025-01-03 09:30"),
        ]
    )
    assert text == (
        "name    status     points  keys  created\n"
        "run-7   running    412     3     2025-01-02 10:00\n"
        "run-12  succeeded  200000  256   2025-01-03 09:30\n"
    )


# With keys: the points as columns


def test_the_header_is_x_then_one_column_per_key():
    assert header("step", ["loss", "eval_loss"]) == ["step", "loss", "eval_loss"]


def test_the_x_column_is_headed_seq_when_points_are_drawn_against_their_place():
    assert header(None, ["loss"]) == ["seq", "loss"]


def test_a_point_missing_a_key_has_an_empty_cell_never_a_zero():
    text = "".join(
        tsv([header("step", ["loss", "eval_loss"]), *table(POINTS, "step", ["loss", "eval_loss"])])
    )
    assert text == ("step\tloss\teval_loss\n100\t2.31\t\n200\t1.2\t1.88\n400\t0.0412\t0.0267\n")


def test_series_formats_each_row_and_leaves_out_a_row_with_no_value():
    rows = [(1, 2.31, None), (2, None, None), (3, None, 0.5), (None, 0, None), (4, 1e-07, 5)]
    assert list(series(rows)) == ["1\t2.31\t\n", "3\t\t0.5\n", "\t0\t\n", "4\t1e-07\t5\n"]


def test_series_with_commas_is_what_csv_writes_for_the_same_cells():
    rows = [(1, 2.31, None), (2, -0.5, 3), (None, 0, None)]
    cells = [line.removesuffix("\n").split("\t") for line in series(rows)]
    assert list(series(rows, sep=",")) == list(csv_lines(cells))


def test_only_points_carrying_at_least_one_of_the_keys_get_a_row():
    assert list(table(POINTS, "step", ["eval_loss"])) == [["200", "1.88"], ["400", "0.0267"]]
    assert list(table(POINTS, "step", ["lr"])) == [["300", "0.0003"]]


def test_a_key_no_point_carries_gives_no_rows():
    assert list(table(POINTS, "step", ["never_written"])) == []


def test_without_an_x_key_the_first_column_is_the_points_place_in_the_run():
    text = "".join(tsv([header(None, ["loss"]), *table(POINTS, None, ["loss"])]))
    assert text == "seq\tloss\n1\t2.31\n2\t1.2\n4\t0.0412\n"


def test_a_point_without_the_x_key_has_an_empty_x_cell():
    points = [
        (1, {"epoch": 0.5, "loss": 1.0}),
        (2, {"loss": 0.9}),
        (3, {"epoch": 1.0, "loss": 0.8}),
    ]
    assert list(table(points, "epoch", ["loss"])) == [["0.5", "1.0"], ["", "0.9"], ["1.0", "0.8"]]


def test_a_value_of_zero_is_printed_as_zero_and_its_row_kept():
    points = [(1, {"step": 0, "loss": 0}), (2, {"step": 1, "loss": 0.0})]
    assert list(table(points, "step", ["loss"])) == [["0", "0"], ["1", "0.0"]]


def test_numbers_are_printed_as_written():
    points = [(1, {"step": 41200, "lr": 3e-4, "eps": 1e-07, "loss": 1.0})]
    assert list(table(points, "step", ["lr", "eps", "loss"])) == [
        ["41200", "0.0003", "1e-07", "1.0"]
    ]


def test_a_dotted_key_is_its_own_column():
    points = [(1, {"step": 10, "eval.loss": 0.4}), (2, {"step": 20, "loss": 0.5})]
    text = "".join(tsv([header("step", ["eval.loss"]), *table(points, "step", ["eval.loss"])]))
    assert text == "step\teval.loss\n10\t0.4\n"


@settings(max_examples=200)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["step", "loss", "eval_loss", "lr"]),
            st.integers(-1000, 1000) | st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=20,
    ),
    st.lists(st.sampled_from(["loss", "eval_loss", "lr"]), min_size=1, max_size=3, unique=True),
    st.sampled_from(["step", None]),
)
def test_every_cell_is_the_value_as_written_or_empty_where_the_point_lacks_it(datas, keys, x):
    points = list(enumerate(datas, start=1))
    rows = list(table(points, x, keys))
    carrying = [(seq, data) for seq, data in points if any(key in data for key in keys)]
    assert len(rows) == len(carrying)
    for row, (seq, data) in zip(rows, carrying, strict=True):
        expected_x = str(seq) if x is None else format_number(data.get(x))
        assert row == [expected_x, *(format_number(data[k]) if k in data else "" for k in keys)]


# --csv


def test_csv_is_the_same_table_with_commas():
    rows = [header("step", ["loss", "eval_loss"]), *table(POINTS, "step", ["loss", "eval_loss"])]
    assert "".join(csv_lines(rows)) == (
        "step,loss,eval_loss\n100,2.31,\n200,1.2,1.88\n400,0.0412,0.0267\n"
    )


@pytest.mark.parametrize(
    "cell,written",
    [
        ("a,b", '"a,b"'),
        ('say "hi"', '"say ""hi"""'),
        ("two\nlines", '"two\nlines"'),
        ("plain", "plain"),
        ("", ""),
    ],
)
def test_a_csv_cell_is_quoted_where_it_needs_it(cell, written):
    assert list(csv_lines([["1", cell]])) == [f"1,{written}\n"]


def test_csv_lines_come_one_row_at_a_time_and_read_back_as_written():
    rows = [["seq", "a,b"], ["1", 'x"y'], ["2", ""]]
    lines = list(csv_lines(rows))
    assert len(lines) == 3
    assert list(csv.reader(io.StringIO("".join(lines)))) == rows


# --json


def test_a_json_line_is_seq_and_data():
    line = json_line(1, {"step": 100, "loss": 2.31, "eval.loss": 1.88, "lr": 3e-4})
    assert (
        line == '{"seq": 1, "data": {"step": 100, "loss": 2.31, "eval.loss": 1.88, "lr": 0.0003}}\n'
    )


def test_a_json_line_reads_back_as_the_point():
    data = {"step": 41200, "loss": 0.0412}
    assert json.loads(json_line(412, data)) == {"seq": 412, "data": data}


def test_a_missing_key_is_shown_on_one_line_whatever_was_typed():
    """The key comes from the command line: a newline or an escape in it stays on the line."""
    assert missing_key("run-1", "lo\nss\x1b[2J", ["loss"]) == (
        'telemetry: run-1 has no key "lo\\nss\\u001b[2J" yet; its column is empty; '
        "did you mean loss?\n"
    )
    assert missing_key("run-1", "eval.loss", []) == (
        'telemetry: run-1 has no key "eval.loss" yet; its column is empty\n'
    )
