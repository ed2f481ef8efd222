"""Reading telemetry.toml, the file that lays out a run's Telemetry tab.

parse_layout() turns the file into a plain dict, stored with the run as JSON
so the run keeps showing what it was launched with. panels_for() and
stats_for() fill in what the file left out, once the run's keys are known.

A file that cannot be read refuses the run: LayoutError's message is shown to
whoever launched it, so it names the table, its number and the key, and says
what to change.
"""

from __future__ import annotations

import json
import math
import re
import tomllib

# Defined here, not in lines.py: lines.py is expected to import it from here,
# so the keys a point keeps and the keys a layout may name cannot drift apart.
# \Z, not $: $ also matches before a trailing newline, and a JSON key can end
# in one.
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
MAX_PANEL_KEYS = 4
# What one tab can show, and a bound on what a run stores and every page sends.
MAX_PANELS = 64
MAX_STATS = 64
MAX_TITLE = 200  # characters
# Past the table limits, so that a file breaking one hears which; this bounds the rest (comments,
# keys), and keeps reading the largest file to about a second.
MAX_FILE_BYTES = 4 * 1024 * 1024

TOP_KEYS = ("x", "panel", "stat")
PANEL_KEYS = ("title", "x", "y", "scale", "min", "max", "rule", "wide")
STAT_KEYS = ("title", "y", "reduce")
SCALES = ("linear", "log")
REDUCES = ("last", "min", "max")

# Every message a LayoutError can carry. {where} is "telemetry" or, say,
# "telemetry [[panel]] 2"; {value}, {min} and {max} are shown as TOML writes
# them (see _show), so the user can find them in their file.
NOT_TOML = "telemetry is not valid TOML: {error}"
TOO_DEEP = "telemetry nests arrays or tables too deeply to read"
TOO_LONG = "telemetry has a number too long to read"
UNKNOWN_KEY = "{where} has {key}, which is not one of {allowed}"
TOO_BIG = "telemetry is {size:,} bytes; a layout file is at most {most} MiB"
TOO_MANY_TABLES = "telemetry has {count:,} [[{table}]] tables; a tab shows up to {most}"
TITLE_TOO_LONG = "{where} has a title of {length:,} characters; keep it to {most}"
TITLE_CONTROL = "{where} has a title with {char} in it; a title is one line of text"
NOT_TABLES = (
    "telemetry has a {table} that is not a [[{table}]] table; write each {table} as [[{table}]]"
)
NO_Y = "{where} has no y; name the {wanted} to draw"
NOT_PANEL_Y = "{where} has y = {value}, which is not a key or a list of keys"
NOT_STAT_Y = "{where} has y = {value}, which is not one key; a stat shows one key"
EMPTY_Y = "{where} has y = [], which names no key; name the key, or keys, to draw"
TOO_MANY_KEYS = "{where} has {count} keys in y; a panel draws up to {most}"
CARRYABLE = "use letters, digits, _ and - between dots"
BAD_KEY = "{where} has {key} = {value}, which no point can carry: " + CARRYABLE
BAD_KEY_IN_Y = "{where} has {value} in y, which no point can carry: " + CARRYABLE
NOT_STRING = "{where} has {key} = {value}, which is not a string"
NOT_ONE_OF = "{where} has {key} = {value}, which is not one of {allowed}"
NOT_NUMBER = "{where} has {key} = {value}, which is not a number"
NOT_FINITE = "{where} has {key} = {value}, which is not a finite number"
NOT_BOOL = "{where} has {key} = {value}, which is not true or false"
MIN_ABOVE_MAX = "{where} has min = {min} above max = {max}"
MIN_IS_MAX = "{where} has min = {min} equal to max = {max}; an axis needs room between them"
NOT_ON_LOG = (
    '{where} has {key} = {value} with scale = "log", which cannot show 0 or below; '
    'make {key} above 0 or the scale "linear"'
)

PANEL_WANTS = "key, or keys,"
STAT_WANTS = "key"


class LayoutError(ValueError):
    """A telemetry.toml that cannot be read; str() is the one-line reason."""


