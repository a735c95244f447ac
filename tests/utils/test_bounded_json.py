"""bounded_json.loads: deep nesting is refused before the C decoder recurses into it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mx_rag.utils.bounded_json import MAX_JSON_DEPTH, loads, nesting

# strings full of what the depth scan must not count: brackets, quotes, escapes
NOISE = ['[{', '}]', '"[', '\\', '\\"[', '{"a": [', "\u5b5b"]


def nested(depth: int) -> Any:
    value: Any = NOISE[depth % len(NOISE)]
    for level in range(depth):
        value = [value, NOISE[level % len(NOISE)]] if level % 2 else {NOISE[level % len(NOISE)]: value}
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH])
@pytest.mark.parametrize("encoding", ["str", "utf-8", "utf-16"])
def test_nesting_up_to_the_limit_decodes_as_json_does(depth: int, encoding: str) -> None:
    text = json.dumps(nested(depth), ensure_ascii=False)
    data = text if encoding == "str" else text.encode(encoding)
    assert loads(data) == json.loads(data) == nested(depth)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1_000, 50_000])
def test_deeper_nesting_is_a_value_error_naming_the_limit(depth: int) -> None:
    text = "[" * depth + "]" * depth if depth > 500 else json.dumps(nested(depth))
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        loads(text.encode())


def test_brackets_inside_strings_do_not_nest() -> None:
    text = json.dumps({"a": ["[[[{{{" * 100, '\\"[[[' * 100, "]]]" * 100]})
    assert nesting(text) == 2
    assert loads(text)["a"][1] == '\\"[[[' * 100


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                max_size=3),
                    max_leaves=200))
def test_nesting_is_never_below_the_true_depth(value: Any) -> None:
    text = json.dumps(value)
    assert nesting(text) >= depth_of(value)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        assert nesting(text) == depth_of(value)


def test_malformed_json_is_still_a_value_error() -> None:
    for bad in (b"", b"{", b"\xff\xfe\xfd", "[" * 200 + '"', '{"a": 1,}'):
        with pytest.raises(ValueError):
            loads(bad)
