"""telemetry.toml, as the spec's "Laying it out" section describes it."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry.layout import (
    BAD_KEY,
    BAD_KEY_IN_Y,
    EMPTY_Y,
    KEY_PATTERN,
    MAX_PANEL_KEYS,
    MIN_IS_MAX,
    NO_Y,
    NOT_BOOL,
    NOT_FINITE,
    NOT_NUMBER,
    NOT_ON_LOG,
    NOT_ONE_OF,
    NOT_PANEL_Y,
    NOT_STAT_Y,
    NOT_STRING,
    NOT_TABLES,
    NOT_TOML,
    PANEL_KEYS,
    REDUCES,
    SCALES,
    STAT_WANTS,
    TOO_DEEP,
    TOO_LONG,
    UNKNOWN_KEY,
    LayoutError,
    default_layout,
    panel_x,
    panels_for,
    parse_layout,
    stats_for,
)
from tests.examples import SPEC_EXAMPLE
from tests.strategies import characters

SPEC_PARSED = {
    "x": "step",
    "default": False,
    "panels": [
        {
            "title": "Loss",
            "x": None,
            "y": ["loss", "eval_loss"],
            "scale": "log",
            "min": None,
            "max": None,
            "rule": None,
            "wide": False,
        },
        {
            "title": "F1",
            "x": None,
            "y": ["eval_strict_f1", "eval_typed_f1"],
            "scale": "linear",
            "min": 0.9,
            "max": 1.0,
            "rule": 0.95,
            "wide": False,
        },
        {
            "title": None,
            "x": None,
            "y": ["eval_leak_recall"],
            "scale": "linear",
            "min": None,
            "max": None,
            "rule": None,
            "wide": True,
        },
    ],
    "stats": [{"title": "Samples/s", "y": "eval_samples_per_second", "reduce": "last"}],
}

TOP = "telemetry"


def panel(n: int) -> str:
    return f"telemetry [[panel]] {n}"


def stat(n: int) -> str:
    return f"telemetry [[stat]] {n}"


def refusal(text: str) -> str:
    with pytest.raises(LayoutError) as caught:
        parse_layout(text)
    return str(caught.value)


def test_it_reads_the_spec_example_into_the_stored_form():
    assert parse_layout(SPEC_EXAMPLE) == SPEC_PARSED


def test_the_stored_form_survives_a_trip_through_json():
    parsed = parse_layout(SPEC_EXAMPLE)
    assert json.loads(json.dumps(parsed, allow_nan=False)) == parsed


def test_it_refuses_a_misspelt_panel_key_with_the_spec_message():
    text = SPEC_EXAMPLE.replace('scale = "log"', "").replace("min = 0.9", 'scael = "log"')
    assert refusal(text) == (
        'telemetry [[panel]] 2 has "scael", which is not one of '
        "title, x, y, scale, min, max, rule, wide"
    )


# The wording the brief fixes, spelt out rather than rebuilt from the templates,
# so a changed template cannot pass by changing both sides.
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo = 1", 'telemetry has "foo", which is not one of x, panel, stat'),
        (
            '[[stat]]\ny = "a"\nfn = "mean"',
            'telemetry [[stat]] 1 has "fn", which is not one of title, y, reduce',
        ),
        (
            '[[panel]]\ny = "a"\n[[panel]]\ny = "b"\n[[panel]]\ntitle = "c"',
            "telemetry [[panel]] 3 has no y; name the key, or keys, to draw",
        ),
        (
            '[[panel]]\ny = ["a", "b", "c", "d", "e"]',
            "telemetry [[panel]] 1 has 5 keys in y; a panel draws up to 4",
        ),
        (
            '[[panel]]\ny = "a"\nscale = "logarithmic"',
            'telemetry [[panel]] 1 has scale = "logarithmic", which is not one of linear, log',
        ),
        (
            '[[stat]]\ny = "a"\nreduce = "mean"',
            'telemetry [[stat]] 1 has reduce = "mean", which is not one of last, min, max',
        ),
        (
            '[[panel]]\ny = "a"\n[[panel]]\ny = "b"\nwide = "yes"',
            'telemetry [[panel]] 2 has wide = "yes", which is not true or false',
        ),
        (
            '[[panel]]\ny = "a"\nmin = "0.9"',
            'telemetry [[panel]] 1 has min = "0.9", which is not a number',
        ),
        (
            '[[panel]]\ny = "a"\n[[panel]]\ny = "b"\nmin = 1.0\nmax = 0.9',
            "telemetry [[panel]] 2 has min = 1.0 above max = 0.9",
        ),
        (
            '[[panel]]\ny = "train/loss"',
            'telemetry [[panel]] 1 has y = "train/loss", which no point can carry: '
            "use letters, digits, _ and - between dots",
        ),
    ],
)
def test_it_refuses_with_the_wording_the_brief_gives(text, message):
    assert refusal(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '[panel]\ny = "a"', NOT_TABLES.format(table="panel"), id="a single [panel] table"
        ),
        pytest.param("panel = 3", NOT_TABLES.format(table="panel"), id="panel as a number"),
        pytest.param('stat = "a"', NOT_TABLES.format(table="stat"), id="stat as a string"),
        pytest.param("panel = [1, 2]", NOT_TABLES.format(table="panel"), id="panel as numbers"),
        pytest.param(
            'panel = [{ y = "a" }, 2]', NOT_TABLES.format(table="panel"), id="a table then not"
        ),
        pytest.param(
            '[[stat]]\ntitle = "a"', NO_Y.format(where=stat(1), wanted=STAT_WANTS), id="stat no y"
        ),
        pytest.param("[[panel]]\ny = []", EMPTY_Y.format(where=panel(1)), id="empty y"),
        pytest.param(
            "[[panel]]\ny = 3",
            NOT_PANEL_Y.format(where=panel(1), value="3"),
            id="panel y a number",
        ),
        pytest.param(
            '[[panel]]\ny = ["a", 3]',
            NOT_PANEL_Y.format(where=panel(1), value='["a", 3]'),
            id="panel y with a number in it",
        ),
        pytest.param(
            '[[panel]]\ny = ["a", "train/loss"]',
            BAD_KEY_IN_Y.format(where=panel(1), value='"train/loss"'),
            id="panel y list with a bad key",
        ),
        pytest.param(
            '[[stat]]\ny = ["a", "b"]',
            NOT_STAT_Y.format(where=stat(1), value='["a", "b"]'),
            id="stat y a list",
        ),
        pytest.param(
            "[[stat]]\ny = 3", NOT_STAT_Y.format(where=stat(1), value="3"), id="stat y a number"
        ),
        pytest.param(
            '[[stat]]\ny = "a b"',
            BAD_KEY.format(where=stat(1), key="y", value='"a b"'),
            id="stat y a bad key",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\ntitle = 3',
            NOT_STRING.format(where=panel(1), key="title", value="3"),
            id="panel title a number",
        ),
        pytest.param(
            '[[stat]]\ny = "a"\ntitle = true',
            NOT_STRING.format(where=stat(1), key="title", value="true"),
            id="stat title a boolean",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nx = 1',
            NOT_STRING.format(where=panel(1), key="x", value="1"),
            id="panel x a number",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nx = "a..b"',
            BAD_KEY.format(where=panel(1), key="x", value='"a..b"'),
            id="panel x a bad key",
        ),
        pytest.param(
            'x = "epoch/1"',
            BAD_KEY.format(where=TOP, key="x", value='"epoch/1"'),
            id="file x a bad key",
        ),
        pytest.param(
            "x = [1]", NOT_STRING.format(where=TOP, key="x", value="[1]"), id="file x a list"
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nmin = true',
            NOT_NUMBER.format(where=panel(1), key="min", value="true"),
            id="min a boolean",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nrule = [1]',
            NOT_NUMBER.format(where=panel(1), key="rule", value="[1]"),
            id="rule a list",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nmax = 1979-05-27',
            NOT_NUMBER.format(where=panel(1), key="max", value="1979-05-27"),
            id="max a date",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nmax = nan',
            NOT_FINITE.format(where=panel(1), key="max", value="nan"),
            id="max nan",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nmin = -inf',
            NOT_FINITE.format(where=panel(1), key="min", value="-inf"),
            id="min minus infinity",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nwide = 1',
            NOT_BOOL.format(where=panel(1), key="wide", value="1"),
            id="wide a number",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nscale = 2',
            NOT_ONE_OF.format(where=panel(1), key="scale", value="2", allowed="linear, log"),
            id="scale a number",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nscale = "Log"',
            NOT_ONE_OF.format(where=panel(1), key="scale", value='"Log"', allowed="linear, log"),
            id="scale in the wrong case",
        ),
        pytest.param(
            '[[stat]]\ny = "a"\nreduce = false',
            NOT_ONE_OF.format(where=stat(1), key="reduce", value="false", allowed="last, min, max"),
            id="reduce a boolean",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nmin = 1\nmax = 1',
            MIN_IS_MAX.format(where=panel(1), min="1", max="1"),
            id="min equal to max",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nscale = "log"\nmin = 0',
            NOT_ON_LOG.format(where=panel(1), key="min", value="0"),
            id="log scale from 0",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nscale = "log"\nmax = -1.5',
            NOT_ON_LOG.format(where=panel(1), key="max", value="-1.5"),
            id="log scale up to a negative",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nscale = "log"\nrule = 0.0',
            NOT_ON_LOG.format(where=panel(1), key="rule", value="0.0"),
            id="log scale with a rule at 0",
        ),
        pytest.param(
            '"a b" = 1',
            UNKNOWN_KEY.format(where=TOP, key='"a b"', allowed="x, panel, stat"),
            id="a quoted unknown key",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\n[panel.extra]\nb = 1',
            UNKNOWN_KEY.format(where=panel(1), key='"extra"', allowed=", ".join(PANEL_KEYS)),
            id="a subtable in a panel",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nwide = "a\\nb"',
            NOT_BOOL.format(where=panel(1), key="wide", value='"a\\nb"'),
            id="a newline in a value stays escaped",
        ),
        pytest.param("a = " + "[" * 5000 + "]" * 5000, TOO_DEEP, id="nested too deeply"),
        pytest.param("x = " + "1" * 5000, TOO_LONG, id="a number too long"),
    ],
)
def test_it_refuses_what_cannot_be_drawn_saying_which_table_and_key(text, message):
    assert refusal(text) == message


@pytest.mark.parametrize(
    ("text", "line"),
    [("x = \n", 1), ('x = "step"\n[[panel]\ny = "a"\n', 2), ('[[panel]]\ny = "a\n', 2)],
)
def test_it_refuses_text_that_is_not_toml_with_tomllibs_line(text, line):
    with pytest.raises(tomllib.TOMLDecodeError) as toml_error:
        tomllib.loads(text)
    message = refusal(text)
    assert message == NOT_TOML.format(error=toml_error.value)
    assert f"(at line {line}, column " in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '[[panel]]\nscael = "log"',
            UNKNOWN_KEY.format(where=panel(1), key='"scael"', allowed=", ".join(PANEL_KEYS)),
            id="unknown keys before a missing y",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nzz = 1\naa = 2',
            UNKNOWN_KEY.format(where=panel(1), key='"zz"', allowed=", ".join(PANEL_KEYS)),
            id="the first unknown key as written",
        ),
        pytest.param(
            "[[stat]]\ntitle = 3",
            NO_Y.format(where=stat(1), wanted=STAT_WANTS),
            id="a missing y before a bad value",
        ),
        pytest.param(
            '[[panel]]\nwide = "yes"\ny = 3\ntitle = 3',
            NOT_STRING.format(where=panel(1), key="title", value="3"),
            id="values in the order the keys are listed, not written",
        ),
        pytest.param(
            '[[panel]]\ny = "a"\nmin = 2\nmax = 1\nrule = "x"',
            NOT_NUMBER.format(where=panel(1), key="rule", value='"x"'),
            id="every value before min against max",
        ),
        pytest.param(
            'x = "a/b"\n[[panel]]\nfoo = 1',
            BAD_KEY.format(where=TOP, key="x", value='"a/b"'),
            id="the file's x before its panels",
        ),
        pytest.param(
            "[[stat]]\nfn = 1\n[[panel]]\nfoo = 1",
            UNKNOWN_KEY.format(where=panel(1), key='"foo"', allowed=", ".join(PANEL_KEYS)),
            id="panels before stats",
        ),
        pytest.param(
            "foo = 1\n[[panel]]\nbar = 1",
            UNKNOWN_KEY.format(where=TOP, key='"foo"', allowed="x, panel, stat"),
            id="the top's unknown keys before its tables",
        ),
    ],
)
def test_it_reports_the_first_problem_in_a_fixed_order(text, message):
    assert refusal(text) == message


@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n"])
def test_a_file_that_sets_nothing_is_the_same_as_no_file(text):
    assert parse_layout(text) == default_layout()


def test_the_default_layout_is_marked_and_empty():
    assert default_layout() == {"x": None, "panels": [], "stats": [], "default": True}


def test_a_panel_may_name_one_key_as_a_string_or_up_to_four_as_a_list():
    text = '[[panel]]\ny = "a"\n[[panel]]\ny = ["a", "b.c", "d-e", "f_1"]'
    assert [p["y"] for p in parse_layout(text)["panels"]] == [["a"], ["a", "b.c", "d-e", "f_1"]]
    assert MAX_PANEL_KEYS == 4


def test_panels_written_as_an_inline_array_of_tables_are_the_same_panels():
    assert parse_layout('panel = [{ y = "a" }]') == parse_layout('[[panel]]\ny = "a"')


def test_numbers_keep_the_type_they_were_written_with():
    (parsed,) = parse_layout('[[panel]]\ny = "a"\nmin = -1\nmax = 10\nrule = 2.5')["panels"]
    assert (parsed["min"], parsed["max"], parsed["rule"]) == (-1, 10, 2.5)
    assert (type(parsed["min"]), type(parsed["max"])) == (int, int)


def test_a_stat_left_without_reduce_takes_the_last_value():
    assert parse_layout('[[stat]]\ny = "a"')["stats"] == [
        {"title": None, "y": "a", "reduce": "last"}
    ]


def test_a_file_with_only_x_is_a_file_layout_without_panels():
    assert parse_layout('x = "epoch"') == {
        "x": "epoch",
        "default": False,
        "panels": [],
        "stats": [],
    }


@pytest.mark.parametrize("key", ["step", "loss", "eval.loss", "a-b_c.D9", "0", "a.b.c"])
def test_key_pattern_takes_letters_digits_underscores_and_dashes_between_dots(key):
    assert KEY_PATTERN.match(key)


@pytest.mark.parametrize(
    "key", ["", "train/loss", "a..b", ".a", "a.", "a b", "lóss", "loss\n", "a:b"]
)
def test_key_pattern_refuses_a_key_no_point_can_carry(key):
    assert not KEY_PATTERN.match(key)


def test_the_default_layout_draws_one_panel_per_key_in_arrival_order_against_step():
    drawn = panels_for(default_layout(), ["lr", "step", "loss", "eval.loss"])
    assert [(p["title"], p["x"], p["y"]) for p in drawn] == [
        ("lr", "step", ["lr"]),
        ("loss", "step", ["loss"]),
        ("eval.loss", "step", ["eval.loss"]),
    ]


def test_a_default_panel_has_every_field_a_file_panel_has():
    (drawn,) = panels_for(default_layout(), ["loss"])
    assert drawn == {
        "title": "loss",
        "x": None,
        "y": ["loss"],
        "scale": "linear",
        "min": None,
        "max": None,
        "rule": None,
        "wide": False,
    }


def test_without_step_the_default_layout_draws_every_key_against_its_place_in_the_run():
    drawn = panels_for(default_layout(), ["loss", "epoch"])
    assert [(p["title"], p["x"]) for p in drawn] == [("loss", None), ("epoch", None)]


def test_a_run_that_has_written_nothing_gets_no_panels():
    assert panels_for(default_layout(), []) == []


def test_a_file_with_only_x_draws_one_panel_per_key_against_it():
    drawn = panels_for(parse_layout('x = "epoch"'), ["step", "epoch", "loss"])
    assert [(p["title"], p["x"]) for p in drawn] == [("step", "epoch"), ("loss", "epoch")]


def test_a_file_layout_draws_its_own_panels_with_titles_and_x_filled_in():
    drawn = panels_for(parse_layout(SPEC_EXAMPLE), ["step", "loss", "other"])
    assert [(p["title"], p["x"], p["y"]) for p in drawn] == [
        ("Loss", "step", ["loss", "eval_loss"]),
        ("F1", "step", ["eval_strict_f1", "eval_typed_f1"]),
        ("eval_leak_recall", "step", ["eval_leak_recall"]),
    ]


def test_a_panel_without_a_title_is_called_its_keys_joined_by_commas():
    (drawn,) = panels_for(parse_layout('[[panel]]\ny = ["a", "b", "c"]'), [])
    assert drawn["title"] == "a, b, c"


def test_panels_for_leaves_the_stored_layout_as_it_was():
    layout = parse_layout(SPEC_EXAMPLE)
    for drawn in panels_for(layout, ["step"]):
        drawn["y"].append("changed")
    assert layout == SPEC_PARSED


@pytest.mark.parametrize(
    ("file_x", "own_x", "keys", "expected"),
    [
        pytest.param("epoch", "tokens", ["step"], "tokens", id="the panel's x first"),
        pytest.param("epoch", None, ["step"], "epoch", id="then the file's x"),
        pytest.param(None, None, ["loss", "step"], "step", id="then step when written"),
        pytest.param(None, None, ["loss"], None, id="else the point's place in the run"),
    ],
)
def test_a_panel_is_drawn_against_its_own_x_then_the_files_then_step(file_x, own_x, keys, expected):
    layout = {"x": file_x, "default": False, "panels": [], "stats": []}
    assert panel_x(layout, {"x": own_x}, keys) == expected


def test_a_stat_without_a_title_is_called_its_key():
    layout = parse_layout(SPEC_EXAMPLE + '\n[[stat]]\ny = "loss"\nreduce = "min"\n')
    assert stats_for(layout) == [
        {"title": "Samples/s", "y": "eval_samples_per_second", "reduce": "last"},
        {"title": "loss", "y": "loss", "reduce": "min"},
    ]


def assert_refused_or_read(text: str) -> dict | None:
    try:
        parsed = parse_layout(text)
    except LayoutError as err:
        assert "\n" not in str(err)
        assert str(err).startswith("telemetry ")
        return None
    assert json.loads(json.dumps(parsed, allow_nan=False)) == parsed
    return parsed


@given(st.text())
def test_any_text_is_either_read_or_refused_with_a_layout_error(text):
    assert_refused_or_read(text)


# A small TOML writer, since the standard library only reads it.
def toml(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml(k)} = {toml(v)}" for k, v in value.items()) + "}"
    return value.isoformat()


def toml_tables(name: str, tables: list[dict]) -> str:
    return "".join(
        f"[[{name}]]\n" + "".join(f"{toml(k)} = {toml(v)}\n" for k, v in table.items())
        for table in tables
    )


# TOML cannot hold lone surrogates, and wants DEL escaped, which json.dumps does not do.
texts = st.text(characters(exclude="\x7f"), max_size=12)
keys = st.lists(st.text("ab_-9", min_size=1, max_size=3), min_size=1, max_size=3).map(".".join)
sane_numbers = st.integers(-3, 3) | st.floats(-1e3, 1e3)
toml_values = st.recursive(
    texts | st.booleans() | st.floats() | st.integers() | st.dates() | st.datetimes(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """good nine times in ten: fuzzing only gets past the first check if most values pass."""
    # 5, not 0: Hypothesis leans towards 0, which would make bad the usual case.
    return st.integers(0, 9).flatmap(lambda n: bad if n == 5 else good)


panel_values = {
    "title": texts,
    "x": mostly(keys, texts),
    "y": mostly(
        keys | st.lists(keys, min_size=1, max_size=MAX_PANEL_KEYS),
        texts | st.lists(keys | texts, max_size=MAX_PANEL_KEYS + 1),
    ),
    "scale": mostly(st.sampled_from(SCALES), texts),
    "min": mostly(sane_numbers, st.floats()),
    "max": mostly(sane_numbers, st.floats()),
    "rule": mostly(sane_numbers, st.floats()),
    "wide": st.booleans(),
}
stat_values = {
    "title": texts,
    "y": mostly(keys, texts),
    "reduce": mostly(st.sampled_from(REDUCES), texts),
}


def tables(values: dict) -> st.SearchStrategy[dict]:
    y = mostly(st.fixed_dictionaries({"y": mostly(values["y"], toml_values)}), st.just({}))
    rest = st.fixed_dictionaries(
        {}, optional={k: mostly(v, toml_values) for k, v in values.items() if k != "y"}
    )
    extra = mostly(st.just({}), st.dictionaries(texts, toml_values, min_size=1, max_size=1))
    return st.tuples(y, rest, extra).map(lambda parts: {**parts[0], **parts[1], **parts[2]})


@given(
    mostly(st.none() | keys, toml_values),
    st.lists(tables(panel_values), max_size=3),
    st.lists(tables(stat_values), max_size=2),
)
def test_any_panels_and_stats_are_either_read_as_written_or_refused(file_x, panels, stats):
    text = (
        ("" if file_x is None else f"x = {toml(file_x)}\n")
        + toml_tables("panel", panels)
        + toml_tables("stat", stats)
    )
    parsed = assert_refused_or_read(text)
    if parsed is None or parsed["default"]:
        return
    assert parsed["x"] == file_x
    for written, read in zip(panels, parsed["panels"], strict=True):
        y = written["y"]
        assert read == {
            "title": written.get("title"),
            "x": written.get("x"),
            "y": [y] if isinstance(y, str) else y,
            "scale": written.get("scale", "linear"),
            "min": written.get("min"),
            "max": written.get("max"),
            "rule": written.get("rule"),
            "wide": written.get("wide", False),
        }
        assert 1 <= len(read["y"]) <= MAX_PANEL_KEYS
        assert all(KEY_PATTERN.match(key) for key in read["y"])
        if read["min"] is not None and read["max"] is not None:
            assert read["min"] < read["max"]
    for written, read in zip(stats, parsed["stats"], strict=True):
        assert read == {
            "title": written.get("title"),
            "y": written["y"],
            "reduce": written.get("reduce", "last"),
        }
