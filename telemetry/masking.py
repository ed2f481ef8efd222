"""Secret values -> a masker that replaces them with *** in log text and telemetry lines.

Pure: no Django, no I/O. A value is masked as written and as JSON writes it inside a string
(quotes and backslashes escaped, non-ASCII as \\uXXXX or kept), since a run that dumps a dict
holding a secret puts the escaped form in its telemetry line.

>>> Masker(["hunter2"]).mask(b'{"token": "hunter2", "step": 1}')
b'{"token": "***", "step": 1}'
"""

from __future__ import annotations

import json
from collections.abc import Iterable

MASK = b"***"


def forms(value: str) -> set[bytes]:
    """Every form of a secret value that can stand in a line."""
    if not value:
        return set()
    found = {value.encode("utf-8")}
    for ensure_ascii in (True, False):
        escaped = json.dumps(value, ensure_ascii=ensure_ascii)[1:-1]
        found.add(escaped.encode("utf-8"))
    return found


class Masker:
    def __init__(self, values: Iterable[str]) -> None:
        every = set()
        for value in values:
            every |= forms(value)
        # Longest first, so a secret that contains another is masked whole.
        self.needles = sorted(every, key=lambda form: (-len(form), form))

    def __bool__(self) -> bool:
        return bool(self.needles)

    def mask(self, data: bytes) -> bytes:
        for needle in self.needles:
            if needle in data:
                data = data.replace(needle, MASK)
        return data

    def mask_text(self, text: str) -> str:
        return self.mask(text.encode("utf-8")).decode("utf-8", errors="replace")
