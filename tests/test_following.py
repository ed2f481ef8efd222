"""Following until the end, written once (pure, in telemetry/following.py): div log -f and
div telemetry -f, of one run or several, locally or over the API."""

from __future__ import annotations

import doctest

import pytest

from telemetry import following
from telemetry.following import Look


def test_the_example_in_the_module_holds():
    assert doctest.testmod(following).failed == 0


@pytest.mark.parametrize(
    "looks, follow, waits",
    [
        ([Look.GOING, Look.GOING, Look.ENDED], True, 2),  # a pause between looks
        ([Look.MORE, Look.MORE, Look.ENDED], True, 0),  # more at once: no pause
        ([Look.GOING], False, 0),  # one look without -f
        ([Look.MORE, Look.GOING], False, 0),  # ...and the pages a full one asks for
        ([Look.ENDED], True, 0),
    ],
)
def test_following_looks_until_the_end_with_one_pause_a_round(looks, follow, waits):
    said = iter(looks)
    paused: list[float] = []

    following.follow(lambda: next(said), follow=follow, pause=0.2, wait=paused.append)

    assert paused == [0.2] * waits
    assert next(said, None) is None  # every look was made, and no more
