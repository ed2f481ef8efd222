"""Which file, and where in it, the ingester reads next when a run's telemetry file has been
rotated, truncated, or is not a file at all. Pure: no Django, no I/O.

As Vector's file source does, a file is known by its inode and by a fingerprint of its first
bytes, both stored with the offset in the same transaction as the points: a restarted ingester
knows which file its offset counts bytes of. The fingerprint covers the first bytes already
read (up to HEAD_BYTES), so it is known from the first line on, and it tells a file truncated
and written again past the old offset (copytruncate) from the same file grown.

Rotated files are read as Vector reads every file its pattern matches: the ones beside the path
whose names begin with its name (telemetry.jsonl.1, telemetry.jsonl-20250101) are older parts of
the same stream, read oldest first (by when each was last written), then the path's file. The
time the last one read was last written is stored too (Mark.after), so the rotated files written
after it are known to be unread even when the one being read has gone.

>>> judge(inode="8:12", head=fingerprint(b'{"step": 1}'), offset=12,
...       seen=Seen(inode="8:12", size=4))
<Verdict.TRUNCATED: 'truncated'>
"""

from __future__ import annotations

import enum
import hashlib
import math
from dataclasses import dataclass

HEAD_BYTES = 256
# A rotated file with one of these endings has been compressed (logrotate's compress): its lines
# cannot be read as lines, so it is said and counted, never read.
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".zip", ".z", ".br")


class Verdict(enum.StrEnum):
    SAME = "same"  # the file the offset counts bytes of: read on from the offset
    UNREADABLE = "unreadable"  # not a file that can be read: note it, count it, read nothing
    REPLACED = "replaced"  # another file at the path (rotated by renaming, or made anew)
    TRUNCATED = "truncated"  # the same file, shorter than the offset (copytruncate)
    REWRITTEN = "rewritten"  # the same file, other first bytes: truncated and written again


@dataclass(frozen=True)
class Mark:
    """What the ingester knows of the file its offset counts bytes of: stored with the offset."""

    inode: str = ""  # "device:inode"; empty before the first byte is read
    head: str = ""  # fingerprint of the first head_length(offset) bytes
    problem: str = ""  # why the path cannot be read now; empty when it can
    # When the rotated file read before this one was last written (ns): rotated files beside
    # the path written after it are not read yet. 0 before any rotation: none are.
    after: int = 0


@dataclass(frozen=True)
class Seen:
    """What is at the telemetry path now."""

    # Why it cannot be read, said after "it" ("is a directory", "cannot be opened (permission
    # denied)"); empty when it can.
    problem: str = ""
    inode: str = ""  # "device:inode"; empty when there is no file there
    size: int = 0
    head: str = ""  # fingerprint of its first head_length(offset) bytes, when it has them


def head_length(offset: int) -> int:
    """How many of a file's first bytes its fingerprint covers, once offset bytes are read."""
    return min(offset, HEAD_BYTES)


def fingerprint(head: bytes) -> str:
    return hashlib.blake2b(head, digest_size=8).hexdigest() if head else ""


def judge(*, inode: str, head: str, offset: int, seen: Seen) -> Verdict:
    """What is at the path, against the file the stored offset counts bytes of.

    An empty stored inode or head (a run read before they were kept) is taken from the file.
    """
    if seen.problem:
        return Verdict.UNREADABLE
    if not seen.inode:
        # Nothing at the path: the file the offset counts bytes of is elsewhere (renamed away,
        # a rotated one being read) once it is known; before that, nothing is written yet.
        return Verdict.REPLACED if inode else Verdict.SAME
    if inode and seen.inode != inode:
        return Verdict.REPLACED
    if seen.size < offset:
        return Verdict.TRUNCATED
    if head and seen.head and seen.head != head:
        return Verdict.REWRITTEN
    return Verdict.SAME


def first_look(*, inode: str, offset: int) -> bool:
    """Whether no file of the run's has been read yet: then every rotated file beside the path
    is older than it, and unread (the file was rotated before the ingester first looked)."""
    return not inode and not offset


@dataclass(frozen=True)
class Rotated:
    """A file beside the path that rotating it made."""

    name: str
    inode: str
    mtime_ns: int  # when it was last written

    @property
    def compressed(self) -> bool:
        return self.name.lower().endswith(COMPRESSED)

    @property
    def order(self) -> tuple[int, float, str]:
        return order(self.name, self.mtime_ns)


def is_rotated(name: str, *, of: str) -> bool:
    """Whether a file's name is that of a rotated copy of the file named `of`."""
    return name != of and name.startswith(of)


def order(name: str, mtime_ns: int) -> tuple[int, float, str]:
    """Oldest first: by when a file was last written; files written in the same tick of the
    clock by logrotate's numbering (telemetry.jsonl.3 is older than telemetry.jsonl.2)."""
    number = name.rpartition(".")[2]
    return (mtime_ns, -int(number) if number.isdigit() else 0, name)


def written_after(after: int) -> tuple[int, float, str]:
    """The order past which files were written after `after` (a Mark's), when the file read
    before is not there to compare with."""
    return (after, math.inf, "")


def unread(files: list[Rotated], *, than: tuple[int, float, str]) -> list[Rotated]:
    """The rotated files newer than the one read last (its order), oldest first."""
    return sorted((f for f in files if f.order > than), key=lambda f: f.order)


NOTES = {
    Verdict.REPLACED: "{name} was replaced by another file",
    Verdict.TRUNCATED: "{name} was truncated below byte {offset:,}",
    Verdict.REWRITTEN: "{name} was truncated and written again",
}
READ_PREVIOUS = (
    "telemetry: {name} was rotated; read the rest of the old one ({previous}){skipped}; "
    "now reading {following} from its start\n"
)
NO_PREVIOUS = (
    "telemetry: {what}{skipped}; now reading {following} from its start "
    "(lines the old one had past byte {offset:,}, if any, were not read)\n"
)
FIRST_SKIPPED = "telemetry: {name} was rotated{skipped}; now reading {following} from its start\n"
SKIPPED = "; {names} {verb} compressed and {was} not read"


def rotation_note(
    verdict: Verdict | None,
    *,
    name: str,
    offset: int,
    previous: str | None,
    following: str | None = None,
    compressed: list[str] = (),
) -> str:
    """The one line the run's log gets when the ingester moves on to the next file (a newer
    rotated one, or the path's own, `following`): what it saw, whether the old file's rest was
    read (found renamed, or copied, beside it), and which compressed ones it could not read.
    verdict None: the first look, which finds rotated files and no old one."""
    skipped = ""
    if compressed:
        many = len(compressed) > 1
        names = ", ".join(compressed[:-1]) + " and " + compressed[-1] if many else compressed[0]
        verb, was = ("are", "were") if many else ("is", "was")
        skipped = SKIPPED.format(names=names, verb=verb, was=was)
    following = following or name
    if verdict is None:
        return FIRST_SKIPPED.format(name=name, skipped=skipped, following=following)
    if previous is not None:
        return READ_PREVIOUS.format(
            previous=previous, name=name, skipped=skipped, following=following
        )
    what = NOTES[verdict].format(name=name, offset=offset)
    return NO_PREVIOUS.format(what=what, skipped=skipped, following=following, offset=offset)


def unreadable_note(*, name: str, problem: str) -> str:
    return (
        f"telemetry: cannot read {name}: it {problem}; DIVERGENT_TELEMETRY_PATH must be a "
        "regular file in the run's folder\n"
    )
