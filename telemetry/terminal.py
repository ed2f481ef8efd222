"""A log as a terminal draws it, for the Log tab. Pure: no Django, no I/O.

A carriage return rewrites its line, so only the last state of a progress bar shows, in the
colours set before it (what was written over is gone, the colours it set are still on); ANSI
colours and bold become styles (read by rich's ANSI decoder, not a parser of our own); other
escape sequences, whole or cut short, and control characters are dropped, as a terminal reads
them without drawing anything. The page gets styled spans, never markup or escapes to interpret.

>>> line_state("Epoch 0:  35%|###  | 35/100\\rEpoch 0: 100%|#####| 100/100")
'Epoch 0: 100%|#####| 100/100'
>>> spans("\\x1b[32mINFO\\x1b[0m started")
[['INFO', {'fg': 2}], [' started', None]]
"""

from __future__ import annotations

import io
import re

from rich.ansi import AnsiDecoder
from rich.color import Color, ColorType
from rich.console import Console
from rich.style import Style

# C0 controls but tab and escape (the decoder reads escapes), and DEL: a terminal draws none.
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]")
# The escape sequences of ECMA-48, as a terminal reads them. Only SGR (colours, bold) is handed
# to rich's decoder; the rest draw nothing, and rich would show some as text: a control string
# (DCS, SOS, OSC, PM, APC: ESC P, X, ], ^, _) with its body, to its ST or BEL; a CSI; any other
# escape (ESC 7, ESC ( B, ESC # 8). Each may be cut short, by the end of what has been written
# so far or by the next escape, and what it had read is dropped all the same.
ESCAPE = re.compile(
    r"\x1b[PX\]^_][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
)
# Select Graphic Rendition, the one CSI a line's look depends on: parameters, then m. One with
# a private marker (ESC [ > 4 ; 1 m, xterm's modifyOtherKeys) is not one.
SGR = re.compile(r"\x1b\[[0-9:;]*m")
Span = list  # [text, style or None]; style: {"fg", "bg", "b", "d", "i", "u"}


def line_state(line: str) -> str:
    """What a line shows once its carriage returns are done: the last text written after
    one. A return at the very end (a bar that redraws itself before, not after) leaves the
    state written before it, as a terminal does until the next redraw."""
    if "\r" not in line:
        return line
    for state in reversed(line.split("\r")):
        if state:
            return state
    return ""


def last_state_start(text: str | bytes) -> int:
    """Where, in text without a newline, the last state begins: everything before it has been
    written over and need never be sent. Bytes work too: a carriage return is one byte."""
    cr = b"\r" if isinstance(text, bytes) else "\r"
    end = len(text.rstrip(cr))
    return text.rfind(cr, 0, end) + 1


class Screen:
    """Lines into styled spans; a colour left on carries over to the next line, as on a
    terminal."""

    def __init__(self) -> None:
        self.decoder = AnsiDecoder()

    def spans(self, line: str) -> list[Span]:
        start = last_state_start(line)
        # What the carriage returns wrote over is not shown, but the colours it set are on.
        carried = "".join(SGR.findall(_drawn(line[:start])))
        text = self.decoder.decode_line(CONTROLS.sub("", carried + _drawn(line_state(line))))
        out: list[Span] = []
        for part in text.render(_CONSOLE):
            if part.text:
                out.append([part.text, _style(part.style)])
        return out


def spans(line: str) -> list[Span]:
    """One line's styled spans, on a screen of its own."""
    return Screen().spans(line)


def _drawn(text: str) -> str:
    """The text with its escape sequences dropped, but SGR."""
    return ESCAPE.sub(lambda m: m.group() if SGR.fullmatch(m.group()) else "", text)


# Only asked to resolve styles: it never prints.
_CONSOLE = Console(file=io.StringIO(), color_system=None, width=10_000)


def _style(style: Style | None) -> dict | None:
    if not style:
        return None
    shown: dict = {}
    if style.color is not None and not style.color.is_default:
        shown["fg"] = _color(style.color)
    if style.bgcolor is not None and not style.bgcolor.is_default:
        shown["bg"] = _color(style.bgcolor)
    for flag, key in (("bold", "b"), ("dim", "d"), ("italic", "i"), ("underline", "u")):
        if getattr(style, flag):
            shown[key] = 1
    return shown or None


def _color(color: Color) -> int | str:
    """0 to 15, the terminal's own palette (the page's CSS names them), or #rrggbb."""
    if color.type in (ColorType.STANDARD, ColorType.EIGHT_BIT) and color.number < 16:
        return color.number
    return color.get_truecolor().hex
