# SPDX-License-Identifier: Apache-2.0
"""``LLMParameterConfig``: generation settings, validated on construction and on assignment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mx_rag.utils.checks import check_bool, check_int, check_number
from mx_rag.utils.common import INT_32_MAX, MAX_TOKEN_NUM


def _seed(name: str, value: Any) -> int | None:
    return None if value is None else check_int(name, value, 0, INT_32_MAX)


_FIELDS: dict[str, tuple[Any, Callable[[str, Any], Any]]] = {
    "max_tokens": (512, lambda n, v: check_int(n, v, 1, MAX_TOKEN_NUM)),
    "presence_penalty": (0.0, lambda n, v: check_number(n, v, -2.0, 2.0)),
    "frequency_penalty": (0.0, lambda n, v: check_number(n, v, -2.0, 2.0)),
    "temperature": (1.0, lambda n, v: check_number(n, v, 0.0, 2.0)),
    "top_p": (1.0, lambda n, v: check_number(n, v, 0.0, 1.0, low_open=True)),
    "seed": (None, _seed),
    "stream": (False, check_bool),
}


class LLMParameterConfig:
    """Sampling settings of one LLM call.

    Args:
        max_tokens: tokens to generate, in [1, 100000]. Default 512.
        presence_penalty: in [-2.0, 2.0]. Default 0.0.
        frequency_penalty: in [-2.0, 2.0]. Default 0.0.
        temperature: in [0.0, 2.0]. Default 1.0.
        top_p: in (0.0, 1.0]. Default 1.0.
        seed: None or an int in [0, 2**31 - 1]. Default None.
        stream: whether chains stream their answer. Default False.

    Every assignment is validated too, and ``replace`` gives a changed copy, so a config can be
    shared between threads without one call changing another's settings.

    Example:
        >>> cfg = LLMParameterConfig(max_tokens=256, temperature=0.5)
        >>> cfg.replace(temperature=0.0).temperature
        0.0
    """

    __slots__ = tuple(_FIELDS)

    max_tokens: int
    presence_penalty: float
    frequency_penalty: float
    temperature: float
    top_p: float
    seed: int | None
    stream: bool

    def __init__(
        self,
        max_tokens: int = 512,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stream: bool = False,
    ) -> None:
        self.max_tokens = max_tokens
        self.presence_penalty = presence_penalty
        self.frequency_penalty = frequency_penalty
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.stream = stream

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"LLMParameterConfig has no field {name!r}; fields: {list(_FIELDS)}")
        object.__setattr__(self, name, _FIELDS[name][1](name, value))

    def replace(self, **changes: Any) -> LLMParameterConfig:
        """A copy with ``changes`` applied (validated); this object is left as it is."""
        return LLMParameterConfig(**{**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LLMParameterConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"LLMParameterConfig({args})"

    def __copy__(self) -> LLMParameterConfig:
        return self.replace()

    def __deepcopy__(self, memo: dict[int, Any]) -> LLMParameterConfig:
        return self.replace()

    def __reduce__(self) -> Any:
        return (_rebuild, (self.to_dict(),))


def _rebuild(values: dict[str, Any]) -> LLMParameterConfig:
    return LLMParameterConfig(**values)
