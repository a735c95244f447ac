# SPDX-License-Identifier: Apache-2.0
"""Boundary checks. Each raises ``ParameterError`` naming the parameter, the value and the range."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mx_rag.errors import ParameterError

_SHOW = 60


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOW else f"{text[:_SHOW]}... ({len(text)} chars)"


def fail(name: str, value: Any, expected: str) -> ParameterError:
    """Build the standard error: ``{name} must be {expected}, got {value}``."""
    return ParameterError(f"{name} must be {expected}, got {_show(value)}")


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise fail(name, value, "a bool")
    return value


def check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(name, value, f"an int in [{low}, {high}]")
    if not low <= value <= high:
        raise fail(name, value, f"in [{low}, {high}]")
    return value


def check_number(name: str, value: Any, low: float, high: float, *, low_open: bool = False) -> float:
    left = "(" if low_open else "["
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(name, value, f"a number in {left}{low}, {high}]")
    below = value <= low if low_open else value < low
    if below or value > high or value != value:  # NaN compares false with every bound
        raise fail(name, value, f"in {left}{low}, {high}]")
    return float(value)


def check_str(name: str, value: Any, min_len: int, max_len: int) -> str:
    if not isinstance(value, str):
        raise fail(name, value, f"a str of length [{min_len}, {max_len}]")
    if not min_len <= len(value) <= max_len:
        raise ParameterError(f"{name} must have length in [{min_len}, {max_len}], got length {len(value)}")
    return value


def check_optional_str(name: str, value: Any, min_len: int, max_len: int) -> str | None:
    return None if value is None else check_str(name, value, min_len, max_len)


def check_pattern(name: str, value: Any, pattern: str) -> str:
    if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
        raise fail(name, value, f"a str matching {pattern!r}")
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise fail(name, value, f"one of {list(choices)}")
    return str(value)


def check_instance(name: str, value: Any, cls: type) -> Any:
    if not isinstance(value, cls):
        raise fail(name, value, f"a {cls.__name__}")
    return value


def apply_text_fn(name: str, fn: Callable[[str], str] | None, text: str, max_len: int) -> str:
    """``fn(text)``, checked to be a str of at most ``max_len`` characters; ``text`` when ``fn`` is
    None (the user's ``encrypt_fn``/``decrypt_fn`` of the stores: ``name`` is the parameter)."""
    if fn is None:
        return text
    result = fn(text)
    if not isinstance(result, str) or len(result) > max_len:
        raise fail(f"the result of {name}", result, f"a str of at most {max_len} characters")
    return result


def check_str_mapping(name: str, value: Any, *, max_items: int, max_key: int, max_value: int) -> dict[str, str]:
    """A dict of str to str with bounded size; CR/LF are refused (header injection)."""
    if not isinstance(value, Mapping):
        raise fail(name, value, "a dict of str to str")
    if len(value) > max_items:
        raise ParameterError(f"{name} may hold at most {max_items} entries, got {len(value)}")
    out: dict[str, str] = {}
    for key, item in value.items():
        check_str(f"{name} key", key, 1, max_key)
        check_str(f"{name}[{key!r}]", item, 0, max_value)
        if any(c in key + item for c in "\r\n\0"):
            raise ParameterError(f"{name}[{key!r}] must not contain CR, LF or NUL characters")
        out[key] = item
    return out


def as_parameter_error(exc: Any, model: Any = None) -> ParameterError:
    """Turn a pydantic ``ValidationError`` into one ``ParameterError``.

    Our own checks, raised inside validators, surface unchanged; pydantic's type errors name the
    field, the problem and the value. With the ``model`` that raised it, a value out of a field's
    bounds gives the whole range (``upload.max_file_mb must be in [1, 100], got '1000'``).
    """
    errors = exc.errors()
    for error in errors:
        inner = (error.get("ctx") or {}).get("error")
        if isinstance(inner, ParameterError):
            return inner
    first = errors[0]
    loc = first.get("loc", ())
    name = ".".join(str(part) for part in loc) or "argument"
    low, high = _bounds(model, loc)
    if first.get("type") in _BOUND_ERRORS and low is not None and high is not None:
        return ParameterError(f"{name} must be in [{low}, {high}], got {_show(first.get('input'))}")
    return ParameterError(f"{name}: {first.get('msg')}, got {_show(first.get('input'))}")


_BOUND_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def _bounds(model: Any, loc: tuple[Any, ...]) -> tuple[Any, Any]:
    """The ``ge`` and ``le`` of the field at ``loc`` of a pydantic ``model`` (None where unknown)."""
    info = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, Mapping) or part not in fields:
            return None, None
        info = fields[part]
        model = info.annotation
    low = high = None
    for constraint in getattr(info, "metadata", ()):
        low = getattr(constraint, "ge", low)
        high = getattr(constraint, "le", high)
    return low, high
