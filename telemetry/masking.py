"""Secret values -> a masker that replaces every form of them with *** in logs, telemetry lines,
command lines and layouts.

Pure: no Django, no I/O. Each secret of at least MIN_LENGTH characters is masked:

- as written, and each line of a multi-line value (trimmed) on its own, as GitHub Actions does;
  a line shorter than MIN_LENGTH is masked only where the whole value is, since on its own it
  would mask every `{` or `-----` of the log;
- as JSON writes it inside a string (quotes, backslashes and control characters escaped,
  non-ASCII as \\uXXXX or kept), since a run that dumps a dict holding it writes that form;
- in Base64, standard and URL-safe, at each of the three alignments it can take inside a longer
  encoded text (`base64("alice:" + token)`), as GitHub Actions' runner does (see base64_forms);
- URL-encoded (see URL_ENCODINGS): every reserved character escaped, or all but /; %20 or + for
  a space; escapes in upper or lower case.

Where matches overlap or nest, their union becomes one *** (no `AAAA-overlap-***`).

>>> Masker(["hunter2!"]).mask(b'{"token": "hunter2!", "step": 1}')
b'{"token": "***", "step": 1}'
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import partial
from urllib.parse import quote, quote_plus

from telemetry.lines import Line, Reason, read_line

MASK = b"***"
# Shorter values are not masked: `lo` would eat every `loss`, `"` every line's JSON. The service
# refuses to store one; any stored before the rule are reported in each run's log.
MIN_LENGTH = 8
# A stream masker holds back at most this much (or twice the longest form, if longer) while a
# run of overlapping matches goes on, so a process's output never sits whole in memory.
HOLD_LIMIT = 64 * 1024

LINE_BREAKS = re.compile(r"[\r\n]+")


def too_short(value: str) -> bool:
    return len(value) < MIN_LENGTH


def too_plain(value: str) -> bool:
    """Whether a value is only whitespace, or one character over and over (whitespace aside):
    as a secret, eight spaces would mask every indented line of a log, `--------` every rule
    of a table, `00000000` every round number of a line of telemetry. No generated secret is
    either; the service refuses to store one."""
    return len({c for c in value if not c.isspace()}) <= 1


def pieces(value: str) -> set[str]:
    """What of a value is masked on its own: the whole of it, and each long enough line."""
    if too_short(value):
        return set()
    found = {value}
    for line in LINE_BREAKS.split(value):
        line = line.strip()
        if not too_short(line):
            found.add(line)
    return found


def forms(value: str) -> set[bytes]:
    """Every form of a secret value that can stand in a log, a line or a command."""
    found: set[bytes] = set()
    for piece in pieces(value):
        found |= _forms_of(piece)
    return found


def _forms_of(piece: str) -> set[bytes]:
    raw = piece.encode("utf-8")
    found = {raw}
    for ensure_ascii in (True, False):
        found.add(json.dumps(piece, ensure_ascii=ensure_ascii)[1:-1].encode("utf-8"))
    found |= base64_forms(raw)
    for encode in URL_ENCODINGS:
        encoded = encode(piece)
        found.add(encoded.encode("ascii"))
        found.add(_ESCAPE.sub(lambda escape: escape[0].lower(), encoded).encode("ascii"))
    return found


# How a URL may carry a value: quote() with nothing left unescaped, and with / left as Python's
# default leaves it (safe="/"), and quote_plus() with + for a space. Each is masked with its
# escapes in upper case (%2B, as Python and RFC 3986 write them) and in lower case (%2b, as
# some encoders do).
URL_ENCODINGS = (
    partial(quote, safe=""),
    partial(quote, safe="/"),
    partial(quote_plus, safe=""),
)
_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def base64_forms(raw: bytes) -> set[bytes]:
    """The Base64 digits that encode raw wherever it stands in an encoded text.

    Three bytes make four digits, so raw starts 0, 1 or 2 bytes into a group of three. At each
    alignment, the digits made of raw's bits alone are the same whatever surrounds it: from the
    first digit that starts inside raw to the last that ends inside it. GitHub Actions' runner
    drops raw's first 1 or 2 bytes to reach a group boundary, which leaves them readable; this
    starts at the first whole digit instead. The form with its last, partly filled digit is
    there too, for raw at the end of the text. Padding says nothing and is left out.
    """
    found: set[bytes] = set()
    for before in range(3):
        encoded = base64.b64encode(bytes(before) + raw).rstrip(b"=")
        first = (8 * before + 5) // 6
        whole = (8 * (before + len(raw))) // 6
        for form in (encoded[first:], encoded[first:whole]):
            found.add(form)
            found.add(form.translate(_URL_SAFE))
    return found


_URL_SAFE = bytes.maketrans(b"+/", b"-_")


class Masker:
    def __init__(self, values: Iterable[str]) -> None:
        every: set[bytes] = set()
        for value in values:
            every |= forms(value)
        self.needles = sorted(every)
        self.longest = max(map(len, self.needles), default=0)
        # Whether any form is there at all, in one pass: most lines hold none.
        self.anywhere = re.compile(b"|".join(map(re.escape, self.needles))) if every else None

    def __bool__(self) -> bool:
        return bool(self.needles)

    def spans(self, data: bytes, covered: int = 0) -> list[tuple[int, int]]:
        """Where data holds a secret: the union of every match, as sorted (start, end) pairs.

        Overlapping matches make one span; touching ones stay two. `covered` bytes at the start
        are known to be inside a match already.
        """
        found = [(0, covered)] if covered else []
        for needle in self.needles:
            at = data.find(needle)
            while at >= 0:
                found.append((at, at + len(needle)))
                at = data.find(needle, at + 1)
        found.sort()
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start < merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        return merged

    def partial(self, data: bytes) -> int:
        """How many bytes at the end of data could be the start of a secret still being written."""
        longest = 0
        for needle in self.needles:
            first = needle[:1]
            at = data.find(first, max(len(data) - len(needle) + 1, 0))
            while at >= 0 and len(data) - at > longest:
                if needle.startswith(data[at:]):
                    longest = len(data) - at
                    break
                at = data.find(first, at + 1)
        return longest

    def found_in(self, data: bytes) -> bool:
        return self.anywhere is not None and self.anywhere.search(data) is not None

    def mask(self, data: bytes) -> bytes:
        if not self.found_in(data):
            return data
        return _replace(data, self.spans(data))

    def mask_text(self, text: str) -> str:
        return self.mask(text.encode("utf-8")).decode("utf-8", errors="replace")

    def mask_json(self, value: object) -> object:
        """A JSON-like value (a parsed layout) with every string in it masked; the keys of its
        objects are its schema's names and are kept."""
        if not self.needles:
            return value
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, list):
            return [self.mask_json(item) for item in value]
        if isinstance(value, dict):
            return {key: self.mask_json(item) for key, item in value.items()}
        return value

    def mask_args(self, args: list[str]) -> list[str]:
        """A command line as it may be shown: each argument masked, and a secret that spans
        arguments (a value with a space, passed unquoted) masked in each one it touches."""
        if not self.needles:
            return list(args)
        encoded = [arg.encode("utf-8") for arg in args]
        spans = self.spans(b" ".join(encoded))
        masked, start = [], 0
        for arg in encoded:
            end = start + len(arg)
            inside = [(max(a, start) - start, min(b, end) - start) for a, b in spans]
            inside = [(a, b) for a, b in inside if a < b]
            masked.append(_replace(arg, inside).decode("utf-8", errors="replace"))
            start = end + 1
        return masked

    def read_line(self, raw: bytes) -> Line | Reason:
        """A telemetry line as the ingester reads it: masked, read, and its keys masked again
        once flattened, since `{"tokenpart-one": {"tokenpart-two": 4}}` spells
        tokenpart-one.tokenpart-two only then. A key that held a secret, written whole or
        spelt by the flattening, is left out of the point as a secret key, not as a bad name.
        """
        if not self.needles:
            return read_line(raw)
        masked = self.found_in(raw)
        line = read_line(_replace(raw, self.spans(raw)) if masked else raw)
        if isinstance(line, Reason):
            return line
        # In a line that held a secret, stars in a key are the mask's.
        secret_keys = [key for key in line.bad_keys if _STARS in key] if masked else []
        keys = (*line.numbers, *line.passed_over)
        # One look at every key at once, then one at each: most lines hold no secret.
        if self.found_in("\0".join(keys).encode()):
            secret_keys += [key for key in keys if self.found_in(key.encode())]
        if not secret_keys:
            return line
        hidden = set(secret_keys)
        return Line(
            {key: value for key, value in line.numbers.items() if key not in hidden},
            tuple(key for key in line.passed_over if key not in hidden),
            tuple(key for key in line.bad_keys if key not in hidden),
            tuple(self.mask_text(key) for key in secret_keys),
        )


