# SPDX-License-Identifier: Apache-2.0
"""``Judge``: the LLM and embedding calls the metrics are built from, each asked once per text.

The LLM writes statements, questions or entities (one per line), ``<number>: yes|no`` verdicts,
or one rating; the parsers accept the usual variations of small models (numbering, bullets,
quotes, Chinese punctuation, 是/否). A reply that gives no verdict for an item counts as "no".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from mx_rag.llm.llm_parameter import LLMParameterConfig

__all__ = ["Judge", "parse_lines", "parse_rating", "parse_verdicts"]

MAX_ITEMS = 12
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+\s*[.):、：:]|[（(]?\d+[)）])\s*")
_VERDICT = re.compile(r"^\s*[（(\[]?(\d+)[)）\]]?\s*[.:：、)-]?\s*\**\s*(yes|no|是|否|supported|not)", re.IGNORECASE)
_YES = ("yes", "是", "supported")


def parse_lines(text: str, limit: int = MAX_ITEMS) -> list[str]:
    """Non-empty lines without bullets or numbering, at most ``limit``."""
    items: list[str] = []
    for line in text.splitlines():
        item = _BULLET.sub("", line).strip().strip('"“”').strip()
        if item and not item.endswith((":", "：")) and item not in items:
            items.append(item)
    return items[:limit]


def parse_verdicts(text: str, count: int) -> list[bool]:
    """``count`` verdicts from ``<number>: yes|no`` lines; a lone yes/no stands for a single item."""
    found: dict[int, bool] = {}
    for line in text.splitlines():
        match = _VERDICT.match(line)
        if match:
            found.setdefault(int(match.group(1)), match.group(2).lower() in _YES)
    if not found and count == 1:
        head = text.strip().lower()
        return [head.startswith(_YES)]
    return [found.get(i + 1, False) for i in range(count)]


def parse_rating(text: str, allowed: Sequence[int]) -> float | None:
    """The first of ``allowed`` that the reply states, or None."""
    for number in re.findall(r"\d+", text):
        if int(number) in allowed:
            return float(number)
    return None


def numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i + 1}. {item}" for i, item in enumerate(items))


class Judge:
    """The LLM and embedding calls of one evaluation, memoised per text."""

    def __init__(self, llm: Any, embeddings: Any, prompts: dict[str, str], llm_config: LLMParameterConfig) -> None:
        self.llm = llm
        self.embeddings = embeddings
        self.prompts = prompts
        self.llm_config = llm_config
        self.ask = functools.lru_cache(maxsize=4096)(self._ask)
        self.embed = functools.lru_cache(maxsize=4096)(self._embed)

    def _ask(self, prompt: str) -> str:
        chat = getattr(self.llm, "chat", None)
        if callable(chat):
            return str(chat(prompt, llm_config=self.llm_config))
        reply = self.llm.invoke(prompt)
        return str(getattr(reply, "content", reply))

    def _embed(self, text: str) -> tuple[float, ...]:
        return tuple(float(x) for x in self.embeddings.embed_query(text))

    def prompt(self, name: str, **fields: Any) -> str:
        return self.ask(self.prompts[name].format(**fields))

    def statements(self, question: str, answer: str) -> list[str]:
        return parse_lines(self.prompt("statements", question=question, answer=answer)) or [answer.strip()]

    def supported(self, context: str, statements: Sequence[str]) -> list[bool]:
        if not statements:
            return []
        reply = self.prompt("verdicts", context=context, statements=numbered(statements))
        return parse_verdicts(reply, len(statements))

    def useful(self, question: str, answer: str, passages: Sequence[str]) -> list[bool]:
        reply = self.prompt("useful", question=question, answer=answer, passages=numbered(passages))
        return parse_verdicts(reply, len(passages))

    def questions(self, answer: str, n: int = 3) -> list[str]:
        return parse_lines(self.prompt("questions", answer=answer, n=n), limit=n)

    def entities(self, text: str) -> list[str]:
        return parse_lines(self.prompt("entities", text=text), limit=MAX_ITEMS * 2)

    def rating(self, name: str, allowed: Sequence[int], **fields: Any) -> float | None:
        return parse_rating(self.prompt(name, **fields), allowed)

    def similarity(self, first: str, second: str) -> float:
        a, b = np.asarray(self.embed(first)), np.asarray(self.embed(second))
        norm = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
        return float(np.clip(a @ b / norm, 0.0, 1.0))
