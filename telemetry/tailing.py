"""Which file, and where in it, the ingester reads next when a run's telemetry file has been
rotated, truncated, or is not a file at all. Pure: no Django, no I/O.

As Vector's file source does, a file is known by its inode and by a fingerprint of its first
bytes, both stored with the offset in the same transaction as the points: a restarted ingester
knows which file its offset counts bytes of. The fingerprint covers the first bytes already
read (up to HEAD_BYTES), so it is known from the first line on, and it tells a file truncated
and written again past the old offset (copytruncate) from the same file grown.

>>> judge(inode="8:12", head=fingerprint(b'{"step": 1}'), offset=12,
...       seen=Seen(inode="8:12", size=4))
<Verdict.TRUNCATED: 'truncated'>
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass

HEAD_BYTES = 256


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


@dataclass(frozen=True)
class Seen:
    """What is at the telemetry path now."""

    problem: str = ""  # why it cannot be read ("is a directory"); empty when it can
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
        return Verdict.REPLACED if inode and offset else Verdict.SAME
    if inode and seen.inode != inode:
        return Verdict.REPLACED
    if seen.size < offset:
        return Verdict.TRUNCATED
    if head and seen.head and seen.head != head:
        return Verdict.REWRITTEN
    return Verdict.SAME


NOTES = {
    Verdict.REPLACED: "{name} was replaced by another file",
    Verdict.TRUNCATED: "{name} was truncated below byte {offset:,}",
    Verdict.REWRITTEN: "{name} was truncated and written again",
}
READ_PREVIOUS = (
    "telemetry: {name} was rotated; read the rest of the old one ({previous}); "
    "now reading {name} from its start\n"
)
NO_PREVIOUS = (
    "telemetry: {what}; now reading {name} from its start "
    "(lines the old one had past byte {offset:,}, if any, were not read)\n"
)


def rotation_note(verdict: Verdict, *, name: str, offset: int, previous: str | None) -> str:
    """The one line the run's log gets when the ingester moves on to a new file: what it saw,
    and whether the old file's rest was read (found renamed, or copied, beside it)."""
    if previous is not None:
        return READ_PREVIOUS.format(previous=previous, name=name)
    what = NOTES[verdict].format(name=name, offset=offset)
    return NO_PREVIOUS.format(what=what, name=name, offset=offset)


def unreadable_note(*, name: str, problem: str) -> str:
    return (
        f"telemetry: cannot read {name}: it {problem}; DIVERGENT_TELEMETRY_PATH must be a "
        "regular file in the run's folder\n"
    )