_STARS = MASK.decode()


class StreamMasker:
    """Masks output that arrives in pieces of any size: a process's stdout.

    Each piece goes out at once, masked, except what could still turn into a secret: the end of
    the data that starts a form (a secret split across two writes), and a match that may yet
    grow by overlapping the next one. A progress bar written with \\r and no newline is in the
    log as soon as it is written. Held data stays under HOLD_LIMIT: past it, a run of
    overlapping matches is cut with a second ***, never let through.
    """

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self.held = b""
        self.covered = 0  # bytes at the start of held inside a match whose *** has gone out

    def feed(self, data: bytes) -> bytes:
        data = self.held + data
        masker = self.masker
        if not masker:
            self.held, self.covered = b"", 0
            return data
        found = self.covered or masker.found_in(data)
        spans = masker.spans(data, self.covered) if found else []
        # A secret that starts here or later may still be arriving; before it, all is known.
        cut = safe = len(data) - masker.partial(data)
        for start, end in spans:
            if start < safe < end:  # a match the next bytes could still lengthen
                cut = start
                if len(data) - start > max(HOLD_LIMIT, 2 * masker.longest):
                    cut = safe
                    spans = [(a, min(b, safe)) for a, b in spans if a < safe]
                    self.held, self.covered = data[safe:], end - safe
                    return _replace(data[:safe], spans)
                break
        self.covered = self.covered if cut == 0 else 0
        self.held = data[cut:]
        return _replace(data[:cut], [(a, b) for a, b in spans if b <= cut])

    def flush(self) -> bytes:
        """The end of the output: what was held goes out, masked."""
        data, covered = self.held, self.covered
        self.held, self.covered = b"", 0
        return _replace(data, self.masker.spans(data, covered)) if data else b""

    @property
    def holding(self) -> int:
        return len(self.held)


def _replace(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    if not spans:
        return data
    out, at = [], 0
    for start, end in spans:
        out.append(data[at:start])
        out.append(MASK)
        at = end
    out.append(data[at:])
    return b"".join(out)
