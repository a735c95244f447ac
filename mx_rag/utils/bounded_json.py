# SPDX-License-Identifier: Apache-2.0
"""``loads``: ``json.loads`` that refuses deep nesting before the C decoder recurses into it.

The C decoder recurses once per level up to the interpreter's recursion limit. Near that limit
any finalizer the garbage collector happens to run fails too, so hostile input ``[[[[…`` must be
turned away before decoding, not caught afterwards.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_DEPTH = 100

# everything but quotes and brackets, escapes included (an escaped quote does not end a string)
_NOISE = re.compile(r'\\.|[^"\\\[\]{}]+', re.S)
# then a whole string literal (brackets inside it do not nest) or one bracket
_TOKENS = re.compile(r'"[^"]*"|[\[\]{}]')


def loads(data: str | bytes) -> Any:
    """The decoded JSON value.

    Raises:
        ValueError: ``data`` is not JSON, or it nests deeper than ``MAX_JSON_DEPTH`` levels.
    """
    # as json.loads does with bytes (UnicodeDecodeError is a ValueError)
    text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
    if nesting(text) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(text)


def nesting(text: str) -> int:
    """How deep ``text``'s brackets nest (an upper bound for malformed text), without recursion."""
    brackets = text.count("[") + text.count("{")
    if brackets <= MAX_JSON_DEPTH:
        return brackets
    depth = deepest = 0
    for match in _TOKENS.finditer(_NOISE.sub("", text)):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
    return deepest
