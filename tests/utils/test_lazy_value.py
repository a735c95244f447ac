"""mx_rag.utils.lazy_value.LazyValue: built once on first use, under a lock; a failure is retried."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mx_rag.utils.lazy_value import LazyValue


def test_built_once_for_concurrent_callers() -> None:
    calls: list[int] = []

    def build() -> object:
        calls.append(threading.get_ident())
        time.sleep(0.05)  # the other threads arrive while this one builds
        return object()

    value = LazyValue(build)
    assert not value.loaded
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: value.get(), range(8)))
    assert len(calls) == 1 and all(r is results[0] for r in results) and value.loaded


def test_a_failed_build_is_tried_again() -> None:
    attempts = iter([RuntimeError("model file busy"), "model"])

    def build() -> str:
        item = next(attempts)
        if isinstance(item, Exception):
            raise item
        return item

    value = LazyValue(build)
    with pytest.raises(RuntimeError, match="busy"):
        value.get()
    assert not value.loaded
    assert value.get() == "model" and value.loaded
