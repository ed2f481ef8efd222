"""What `div run` ships of a directory: the rules, given a listing of it. Pure: no Django, no I/O.

services.py walks the directory (asking `Rules.descends` before entering a folder), hands the
listing to `Rules.plan`, and copies what the plan says. So the rules are written once:

- DIVERGENT_HOME (and its runs/ folder) is left out when it lies inside the directory: the
  default `div run .` from a checkout would otherwise copy the runs into a run.
- What `.divignore` names is left out (gitignore syntax, read from the directory's top).
- Files, folders and links are shipped; FIFOs, sockets and devices are skipped with a note.
- Links are never followed. A link into the directory stays a link into the copy (an absolute
  one is made relative, so it never points back at the original); a link out of the directory
  is kept pointing at the same place (made absolute), and its files are not copied or counted.
- The files' total size is capped (DIVERGENT_SHIP_LIMIT, 100 MB by default): over it the run
  is refused with one line naming the largest files.

>>> rules = Rules(root="/p", divignore="*.ckpt\\n", left_out=["var"], limit=10)
>>> plan = rules.plan([Entry("var", "dir"), Entry("a.ckpt", "file", 99), Entry("t.py", "file", 9)])
>>> [f.path for f in plan.files], plan.notes
(['t.py'], ['ship: left out var/, which is DIVERGENT_HOME: runs are never shipped'])
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import pathspec

DIVIGNORE = ".divignore"
DEFAULT_LIMIT = "100MB"
LARGEST_NAMED = 3  # files a refusal names
NOTES_SHOWN = 10  # skipped entries noted one by one; past this, one line counts the rest

FILE, DIR, LINK, FIFO, SOCKET, DEVICE = "file", "dir", "link", "fifo", "socket", "device"
SPECIAL = {FIFO: "a FIFO", SOCKET: "a socket", DEVICE: "a device"}

UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*", re.IGNORECASE)
NO_LIMIT = ("off", "none")

BAD_LIMIT = (
    "DIVERGENT_SHIP_LIMIT is {value}, which is not a size; "
    "write it like 100MB, 2GiB or 5000000 (bytes), or off"
)
OVER_LIMIT = (
    "cannot ship {directory}: its files come to {total}, over the {limit} limit; "
    "the largest are {largest}; name what the run does not need in .divignore, "
    "or raise DIVERGENT_SHIP_LIMIT"
)
LEFT_OUT_HOME = "ship: left out {path}/, which is DIVERGENT_HOME: runs are never shipped"
SKIPPED = "ship: skipped {path}, {kind}: only files, folders and links are shipped"
SKIPPED_MORE = "ship: skipped {n} more FIFOs, sockets or devices"
LINK_OUT = (
    "ship: kept {path} as a link to {target}, outside the directory: "
    "what it points at is not copied"
)


class ShipError(ValueError):
    """A directory that cannot be shipped; the message is the one line to show."""


@dataclass(frozen=True)
class Entry:
    """One thing in the directory, as the walker found it (links not followed)."""

    path: str  # relative to the directory, parts joined with /
    kind: str  # file, dir, link, fifo, socket or device
    size: int = 0  # a file's bytes
    target: str = ""  # a link's target, as written


@dataclass
class Plan:
    dirs: list[str] = field(default_factory=list)
    files: list[Entry] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (path, target to write)
    notes: list[str] = field(default_factory=list)
    size: int = 0


def parse_limit(value: str) -> int | None:
    """DIVERGENT_SHIP_LIMIT -> bytes, or None for no limit.

    A number of bytes with an optional unit: kB, MB, GB, TB (powers of 1000; the B may be left
    out) or KiB, MiB, GiB, TiB (powers of 1024), any case; `off` ships any size.

    >>> parse_limit("100MB"), parse_limit("1.5 GiB"), parse_limit("5000"), parse_limit("off")
    (100000000, 1610612736, 5000, None)
    """
    if value.strip().lower() in NO_LIMIT:
        return None
    match = SIZE.fullmatch(value)
    unit = match[2].lower() if match else None
    if unit not in UNITS:
        raise ShipError(BAD_LIMIT.format(value=json.dumps(value)))  # quoted, escaped
    return int(float(match[1]) * UNITS[unit])


def format_size(size: int) -> str:
    """Bytes as people read them, in powers of 1000 like the limit's default.

    >>> format_size(100_000_000), format_size(152_312_000), format_size(512)
    ('100 MB', '152.3 MB', '512 bytes')
    """
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


class Rules:
    """The rules for one directory.

    root: the directory's absolute path (to tell links into it from links out of it).
    divignore: the text of its .divignore, gitignore syntax.
    left_out: folders inside it that are never shipped (DIVERGENT_HOME, its runs/).
    limit: the most bytes of files shipped, None for no limit.
    """

    def __init__(
        self,
        *,
        root: str,
        divignore: str = "",
        left_out: Iterable[str] = (),
        limit: int | None = None,
        name: str = "",
    ):
        self.root = posixpath.normpath(root)
        self.ignored = pathspec.GitIgnoreSpec.from_lines(divignore.splitlines())
        self.left_out = {posixpath.normpath(p) for p in left_out}
        self.limit = limit
        self.name = name or root

    def descends(self, path: str) -> bool:
        """Whether the walker goes into a folder: never into one that is left out whole."""
        return not self._left_out(path) and not self.ignored.match_file(path + "/")

    def _left_out(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.left_out)

    def plan(self, entries: Iterable[Entry]) -> Plan:
        """What to copy, in the listing's order; ShipError when it is over the limit."""
        plan = Plan()
        skipped: list[str] = []
        for entry in entries:
            if self._left_out(entry.path):
                if entry.path in self.left_out:
                    plan.notes.append(LEFT_OUT_HOME.format(path=entry.path))
                continue
            ignored_as = entry.path + "/" if entry.kind == DIR else entry.path
            if self.ignored.match_file(ignored_as):
                continue
            if entry.kind == DIR:
                plan.dirs.append(entry.path)
            elif entry.kind == FILE:
                plan.files.append(entry)
                plan.size += entry.size
            elif entry.kind == LINK:
                target, outside = self._link_target(entry)
                plan.links.append((entry.path, target))
                if outside:
                    plan.notes.append(LINK_OUT.format(path=entry.path, target=target))
            else:
                skipped.append(SKIPPED.format(path=entry.path, kind=SPECIAL[entry.kind]))
        plan.notes += skipped[:NOTES_SHOWN]
        if len(skipped) > NOTES_SHOWN:
            plan.notes.append(SKIPPED_MORE.format(n=len(skipped) - NOTES_SHOWN))
        if self.limit is not None and plan.size > self.limit:
            raise ShipError(self._over_limit(plan))
        return plan

    def _link_target(self, entry: Entry) -> tuple[str, bool]:
        """The target to write in the copy, and whether it points out of the directory."""
        here = posixpath.join(self.root, posixpath.dirname(entry.path))
        resolved = posixpath.normpath(posixpath.join(here, entry.target))
        inside = resolved == self.root or resolved.startswith(self.root + "/")
        if not inside:
            return resolved, True
        if posixpath.isabs(entry.target):
            return posixpath.relpath(resolved, here), False
        return entry.target, False

    def _over_limit(self, plan: Plan) -> str:
        largest = sorted(plan.files, key=lambda f: (-f.size, f.path))[:LARGEST_NAMED]
        return OVER_LIMIT.format(
            directory=self.name,
            total=format_size(plan.size),
            limit=format_size(self.limit or 0),
            largest=", ".join(f"{f.path} ({format_size(f.size)})" for f in largest),
        )
