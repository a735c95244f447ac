# SPDX-License-Identifier: Apache-2.0
"""``PromptCompressor``: the base of compressors, and the piece selection they share.

``compress_rate`` is the share of the context's characters to drop: 0.6 keeps about 40 %. The
pieces are cut by a LangChain ``TextSplitter``, and each keeps the text between it and the next
piece (the whitespace a splitter strips), so a compressed context reads like the original with
parts left out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from langchain_text_splitters import TextSplitter

from mx_rag.utils.checks import check_bool, check_number, check_str, fail

__all__ = ["PromptCompressor", "check_compress_args", "check_splitter", "pieces", "select"]

MAX_CONTEXT_LEN = 16 * 1024 * 1024
MAX_QUESTION_LEN = 1000 * 1000
DEFAULT_COMPRESS_RATE = 0.6


class PromptCompressor(ABC):
    """Base of prompt compressors: ``compress_texts(context, question)`` returns a shorter context."""

    @abstractmethod
    def compress_texts(self, context: str, question: str) -> str:
        """The parts of ``context`` that matter most to ``question``, in their original order."""


def check_splitter(splitter: Any) -> TextSplitter:
    if not isinstance(splitter, TextSplitter):
        raise fail("splitter", splitter, "a langchain_text_splitters TextSplitter")
    return splitter


def check_compress_args(context: Any, question: Any, compress_rate: Any, context_reorder: Any = False) -> float:
    check_str("context", context, 1, MAX_CONTEXT_LEN)
    check_str("question", question, 1, MAX_QUESTION_LEN)
    check_bool("context_reorder", context_reorder)
    rate = check_number("compress_rate", compress_rate, 0.0, 1.0, low_open=True)
    if rate >= 1.0:
        raise fail("compress_rate", compress_rate, "in (0, 1)")
    return rate


def pieces(context: str, splitter: TextSplitter) -> list[str]:
    """The splitter's chunks, each extended to the next chunk's start (so joining them gives ``context``)."""
    chunks = [chunk for chunk in splitter.split_text(context) if chunk]
    starts: list[int] = []
    cursor = 0
    for chunk in chunks:
        found = context.find(chunk, cursor)
        if found < 0:  # a splitter that rewrites text: fall back to its chunks as they are
            return chunks
        starts.append(found)
        cursor = found + len(chunk)
    if not starts:
        return [context]
    bounds = [0, *starts[1:], len(context)]
    return [context[bounds[i]:bounds[i + 1]] for i in range(len(chunks))]


def select(texts: Sequence[str], scores: Sequence[float], compress_rate: float) -> list[int]:
    """Indexes of the best-scored texts, best first, that come closest to ``(1 - compress_rate)`` of the characters.

    Texts are taken in score order until the next one would leave the total further from the
    budget than it is (at least one is kept); a lower-scored text never replaces a higher one.
    """
    budget = sum(len(text) for text in texts) * (1.0 - compress_rate)
    order = sorted(range(len(texts)), key=lambda i: -float(scores[i]))
    kept: list[int] = []
    used = 0
    for index in order:
        size = len(texts[index])
        if kept and abs(used + size - budget) >= abs(used - budget):
            break
        kept.append(index)
        used += size
    return kept
