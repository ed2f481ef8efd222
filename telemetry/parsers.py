"""The API's JSON bodies are text: a lone surrogate (`"\\ud800"`, an escape JSON allows but no
UTF-8 holds) is a 400 in one line, where it would fail later as the server stores it or
answers with it. `div` never sends one: its JSON is encoded from text."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

NOT_TEXT = (
    "the body holds a lone surrogate (an escape like \\ud800 without its pair), which is not "
    "text: send JSON of UTF-8 text"
)


class TextJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if not _is_text(data):
            raise ParseError(NOT_TEXT)
        return data


def _is_text(data) -> bool:
    """Whether every string in the parsed JSON, keys included, can be encoded as UTF-8.
    A stack, not recursion: nesting as deep as the parser took costs no stack frames."""
    pending = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return True
