"""Following something until it ends: `div log -f` and `div telemetry -f`, of one run or of
several, on this machine or over the API. Written once, here; pure: each caller's look does
the reading and the printing.

>>> looks, waits = iter([Look.GOING, Look.MORE, Look.GOING, Look.ENDED]), []
>>> follow(lambda: next(looks), follow=True, pause=0.2, wait=waits.append)
>>> waits
[0.2, 0.2]
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable


class Look(enum.Enum):
    """What one look found."""

    GOING = "going"  # not ended yet: look again after a pause
    MORE = "more"  # more to read at once (a page was full): look again without a pause
    ENDED = "ended"  # ended, and this look read the last of it


def follow(
    look: Callable[[], Look],
    *,
    follow: bool,
    pause: float,
    wait: Callable[[float], object] = time.sleep,
) -> None:
    """Look; with follow, look again until a look finds the end, pausing between looks.

    One pause a round, however many runs one look reads. Without follow, one look (and the
    looks a full page asks for at once). `wait` is how the time passes: one that returns when
    a run ends saves the rest of its pause.
    """
    while True:
        found = look()
        if found is Look.MORE:
            continue
        if found is Look.ENDED or not follow:
            return
        wait(pause)
