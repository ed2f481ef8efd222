"""The examples in the modules' docstrings hold: each module whose docstrings show one is run
through doctest, so an example that no longer says what the code does fails here."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.conftest import ROOT

WITH_EXAMPLES = sorted(
    f"{path.parent.name}.{path.stem}"
    for folder in ("telemetry", "divergent")
    for path in (ROOT / folder).glob("*.py")
    if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_modules_with_examples_are_found():
    assert {"telemetry.tables", "telemetry.lines", "telemetry.joins"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_examples_of_a_module_hold(name):
    module = importlib.import_module(name)
    found = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert (found.failed, found.attempted > 0) == (0, True)
