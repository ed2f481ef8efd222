"""A comparison of runs (/compare/?runs=run-3,run-7): which runs an address names, what each
run's traces are drawn at, and which keys every panel may be aligned on. Pure: no Django, no
I/O; the page, its API and its websocket call it.

>>> run_numbers("run-3,7,run-3")
[3, 7]
>>> listed(["run-3", "run-7"])
'run-3,run-7'
>>> trace_buckets(10)
200
"""

from __future__ import annotations

from collections.abc import Sequence

from telemetry.downsample import BUCKETS
from telemetry.errors import Refused
from telemetry.names import run_number, shown

# The most runs one comparison holds: each keeps a colour of its own (rules.js, RUN_COLORS),
# and at 20 a panel already draws as many points as a run's tab draws at its 2,000 buckets.
MOST_RUNS = 20
# A trace of a comparison is drawn at BUCKETS / runs min/max buckets, so that a panel draws
# about as many points as one run's panel, and never at fewer than this.
FEWEST_BUCKETS = 200

NO_RUNS = "name the runs to compare, like ?runs=run-3,run-7"
TOO_MANY = "a comparison holds up to {most} runs"
NOT_A_RUN = "{name} is not a run's name, like run-7"
NOT_COMPARED = "{name} is not one of the runs compared"


class NotAComparison(Refused):
    """An address that names no comparison: its list of runs cannot be read, or names too many.
    The page, the API and the websocket answer it as they answer a run that does not exist."""


def listed(values: Sequence[str]) -> str | None:
    """The list of an address whose `runs=` is given several times: one list, each value's
    names in turn, so a run of another org in any of them is the 404 too, never left out for
    the last value alone (as a query string's last value would be read)."""
    return ",".join(values) if values else None


def run_numbers(text: str | None) -> list[int]:
    """The runs a comparison's list names (`run-3,run-7`, or `3,7`), in the order given, each
    once: a run named twice is compared once.

    More than MOST_RUNS names (a name given twice counts twice) is refused before any is read,
    so a list of 10,000 costs nothing; so is a list with a name that is not run-N or N, or an
    empty one (`run-3,,run-7`, `run-3,`).
    """
    if not text:
        raise NotAComparison(NO_RUNS)
    if text.count(",") >= MOST_RUNS:
        raise NotAComparison(TOO_MANY.format(most=MOST_RUNS))
    numbers: list[int] = []
    for name in text.split(","):
        number = run_number(name)
        if number is None:
            raise NotAComparison(NOT_A_RUN.format(name=shown(name)))
        if number not in numbers:
            numbers.append(number)
    return numbers


def shown_layout(name: str | None, numbers: Sequence[int]) -> int:
    """The run whose stored layout the comparison's panels come from: the one named (one of the
    runs compared), else the first."""
    if not name:
        return numbers[0]
    number = run_number(name)
    if number is None or number not in numbers:
        raise NotAComparison(NOT_COMPARED.format(name=shown(name)))
    return number


def trace_buckets(runs: int) -> int:
    """The min/max buckets each run's trace of a panel is drawn at: a panel of n runs draws
    about what one run's panel does, at least FEWEST_BUCKETS a trace, so spikes stay."""
    return max(FEWEST_BUCKETS, BUCKETS // max(1, runs))


def common_keys(keys: Sequence[Sequence[str]]) -> list[str]:
    """The keys every run wrote, in the order the first run first wrote them: what the panels
    can be aligned on (step, epoch, tokens seen...)."""
    if not keys:
        return []
    rest = [set(names) for names in keys[1:]]
    return [name for name in keys[0] if all(name in other for other in rest)]