def parse_layout(text: str) -> dict:
    """telemetry.toml text -> the parsed layout, a JSON-serialisable dict.

    A file that sets nothing (empty, or only comments) is the same as no
    file: it gets default_layout(). Raises LayoutError otherwise when the
    file cannot be read.
    """
    size = len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > MAX_FILE_BYTES else 0
    if size > MAX_FILE_BYTES:
        raise LayoutError(TOO_BIG.format(size=size, most=MAX_FILE_BYTES // 2**20))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise LayoutError(NOT_TOML.format(error=err)) from None
    # tomllib lets these escape: a hostile file must refuse the run, not
    # crash whatever reads it.
    except RecursionError:
        raise LayoutError(TOO_DEEP) from None
    except ValueError:
        raise LayoutError(TOO_LONG) from None
    if not data:
        return default_layout()
    _check_known("telemetry", data, TOP_KEYS)
    return {
        "x": _key("telemetry", data, "x"),
        "default": False,
        "panels": [
            _panel(f"telemetry [[panel]] {n}", table)
            for n, table in enumerate(_tables(data, "panel"), 1)
        ],
        "stats": [
            _stat(f"telemetry [[stat]] {n}", table)
            for n, table in enumerate(_tables(data, "stat"), 1)
        ],
    }


def default_layout() -> dict:
    """The layout of a run without a telemetry.toml."""
    return {"x": None, "panels": [], "stats": [], "default": True}


def panels_for(layout: dict, keys: list[str]) -> list[dict]:
    """The panels to draw, given the keys the run has written in order of first arrival.

    A layout with panels gets copies of them with title and x filled in. One
    without (the default, or a file that sets only x or stats) gets one panel
    per key in the order the keys first arrived, leaving out the key they are
    drawn against.
    """
    panels = layout["panels"]
    if not panels:
        x = panel_x(layout, {}, keys)
        panels = [_default_panel(key) for key in keys if key != x]
    return [
        {
            **panel,
            "title": ", ".join(panel["y"]) if panel["title"] is None else panel["title"],
            "x": panel_x(layout, panel, keys),
            "y": list(panel["y"]),
        }
        for panel in panels
    ]


def panel_x(layout: dict, panel: dict, keys: list[str]) -> str | None:
    """The key a panel is drawn against.

    The panel's x, else the file's x, else step when the run writes one, else
    None: the point's place in the run (its seq).
    """
    if panel.get("x") is not None:
        return panel["x"]
    if layout.get("x") is not None:
        return layout["x"]
    return "step" if "step" in keys else None


def point_x(x: str | None, seq: int, data: dict) -> int | float | None:
    """Where a point goes on a panel drawn against x: its x value, or its seq when x is None
    (the point's place in the run); None when it has no such key, so it is left off.

    >>> point_x("step", 3, {"step": 300, "loss": 0.5}), point_x(None, 3, {"loss": 0.5})
    (300, 3)
    """
    return seq if x is None else data.get(x)


def stats_for(layout: dict) -> list[dict]:
    """Copies of the layout's stats with title filled in: a stat is called its key."""
    return [
        {**stat, "title": stat["y"] if stat["title"] is None else stat["title"]}
        for stat in layout["stats"]
    ]


def _default_panel(key: str) -> dict:
    return {
        "title": None,
        "x": None,
        "y": [key],
        "scale": "linear",
        "min": None,
        "max": None,
        "rule": None,
        "wide": False,
    }


def _panel(where: str, table: dict) -> dict:
    _check_known(where, table, PANEL_KEYS)
    if "y" not in table:
        raise LayoutError(NO_Y.format(where=where, wanted=PANEL_WANTS))
    # A dict display is evaluated in order, so values are checked in the
    # order PANEL_KEYS lists them.
    panel = {
        "title": _title(where, table),
        "x": _key(where, table, "x"),
        "y": _panel_y(where, table["y"]),
        "scale": _choice(where, table, "scale", SCALES),
        "min": _number(where, table, "min"),
        "max": _number(where, table, "max"),
        "rule": _number(where, table, "rule"),
        "wide": _flag(where, table, "wide"),
    }
    low, high = panel["min"], panel["max"]
    if low is not None and high is not None and low >= high:
        template = MIN_ABOVE_MAX if low > high else MIN_IS_MAX
        raise LayoutError(template.format(where=where, min=_show(low), max=_show(high)))
    if panel["scale"] == "log":
        for key in ("min", "max", "rule"):
            if panel[key] is not None and panel[key] <= 0:
                raise LayoutError(NOT_ON_LOG.format(where=where, key=key, value=_show(panel[key])))
    return panel


def _stat(where: str, table: dict) -> dict:
    _check_known(where, table, STAT_KEYS)
    if "y" not in table:
        raise LayoutError(NO_Y.format(where=where, wanted=STAT_WANTS))
    title = _title(where, table)
    y = table["y"]
    if not isinstance(y, str):
        raise LayoutError(NOT_STAT_Y.format(where=where, value=_show(y)))
    return {
        "title": title,
        "y": _key(where, table, "y"),
        "reduce": _choice(where, table, "reduce", REDUCES),
    }


def _tables(data: dict, name: str) -> list[dict]:
    # panel = [{...}] is the same TOML as [[panel]], so only the shape matters.
    tables = data.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise LayoutError(NOT_TABLES.format(table=name))
    most = MAX_PANELS if name == "panel" else MAX_STATS
    if len(tables) > most:
        raise LayoutError(TOO_MANY_TABLES.format(count=len(tables), table=name, most=most))
    return tables


def _title(where: str, table: dict) -> str | None:
    title = _string(where, table, "title")
    if title is None:
        return None
    if len(title) > MAX_TITLE:
        raise LayoutError(TITLE_TOO_LONG.format(where=where, length=len(title), most=MAX_TITLE))
    # A basic string's escapes can write any character: a NUL no PostgreSQL text can hold,
    # a newline or an escape sequence that would break a panel's heading or a table's row.
    control = _CONTROL.search(title)
    if control:
        raise LayoutError(TITLE_CONTROL.format(where=where, char=_show(control[0])))
    return title


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _check_known(where: str, table: dict, allowed: tuple[str, ...]) -> None:
    for key in table:
        if key not in allowed:
            raise LayoutError(
                UNKNOWN_KEY.format(where=where, key=_show(key), allowed=", ".join(allowed))
            )


def _string(where: str, table: dict, key: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise LayoutError(NOT_STRING.format(where=where, key=key, value=_show(value)))
    return value


def _key(where: str, table: dict, key: str) -> str | None:
    value = _string(where, table, key)
    if value is not None and not KEY_PATTERN.match(value):
        raise LayoutError(BAD_KEY.format(where=where, key=key, value=_show(value)))
    return value


def _panel_y(where: str, value: object) -> list[str]:
    if isinstance(value, str):
        return [_key(where, {"y": value}, "y")]
    if not isinstance(value, list) or not all(isinstance(key, str) for key in value):
        raise LayoutError(NOT_PANEL_Y.format(where=where, value=_show(value)))
    if not value:
        raise LayoutError(EMPTY_Y.format(where=where))
    if len(value) > MAX_PANEL_KEYS:
        raise LayoutError(TOO_MANY_KEYS.format(where=where, count=len(value), most=MAX_PANEL_KEYS))
    for key in value:
        if not KEY_PATTERN.match(key):
            raise LayoutError(BAD_KEY_IN_Y.format(where=where, value=_show(key)))
    return list(value)


def _choice(where: str, table: dict, key: str, allowed: tuple[str, ...]) -> str:
    value = table.get(key, allowed[0])
    if not isinstance(value, str) or value not in allowed:
        raise LayoutError(
            NOT_ONE_OF.format(where=where, key=key, value=_show(value), allowed=", ".join(allowed))
        )
    return value


def _number(where: str, table: dict, key: str) -> int | float | None:
    value = table.get(key)
    if value is None:
        return None
    # bool is an int to Python, but true is not a number to whoever wrote it.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LayoutError(NOT_NUMBER.format(where=where, key=key, value=_show(value)))
    if not math.isfinite(value):
        raise LayoutError(NOT_FINITE.format(where=where, key=key, value=_show(value)))
    return value


def _flag(where: str, table: dict, key: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise LayoutError(NOT_BOOL.format(where=where, key=key, value=_show(value)))
    return value


def _show(value: object) -> str:
    """A value as TOML writes it, on one line, so the user can find it in their file."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        pairs = ", ".join(f"{_show_key(key)} = {_show(item)}" for key, item in value.items())
        return "{ " + pairs + " }"
    return value.isoformat()  # tomllib's dates, times and datetimes


def _show_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _show(key)
