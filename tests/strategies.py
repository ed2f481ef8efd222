"""Hypothesis strategies several test modules share."""

from __future__ import annotations

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

SURROGATES = range(0xD800, 0xE000)  # no character: UTF-8 cannot encode them


def characters(exclude: str = "") -> st.SearchStrategy[str]:
    """Any character UTF-8 encodes (every code point but the surrogates), ASCII as often as the
    rest, but the ones in `exclude`.

    Drawn from the code points themselves: st.text()'s own default, like
    st.characters(codec="utf-8"), builds that set from Unicode's tables the first time it is
    drawn, and a cold example database (a clean clone, CI) has not cached them. Inside a
    strategy drawn lazily (st.recursive, a flatmap, st.data) that second or two is counted
    against the test's first inputs, and fails Hypothesis's too_slow health check.
    """
    others = st.integers(0x80, 0x10FFFF - len(SURROGATES)).map(
        lambda n: n + len(SURROGATES) if n >= SURROGATES.start else n
    )
    drawn = (st.integers(0, 0x7F) | others).map(chr)
    return drawn.filter(lambda c: c not in exclude) if exclude else drawn


def examples(strategy: st.SearchStrategy, count: int = 200) -> list:
    """What a test of `strategy` is given, `count` times, the same each run: to check that a
    cheap strategy still draws what its property is about (hypothesis.find would report a
    large example as a failure, repr and all)."""
    drawn = []

    @settings(max_examples=count, phases=[Phase.generate], database=None, derandomize=True)
    @given(strategy)
    def draw(value):
        drawn.append(value)

    draw()
    return drawn
