# SPDX-License-Identifier: Apache-2.0
"""Question-answer pairs written by an LLM from titled texts, to fill a cache before users ask.

``QAGenerate(QAGenerationConfig(titles, contents, tokenizer, llm)).generate_qa()`` cuts each text to
``max_tokens`` tokens (whole lines while they fit), asks the LLM for ``qas_num`` numbered questions,
each with the passage of the text that answers it, and returns ``{question: passage}``. A pair is
kept only when its passage is mostly taken from the text, so a made-up answer is not cached.

    >>> # qas = QAGenerate(QAGenerationConfig(titles, contents, tokenizer, llm, qas_num=3)).generate_qa()
    >>> # for question, answer in qas.items(): cache.update(question, answer)
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from mx_rag.errors import MxRagError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.summary.summary import is_chinese
from mx_rag.utils.checks import check_instance, check_int, check_str, fail
from mx_rag.utils.common import MB

__all__ = ["QAGenerate", "QAGenerationConfig"]

logger = logging.getLogger(__name__)

MAX_TEXTS = 10_000
MAX_TITLE = 100
MAX_CONTENT = MB
GROUNDING = 0.6  # the share of a passage's words (characters in Chinese) that must occur in the text

SYSTEM_ZH = (
    "你负责为一篇文章编写问答对。根据用户给出的标题和正文，写出{n}个彼此不同、表述清楚、能由正文回答的问题，"
    "每个问题后给出正文中回答它的原文段落。严格使用以下格式，不要写其他内容：\n"
    "Q1：<问题>\n参考段落：<正文中的原文>\nQ2：<问题>\n参考段落：<正文中的原文>"
)
SYSTEM_EN = (
    "You write question-answer pairs for an article. From the title and text the user gives, write {n} "
    "distinct, clearly worded questions that the text answers, each followed by the passage of the text "
    "that answers it, quoted from the text. Use exactly this format and nothing else:\n"
    "Q1: <question>\nReference: <passage quoted from the text>\nQ2: <question>\nReference: <passage>"
)
USER_ZH = "标题：{title}\n正文：\n{content}"
USER_EN = "Title: {title}\nText:\n{content}"

_QUESTION = re.compile(r"^\s*\**\s*Q\s*\d+\s*\**\s*[:：.、]\s*", re.IGNORECASE | re.MULTILINE)
_REFERENCE = re.compile(r"\**\s*(?:参考段落|参考答案|答案|reference(?: passage)?|answer|passage)\s*\**\s*[:：]\s*",
                        re.IGNORECASE)


def _check_texts(name: str, value: Any, max_len: int) -> list[str]:
    if not isinstance(value, (list, tuple)) or not 0 < len(value) <= MAX_TEXTS:
        raise fail(name, value, f"a list of 1 to {MAX_TEXTS} str")
    for index, text in enumerate(value):
        check_str(f"{name}[{index}]", text, 1, max_len)
    return list(value)


@dataclass(frozen=True, init=False)
class QAGenerationConfig:
    """What ``QAGenerate`` works on: ``titles[i]`` names ``contents[i]``.

    Args:
        titles: 1 to 10,000 titles of 1 to 100 characters (``MarkDownParser.parse`` gives them).
        contents: as many texts, of 1 to 1,048,576 characters each.
        tokenizer: anything with ``encode(text)`` returning a sequence of token ids, such as a
            ``transformers`` tokenizer of the LLM (``AutoTokenizer.from_pretrained(path, local_files_only=True)``).
        llm: a ``Text2TextLLM`` (anything with ``chat(query, sys_messages=, llm_config=)``).
        max_tokens: each text is cut to this many tokens, in [500, 100000]. Default 1000.
        qas_num: how many pairs to ask for per text, in [1, 10]. Default 5.
    """

    titles: list[str]
    contents: list[str]
    tokenizer: Any
    llm: Any
    max_tokens: int
    qas_num: int

    def __init__(self, titles: list[str], contents: list[str], tokenizer: Any, llm: Any,
                 max_tokens: int = 1000, qas_num: int = 5) -> None:
        titles = _check_texts("titles", titles, MAX_TITLE)
        contents = _check_texts("contents", contents, MAX_CONTENT)
        if len(titles) != len(contents):
            raise fail("contents", f"{len(contents)} texts", f"one text per title ({len(titles)} titles)")
        if not callable(getattr(tokenizer, "encode", None)):
            raise fail("tokenizer", tokenizer, "a tokenizer with encode(text) (transformers AutoTokenizer)")
        if not callable(getattr(llm, "chat", None)):
            raise fail("llm", llm, "an LLM with chat(query, sys_messages=, llm_config=) (Text2TextLLM)")
        for name, value in (("titles", titles), ("contents", contents), ("tokenizer", tokenizer), ("llm", llm),
                            ("max_tokens", check_int("max_tokens", max_tokens, 500, 100_000)),
                            ("qas_num", check_int("qas_num", qas_num, 1, 10))):
            object.__setattr__(self, name, value)


class QAGenerate:
    """Write question-answer pairs from ``config``'s texts with its LLM (see the module's text)."""

    def __init__(self, config: QAGenerationConfig) -> None:
        self.config = check_instance("config", config, QAGenerationConfig)

    def generate_qa(self, llm_config: LLMParameterConfig | None = None) -> dict[str, str]:
        """``{question: passage}`` over every text; default ``llm_config`` temperature 0.5, top_p 0.95.

        A text whose reply holds no usable pair adds nothing (logged); an LLM that fails on one text
        is logged and the others go on. At most ``qas_num`` pairs come from each text.
        """
        if llm_config is None:
            llm_config = LLMParameterConfig(temperature=0.5, top_p=0.95)
        check_instance("llm_config", llm_config, LLMParameterConfig)
        pairs: dict[str, str] = {}
        for title, content in zip(self.config.titles, self.config.contents, strict=True):
            text = truncate(content, self.config.tokenizer, self.config.max_tokens)
            found = self._one(title, text, llm_config)
            if not found:
                logger.warning("generate_qa: no usable question-answer pair for %r", title)
            pairs.update(found)
        return pairs

    def _one(self, title: str, text: str, llm_config: LLMParameterConfig) -> dict[str, str]:
        chinese = is_chinese([title, text])
        system = (SYSTEM_ZH if chinese else SYSTEM_EN).format(n=self.config.qas_num)
        user = (USER_ZH if chinese else USER_EN).format(title=title, content=text)
        try:
            reply = self.config.llm.chat(user, sys_messages=[{"role": "system", "content": system}],
                                         llm_config=llm_config)
        except MxRagError as exc:
            logger.warning("generate_qa: the LLM failed on %r: %s", title, exc)
            return {}
        kept = {q: p for q, p in parse_pairs(str(reply)) if grounded_passage(p, text)}
        return dict(list(kept.items())[: self.config.qas_num])


def parse_pairs(reply: str) -> list[tuple[str, str]]:
    """(question, passage) from ``Q1: ...`` blocks, each with a ``参考段落:``/``Reference:`` line."""
    pairs = []
    for block in _QUESTION.split(reply)[1:]:
        parts = _REFERENCE.split(block, maxsplit=1)
        if len(parts) != 2:
            continue
        question = " ".join(parts[0].split()).strip("*").strip()
        passage = " ".join(parts[1].split()).strip("*").strip().strip("'\"‘’“”「」")
        if question and passage:
            pairs.append((question, passage))
    return pairs


def grounded_passage(passage: str, text: str) -> bool:
    """Whether the passage is mostly taken from the text (words, or characters in Chinese)."""
    from mx_rag.evaluate.testset import grounded

    return grounded(passage, text, GROUNDING)


def truncate(text: str, tokenizer: Any, max_tokens: int) -> str:
    """The longest run of the text's first lines within ``max_tokens`` tokens; when the first line
    alone is longer, its longest prefix that fits."""

    def size(part: str) -> int:
        return len(tokenizer.encode(part))

    if size(text) <= max_tokens:
        return text
    lines = [line for line in text.split("\n") if line.strip()]
    low, high = 0, len(lines)  # the first `low` lines fit; more than `high` do not
    while low < high:
        middle = (low + high + 1) // 2
        if size("\n".join(lines[:middle])) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    if low:
        return "\n".join(lines[:low])
    first = lines[0]
    short, long = 0, len(first)
    while short < long:
        middle = (short + long + 1) // 2
        if size(first[:middle]) <= max_tokens:
            short = middle
        else:
            long = middle - 1
    return first[:short]
