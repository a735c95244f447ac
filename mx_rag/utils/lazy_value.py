# SPDX-License-Identifier: Apache-2.0
"""``LazyValue``: a value built on first use, once, under a lock (a model loaded on first call)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LazyValue"]

T = TypeVar("T")


class LazyValue(Generic[T]):
    """``get()`` returns ``build()``'s result, calling ``build`` once: threads asking at the same
    time wait for the first; a ``build`` that raises is tried again by the next ``get``."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: T | None = None

    @property
    def loaded(self) -> bool:
        """Whether ``build`` has run (and succeeded)."""
        return self._value is not None

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value
