# SPDX-License-Identifier: Apache-2.0
"""A forgiving JSON reader for what small LLMs write when asked for JSON.

``loads_tolerant`` reads the first JSON value in a text and accepts, beyond strict JSON:
prose or a Markdown code fence around it; single quotes and Chinese quotes; quotes inside
strings left unescaped; keys and values without quotes; full-width ``，`` and ``：``; trailing
or missing commas; Python's ``True``/``False``/``None``; comments; and an answer cut off at
the end (cut strings, members and list items are dropped; the complete ones are kept).

It runs in time linear in the text and refuses (``ValueError``) values nested deeper than 100
levels rather than exhausting the stack.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mx_rag.utils import bounded_json
from mx_rag.utils.bounded_json import MAX_JSON_DEPTH

__all__ = ["loads_tolerant"]

_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_CLOSERS = {'"': '"', "'": "'", "“": "”", "‘": "’"}
_COMMA = ",，"
_COLON = ":："
_BARE_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_SKIP = object()
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
# what may follow a closing quote: structure, a comment or the end (else the quote is inside)
_STRING_END = re.compile(r"[ \t\r\n]*(?:[,，:：}\]]|//|/\*|\Z)")


class _TooDeep(ValueError):
    pass


def loads_tolerant(text: str) -> Any:
    """The first JSON object or list found in ``text``.

    Raises:
        ValueError: no object or list could be read.
    """
    too_deep = False
    for candidate in _candidates(text):
        try:
            strict = bounded_json.loads(candidate)
        except ValueError:
            pass
        else:
            if isinstance(strict, (dict, list)):
                return strict
        start = _first_bracket(candidate)
        if start < 0:
            continue
        try:
            value, _ = _Reader(candidate, start).value()
        except _TooDeep:
            too_deep = True
            continue
        if isinstance(value, (dict, list)):
            return value
    if too_deep:
        raise ValueError(f"the JSON in the text is nested deeper than {MAX_JSON_DEPTH} levels: {text[:80]!r}")
    raise ValueError(f"no JSON object or list in the text: {text[:80]!r}")


def _candidates(text: str) -> list[str]:
    fenced = [m.group(1).strip() for m in _FENCE.finditer(text)]
    return [*(f for f in fenced if f), text.strip()]


def _first_bracket(text: str) -> int:
    positions = [p for p in (text.find("{"), text.find("[")) if p >= 0]
    return min(positions, default=-1)


class _Reader:
    """Recursive descent; every method returns ``(value, complete)``.

    ``complete`` is False when the text ended inside the value; callers then stop reading.
    """

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos
        self.depth = 0

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos].isspace():
                self.pos += 1
            elif text.startswith("//", self.pos) or text.startswith("#", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos)
                self.pos = len(text) if end < 0 else end + 2
            else:
                return

    def value(self) -> tuple[Any, bool]:
        char = self.peek()
        if char == "":
            return None, False
        if char in "{[":
            self.depth += 1
            if self.depth > MAX_JSON_DEPTH:
                raise _TooDeep
            try:
                return self.obj() if char == "{" else self.array()
            finally:
                self.depth -= 1
        if char in _CLOSERS:
            return self.string()
        return self.bare()

    def array(self) -> tuple[list[Any], bool]:
        self.pos += 1
        items: list[Any] = []
        while (closed := self.next_member()) is None:
            item, complete = self.value()
            if not complete:
                if isinstance(item, list):
                    items.append(item)
                return items, False
            if item is not _SKIP:
                items.append(item)
        return items, closed

    def obj(self) -> tuple[dict[str, Any], bool]:
        self.pos += 1
        members: dict[str, Any] = {}
        while (closed := self.next_member()) is None:
            key, complete = self.value()
            if not complete:
                return members, False
            if key is _SKIP:
                continue
            if self.peek() in _COLON and self.peek():
                self.pos += 1
            value, complete = self.value()
            if not complete:
                if isinstance(value, (dict, list)):
                    members[str(key)] = value
                return members, False
            members[str(key)] = value
        return members, closed

    def next_member(self) -> bool | None:
        """Skip commas; None where a member follows, True past a closing bracket, False at the end."""
        while (char := self.peek()) in _COMMA and char:
            self.pos += 1
        if char == "":
            return False
        if char in "]}":
            self.pos += 1
            return True
        return None

    def string(self) -> tuple[str, bool]:
        opener = self.text[self.pos]
        closers = {_CLOSERS[opener], opener}
        self.pos += 1
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            self.pos += 1
            if char == "\\" and self.pos < len(text):
                out.append(_unescape(text, self))
            elif char in closers and self._ends_string():
                return "".join(out), True
            else:
                out.append(char)
        return "".join(out), False

    def _ends_string(self) -> bool:
        """A quote closes a string only where structure follows (else it is a quote inside)."""
        return _STRING_END.match(self.text, self.pos) is not None

    def bare(self) -> tuple[Any, bool]:
        start = self.pos
        text = self.text
        while self.pos < len(text) and text[self.pos] not in ",，:：{}[]\n":
            self.pos += 1
        word = text[start : self.pos].strip()
        if self.pos >= len(text):
            return word, False
        if word in _BARE_WORDS:
            return _BARE_WORDS[word], True
        if _NUMBER.fullmatch(word):
            try:
                return json.loads(word), True
            except ValueError:  # an integer of more than 4300 digits: kept as written
                return word, True
        if not word:  # a stray character: skip it
            self.pos += 1
            return _SKIP, True
        return word, True


def _unescape(text: str, reader: _Reader) -> str:
    char = text[reader.pos]
    reader.pos += 1
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/"}
    if char in simple:
        return simple[char]
    if char == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[reader.pos : reader.pos + 4]):
        reader.pos += 4
        return chr(int(text[reader.pos - 4 : reader.pos], 16))
    return char
