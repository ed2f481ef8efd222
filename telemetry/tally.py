"""A run's running account: its keys and their stats, its points and its drops.

Pure: no Django, no I/O. The ingester loads a Tally from the database, feeds it lines in the
order they were written, and stores what changed in the same transaction as the points, so the
run's limits (256 keys, 200,000 points) and key stats are decided in one place. It carries the
run's Sealing too: what is held between batches to store the points by key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from telemetry.lines import MAX_KEYS, MAX_POINTS, Line, Number, Reason
from telemetry.sealing import Sealing


@dataclass
class KeyStats:
    name: str
    order: int  # 1 for the first key the run wrote
    count: int = 0
    last: Number | None = None
    min: Number | None = None
    max: Number | None = None
    passed_over: int = 0  # values that were NaN or Infinity
    first_passed_seq: int | None = None  # where the run first wrote one: where it diverged

    def take(self, value: Number) -> None:
        """What a stat card reduces: the last value, the lowest and the highest."""
        self.count += 1
        self.last = value
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value


@dataclass
class Tally:
    keys: dict[str, KeyStats] = field(default_factory=dict)
    points: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    # What this batch changed, for the writer: new points and keys, and reasons seen first now.
    new_points: list[tuple[int, dict[str, Number]]] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)
    first_drops: list[str] = field(default_factory=list)
    sealing: Sealing | None = None

    def add(self, line: Line | Reason) -> None:
        if isinstance(line, Reason):
            self.drop(line)
            return
        for _ in line.bad_keys:
            self.drop(Reason.BAD_KEY)
        for _ in line.secret_keys:
            self.drop(Reason.SECRET_KEY)
        if line.numbers and self.points >= MAX_POINTS:
            self.drop(Reason.TOO_MANY_POINTS)
            return

        numbers = line.numbers
        keys, changed = self.keys, self.changed
        left_out = False
        for name, value in numbers.items():
            stats = keys.get(name)
            if stats is None:
                stats = self.key(name)
                if stats is None:
                    left_out = True
                    continue
            stats.take(value)
        if left_out:
            numbers = {name: value for name, value in numbers.items() if name in keys}
        changed.update(numbers)
        if numbers:
            self.points += 1
            self.new_points.append((self.points, numbers))
        for name in line.passed_over:
            stats = self.key(name)
            if stats is not None:
                stats.passed_over += 1
                if stats.first_passed_seq is None:
                    # The point the line became, or the last one before it.
                    stats.first_passed_seq = self.points or None

    def key(self, name: str) -> KeyStats | None:
        stats = self.keys.get(name)
        if stats is None:
            if len(self.keys) >= MAX_KEYS:
                self.drop(Reason.TOO_MANY_KEYS)
                return None
            stats = self.keys[name] = KeyStats(name, order=len(self.keys) + 1)
        self.changed.add(name)
        return stats

    def drop(self, reason: Reason, *, mention: bool = True) -> None:
        """Count a reason; the log mentions it the first time, unless the caller says more."""
        if mention and not self.drops.get(reason):
            self.first_drops.append(reason)
        self.drops[reason] = self.drops.get(reason, 0) + 1

    def settle(self) -> None:
        """Forget what the last batch changed, once it is stored."""
        self.new_points = []
        self.changed = set()
        self.first_drops = []
