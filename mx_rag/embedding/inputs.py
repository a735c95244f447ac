# SPDX-License-Identifier: Apache-2.0
"""Boundary checks shared by every embedder: the lists of texts, their lengths, the batch size.

The limits are the original's: at most 1,000,000 texts per call, each 1 to 128 Mi characters
(256 for CLIP text), batches of 1 to 1024. Counts are checked before any element is looked at.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_str, fail
from mx_rag.utils.common import MAX_BATCH_SIZE, MB

MAX_TEXTS = 1_000_000
MAX_TEXT_LEN = 128 * MB

__all__ = ["MAX_TEXTS", "MAX_TEXT_LEN", "check_batch_size", "check_items", "check_text", "check_texts"]


def check_items(name: str, items: Any, max_count: int) -> Sequence[Any]:
    """A list or tuple of 1 to ``max_count`` items."""
    if not isinstance(items, (list, tuple)):
        raise fail(name, items, f"a list of 1 to {max_count} items")
    if not 1 <= len(items) <= max_count:
        raise ParameterError(f"{name} must hold 1 to {max_count} items, got {len(items)}")
    return items


def check_texts(name: str, texts: Any, *, max_count: int = MAX_TEXTS, max_len: int = MAX_TEXT_LEN) -> list[str]:
    """A list of 1 to ``max_count`` strings, each of 1 to ``max_len`` characters."""
    check_items(name, texts, max_count)
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not 1 <= len(text) <= max_len:
            check_str(f"{name}[{index}]", text, 1, max_len)
    return list(texts)


def check_text(name: str, text: Any, *, max_len: int = MAX_TEXT_LEN) -> str:
    """One string of 1 to ``max_len`` characters."""
    return check_str(name, text, 1, max_len)


def check_batch_size(batch_size: Any) -> int:
    """An int in [1, 1024]."""
    return check_int("batch_size", batch_size, 1, MAX_BATCH_SIZE)
