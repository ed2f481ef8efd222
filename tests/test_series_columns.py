"""`div telemetry RUN KEY...` prints a batch of points given as columns exactly as it prints
the same points row by row: a batch with every value in one step, any other one row a point."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from telemetry.tables import series, series_of_columns

numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def batches(draw):
    """Columns of equal length: x's (sometimes the seq, a range), then 1 to 4 keys'."""
    count = draw(st.integers(min_value=0, max_value=40))
    cells = st.one_of(st.none(), numbers) if draw(st.booleans()) else numbers
    if draw(st.booleans()):
        xs = range(7, 7 + count)
    else:
        xs = draw(st.lists(cells, min_size=count, max_size=count))
    keys = draw(st.integers(min_value=1, max_value=4))
    return [xs, *(draw(st.lists(cells, min_size=count, max_size=count)) for _ in range(keys))]


@given(batches(), st.sampled_from(["\t", ","]), st.booleans())
def test_a_batch_of_columns_prints_what_its_rows_print(columns, sep, every):
    rows = list(zip(*columns, strict=True))
    printed = "".join(series(rows, sep, every=every))
    assert "".join(series_of_columns(columns, sep, every=every)) == printed
    if not any(None in row for row in rows):  # as the chunks say of a batch: nothing missing
        assert "".join(series_of_columns(columns, sep, every=every, whole=True)) == printed


def test_a_batch_with_every_value_is_one_text_and_a_missing_value_an_empty_cell():
    assert series_of_columns([range(1, 3), [2.31, 1e20], [0, -0.0]]) == [
        "1\t2.31\t0\n2\t1e+20\t-0.0\n"
    ]
    assert series_of_columns([[100, 200, 300], [None, 1.2, None], [None, None, 5]], ",") == [
        "200,1.2,\n",
        "300,,5\n",
    ]
    assert series_of_columns([[], []]) == []
