# SPDX-License-Identifier: Apache-2.0
"""``TestsetGenerator``: questions, reference answers and their source passages, written by an LLM.

Passages are drawn evenly across sources (files), the longest of each first; the LLM writes one
question that its passage answers and a short answer. A pair is kept when the answer's words are
mostly found in the passage (a question the passage does not answer is no test). The items serve
``mxrag eval`` and, as (query, positive passage) pairs, embedding fine-tuning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mx_rag.corag.metrics import answer_tokens
from mx_rag.errors import MxRagError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.summary.summary import is_chinese
from mx_rag.utils.checks import check_int, check_number, fail
from mx_rag.utils.progress import Progress

__all__ = ["TestItem", "TestsetGenerator", "load_testset", "save_testset"]

logger = logging.getLogger(__name__)

MAX_QUESTIONS = 10_000
MIN_PASSAGE = 200
PROMPT_EN = (
    "Read the passage and write one question that it answers, then a short answer taken from it "
    "(a few words). Use exactly this format:\nQuestion: <question>\nAnswer: <answer>\n\nPassage:\n{passage}"
)
PROMPT_ZH = (
    "阅读下面的段落，写出一个该段落能够回答的问题，再写出取自段落的简短答案（几个词）。严格使用以下格式：\n"
    "问题：<问题>\n答案：<答案>\n\n段落：\n{passage}"
)
_QUESTION = re.compile(r"^\s*(?:\**\s*)?(?:question|问题|q)\s*\**\s*[:：]\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_ANSWER = re.compile(r"^\s*(?:\**\s*)?(?:answer|答案|a)\s*\**\s*[:：]\s*(.+)$", re.IGNORECASE | re.MULTILINE)


@dataclass
class TestItem:
    """One test question: its id, the reference answer and the passages that hold it."""

    __test__ = False  # not a pytest test class

    id: str
    question: str
    reference: str
    passages: list[str]
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def parse_pair(reply: str) -> tuple[str, str] | None:
    """(question, answer) from ``Question: ...`` / ``Answer: ...`` lines (English or Chinese labels)."""
    question, answer = _QUESTION.search(reply), _ANSWER.search(reply)
    if question is None or answer is None:
        return None
    q, a = question.group(1).strip().strip("*").strip(), answer.group(1).strip().strip("*").strip()
    return (q, a) if q and a else None


def grounded(answer: str, passage: str, share: float) -> bool:
    """Whether at least ``share`` of the answer's words (characters for Chinese) occur in the passage."""
    if is_chinese([answer]):
        chars = [c for c in answer if not c.isspace()]
        return bool(chars) and sum(c in passage for c in chars) / len(chars) >= share
    words = answer_tokens(answer)
    found = set(answer_tokens(passage))
    return bool(words) and sum(w in found for w in words) / len(words) >= share


def pick_passages(passages: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """Up to ``count`` passages of at least 200 characters, round-robin over sources, longest first."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for passage in passages:
        if len(str(passage.get("text", ""))) >= MIN_PASSAGE:
            by_source.setdefault(str(passage.get("source", "")), []).append(passage)
    queues = [sorted(group, key=lambda p: (-len(p["text"]), p["text"])) for _, group in sorted(by_source.items())]
    chosen: list[dict[str, Any]] = []
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop(0))
    return chosen


class TestsetGenerator:
    """Write test questions from passages with an LLM.

    Args:
        llm: a ``Text2TextLLM`` (or anything with ``chat(query, llm_config=...)``).
        llm_config: generation settings; default temperature 0, at most 96 tokens.
        grounding: the share of the answer's words that must occur in its passage, in [0, 1].
            Default 0.6.

    Example:
        >>> # items = TestsetGenerator(llm).generate([{"text": chunk, "source": "a.md"}, ...], count=10)
        >>> # save_testset(items, "testset.jsonl")
    """

    __test__ = False

    def __init__(self, llm: Any, llm_config: LLMParameterConfig | None = None, grounding: float = 0.6) -> None:
        if not callable(getattr(llm, "chat", None)):
            raise fail("llm", llm, "an LLM with chat(query, llm_config=...) (Text2TextLLM)")
        self.llm = llm
        self.llm_config = llm_config or LLMParameterConfig(max_tokens=96, temperature=0.0, seed=0)
        self.grounding = check_number("grounding", grounding, 0.0, 1.0)

    def generate(self, passages: Sequence[dict[str, Any]], count: int, show_progress: bool = False) -> list[TestItem]:
        """Up to ``count`` items from ``passages`` (``{"text", "source"}`` dicts), in [1, 10000].

        Each passage is tried once; a passage whose reply cannot be parsed or whose answer is not
        grounded in it is skipped, so fewer than ``count`` items may come back.
        """
        count = check_int("count", count, 1, MAX_QUESTIONS)
        chosen = pick_passages(passages, count * 2)  # room for the pairs that fail the checks
        items: list[TestItem] = []
        progress = Progress(count if show_progress else 0, "test set")
        try:
            for passage in chosen:
                if len(items) >= count:
                    break
                item = self._one(passage)
                if item is not None:
                    items.append(item)
                    progress.update()
        finally:
            progress.close()
        return items

    def _one(self, passage: dict[str, Any]) -> TestItem | None:
        text = str(passage["text"])
        prompt = (PROMPT_ZH if is_chinese([text]) else PROMPT_EN).format(passage=text)
        try:
            reply = self.llm.chat(prompt, llm_config=self.llm_config)
        except MxRagError as exc:
            logger.warning("test set: the LLM failed on a passage of %s: %s", passage.get("source"), exc)
            return None
        pair = parse_pair(str(reply))
        if pair is None or not grounded(pair[1], text, self.grounding):
            return None
        key = hashlib.sha256(f"{pair[0]}\n{text}".encode()).hexdigest()[:12]
        return TestItem(id=key, question=pair[0], reference=pair[1], passages=[text],
                        source=str(passage.get("source", "")))


def save_testset(items: Iterable[TestItem], path: str | Path) -> None:
    """JSON Lines, one item per line (written atomically)."""
    from mx_rag.utils.checkpoint import atomic_write_text

    atomic_write_text(Path(path), "".join(json.dumps(asdict(item), ensure_ascii=False) + "\n" for item in items))


def load_testset(path: str | Path) -> list[TestItem]:
    """The items of a JSON Lines test set (``save_testset``'s format)."""
    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            items.append(TestItem(id=str(data["id"]), question=str(data["question"]),
                                  reference=str(data["reference"]), passages=[str(p) for p in data["passages"]],
                                  source=str(data.get("source", "")), meta=dict(data.get("meta") or {})))
        except (ValueError, KeyError, TypeError) as exc:
            raise MxRagError(f"{path}:{number}: not a test item ({exc})") from exc
    return items
