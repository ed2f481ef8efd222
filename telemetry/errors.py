"""The one kind of error a user is meant to read. Pure: no Django, no I/O."""

from __future__ import annotations


class Refused(Exception):
    """A request turned down for what it asks, not for a fault: str() is the one line that
    says what to change. `div` prints it after "div: " and exits 1."""


class RunNotFound(Refused, LookupError):
    """No run by that name, or none the asker may see."""
