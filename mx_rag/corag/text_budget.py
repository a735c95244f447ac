# SPDX-License-Identifier: Apache-2.0
"""Token estimates and prompt fitting for CoRAG: prompts are cut to the model's *context* budget.

Without a tokenizer, tokens are estimated from characters: each CJK character (Chinese, Japanese
kana, Korean Hangul, full-width forms) counts as one token, every other run of four characters as
one token. Give ``token_counter`` (``text -> int`` or ``text -> list of ids``, e.g. a Hugging Face
tokenizer's ``encode``) for exact counts.

Example:
    >>> estimate_tokens("abcdefgh"), estimate_tokens("北京是首都")
    (2, 5)
    >>> budget = TextBudget(context_tokens=1000)
    >>> budget.prompt_budget(max_tokens=200)
    768
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from mx_rag.utils.checks import check_int, fail

__all__ = ["PROMPT_OVERHEAD_TOKENS", "TextBudget", "TokenMeter", "estimate_tokens", "truncate_head", "truncate_middle"]

logger = logging.getLogger(__name__)

PROMPT_OVERHEAD_TOKENS = 32  # chat template, role markers and estimation error, per call
MIN_PROMPT_TOKENS = 16
CUT_MARK = " ... "

_CJK = re.compile(r"[\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                  r"\uff00-\uffef]")

TokenCounter = Callable[[str], Any]


def estimate_tokens(text: str, token_counter: TokenCounter | None = None) -> int:
    """Tokens in ``text``: ``token_counter``'s count when given, else the character estimate."""
    if not text:
        return 0
    if token_counter is not None:
        counted = token_counter(text)
        return counted if isinstance(counted, int) else len(counted)
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def truncate_middle(text: str, max_tokens: int, token_counter: TokenCounter | None = None) -> str:
    """``text`` if it fits in ``max_tokens``, else its head and tail joined by ``" ... "``.

    Keeping both ends preserves a prompt's instructions (head) and its question (tail).
    """
    if estimate_tokens(text, token_counter) <= max_tokens:
        return text
    if max_tokens <= estimate_tokens(CUT_MARK, token_counter):
        return ""
    low, high = 0, len(text)  # largest kept character count that fits
    while low < high:
        mid = (low + high + 1) // 2
        if estimate_tokens(_cut(text, mid), token_counter) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return _cut(text, low)


def truncate_head(text: str, max_tokens: int, token_counter: TokenCounter | None = None) -> str:
    """The longest prefix of ``text`` that fits in ``max_tokens`` (a document's start matters most)."""
    if estimate_tokens(text, token_counter) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if estimate_tokens(text[:mid], token_counter) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low].rstrip()


def _cut(text: str, keep: int) -> str:
    if keep >= len(text):
        return text
    head = (keep + 1) // 2
    return text[:head] + CUT_MARK + text[len(text) - (keep - head):]


class TextBudget:
    """How much prompt fits a model with ``context_tokens`` of context, and how to fit it.

    Args:
        context_tokens: the model's context window (prompt plus answer), in [256, 10_000_000].
        token_counter: optional ``text -> int`` (or ``text -> ids``) used instead of the estimate.
    """

    def __init__(self, context_tokens: int = 4096, token_counter: TokenCounter | None = None) -> None:
        self.context_tokens = check_int("context_tokens", context_tokens, 256, 10_000_000)
        if token_counter is not None and not callable(token_counter):
            raise fail("token_counter", token_counter, "None or a callable text -> token count")
        self.token_counter = token_counter

    def count(self, text: str) -> int:
        return estimate_tokens(text, self.token_counter)

    def prompt_budget(self, max_tokens: int) -> int:
        """Prompt tokens left once the call's answer (``max_tokens``) and the overhead are reserved."""
        return max(MIN_PROMPT_TOKENS, self.context_tokens - max_tokens - PROMPT_OVERHEAD_TOKENS)

    def truncate(self, prompt: str, max_tokens: int) -> str:
        """``prompt`` cut in the middle to ``prompt_budget(max_tokens)`` (head and tail kept)."""
        return truncate_middle(prompt, self.prompt_budget(max_tokens), self.token_counter)

    def fit_documents(self, documents: Sequence[str], tokens: int, per_document: int = 8) -> list[str]:
        """Documents in order while they fit in ``tokens``; the first one that does not fit is cut
        (if a useful part of it fits) and the rest are dropped. ``per_document``: header tokens."""
        kept: list[str] = []
        left = tokens
        for document in documents:
            need = self.count(document) + per_document
            if need <= left:
                kept.append(document)
                left -= need
                continue
            if left - per_document >= 32:
                kept.append(truncate_head(document, left - per_document, self.token_counter))
            break
        return kept

    def fit(self, build: Callable[[list[str], str], str], documents: Sequence[str], history: str,
            max_tokens: int) -> str:
        """The prompt ``build(documents, history)`` cut to ``prompt_budget(max_tokens)``.

        The question and instructions are kept whole; documents are trimmed first (the lowest
        ranked go first, the last kept one may be cut), then the history is cut in the middle.
        Only when the question itself is too long is the whole prompt cut in the middle.
        """
        budget = self.prompt_budget(max_tokens)
        prompt = build(list(documents), history)
        if self.count(prompt) <= budget:
            return prompt
        fixed = build([], history)
        if self.count(fixed) > budget:
            bare = build([], "")
            spare = budget - self.count(bare)
            if spare <= 0:
                logger.warning("CoRAG prompt: the question alone exceeds %d tokens; cutting the prompt", budget)
                return truncate_middle(bare, budget, self.token_counter)
            share = spare if not documents else spare // 2
            history = truncate_middle(history, max(share - 2, 0), self.token_counter)
            fixed = build([], history)
        room = budget - self.count(fixed)
        for _ in range(4):  # rendering adds a few tokens the per-document header guess may miss
            kept = self.fit_documents(documents, room)
            prompt = build(kept, history)
            over = self.count(prompt) - budget
            if over <= 0:
                return prompt
            room -= over + 8
        return fixed


class TokenMeter:
    """Tokens spent on one question, shared by the threads working on it (lock-protected).

    Args:
        budget: tokens allowed; None for no limit.

    Example:
        >>> meter = TokenMeter(100)
        >>> meter.add(60); meter.fits(30), meter.fits(50), meter.exhausted
        (True, False, False)
    """

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget
        self._used = 0
        self._lock = threading.Lock()

    def add(self, tokens: int) -> None:
        with self._lock:
            self._used += max(0, int(tokens))

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    @property
    def exhausted(self) -> bool:
        """True once the budget is used up (never without a budget)."""
        return self.budget is not None and self.used >= self.budget

    def fits(self, tokens: int) -> bool:
        """Whether ``tokens`` more stay within the budget (always without a budget)."""
        return self.budget is None or self.used + tokens <= self.budget
