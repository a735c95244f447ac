# SPDX-License-Identifier: Apache-2.0
"""``Summary``: summarise texts with an LLM, and merge many summaries into one (map-reduce).

A text longer than the LLM should read at once is split first; ``merge_text_summarize`` packs
the summaries into groups of at most ``merge_threshold`` characters, summarises each group, and
repeats (at most 10 rounds) until one summary is left.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.prompts import PromptTemplate

from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.utils.checks import check_instance, check_int, fail
from mx_rag.utils.common import MB

__all__ = ["Summary"]

logger = logging.getLogger(__name__)

MAX_TEXTS = 1024
MAX_TOTAL_LEN = MB
MAX_ROUNDS = 10
DEFAULT_NOT_SUMMARIZE = 30
DEFAULT_MERGE_THRESHOLD = 4 * 1024
MIN_MERGE_THRESHOLD = 1024

SUMMARY_PROMPT_ZH = PromptTemplate(
    input_variables=["text"],
    template="使用简洁的语言提取以下内容的摘要，包含尽可能多的关键信息，输出只包含内容信息，请用中文回答\n\n{text}",
)
MERGE_PROMPT_ZH = PromptTemplate(
    input_variables=["text"],
    template="使用简洁的语言把下面的多个摘要提炼合并成一个摘要，包含尽可能多的关键信息，输出只包含内容信息，请用中文回答\n\n{text}",
)
SUMMARY_PROMPT_EN = PromptTemplate(
    input_variables=["text"],
    template="Summarise the following text concisely, keeping as many key facts as possible. "
    "Write only the summary, in English.\n\n{text}",
)
MERGE_PROMPT_EN = PromptTemplate(
    input_variables=["text"],
    template="Merge the following summaries into one concise summary, keeping as many key facts as possible. "
    "Write only the summary, in English.\n\n{text}",
)

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def is_chinese(texts: Sequence[str]) -> bool:
    """Whether the texts are mostly CJK: a tenth of their letters or more."""
    sample = "".join(texts)[:20000]
    letters = sum(ch.isalpha() for ch in sample)
    return letters > 0 and len(_CJK.findall(sample)) * 10 >= letters


def _check_texts(texts: Any) -> list[str]:
    if not isinstance(texts, (list, tuple)) or not 0 < len(texts) <= MAX_TEXTS:
        raise fail("texts", texts, f"a list of 1 to {MAX_TEXTS} strings")
    if not all(isinstance(text, str) for text in texts):
        raise fail("texts", texts, "a list of strings")
    total = sum(len(text) for text in texts)
    if not 0 < total <= MAX_TOTAL_LEN:
        raise fail("texts", f"<{total} characters in all>", f"strings of (0, {MAX_TOTAL_LEN}] characters in all")
    return list(texts)


def _check_prompt(prompt: Any) -> PromptTemplate:
    check_instance("prompt", prompt, PromptTemplate)
    if list(prompt.input_variables) != ["text"]:
        raise fail("prompt.input_variables", prompt.input_variables, '["text"]')
    if not 0 < len(prompt.template) <= MAX_TOTAL_LEN:
        raise fail("prompt.template", f"<{len(prompt.template)} characters>", f"(0, {MAX_TOTAL_LEN}] characters long")
    return prompt


def _groups(texts: list[str], limit: int) -> list[list[str]]:
    """Consecutive texts packed into groups of at most ``limit`` characters (a longer text is split)."""
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for text in texts:
        for piece in (text[i:i + limit] for i in range(0, len(text), limit)) if len(text) > limit else [text]:
            if current and size + len(piece) + 2 > limit:
                groups.append(current)
                current, size = [], 0
            current.append(piece)
            size += len(piece) + 2
    if current:
        groups.append(current)
    return groups


class Summary:
    """Summarise texts with a ``Text2TextLLM``.

    Args:
        llm: the chat model.
        llm_config: generation settings; default temperature 0.5, top_p 0.95.

    The default prompts follow the texts' language: the documented Chinese prompts for Chinese
    text, their English equivalents otherwise (pass ``prompt`` to choose).

    Example:
        >>> from mx_rag.summary import Summary
        >>> # summary = Summary(llm=llm)
        >>> # parts = summary.summarize([chunk.page_content for chunk in chunks])
        >>> # print(summary.merge_text_summarize(parts))
    """

    def __init__(self, llm: Text2TextLLM, llm_config: LLMParameterConfig | None = None) -> None:
        self.llm = check_instance("llm", llm, Text2TextLLM)
        if llm_config is None:
            llm_config = LLMParameterConfig(temperature=0.5, top_p=0.95)
        self.llm_config = check_instance("llm_config", llm_config, LLMParameterConfig)

    def summarize(
        self,
        texts: list[str],
        not_summarize_threshold: int = DEFAULT_NOT_SUMMARIZE,
        prompt: PromptTemplate | None = None,
    ) -> list[str]:
        """One summary per text; a text of at most ``not_summarize_threshold`` characters is its own summary.

        Args:
            texts: 1 to 1024 strings, (0, 1 MiB] characters in all.
            not_summarize_threshold: in [1, 1048576]. Default 30.
            prompt: a ``PromptTemplate`` whose only variable is ``text``.
        """
        texts = _check_texts(texts)
        threshold = check_int("not_summarize_threshold", not_summarize_threshold, 1, MAX_TOTAL_LEN)
        if prompt is None:
            prompt = SUMMARY_PROMPT_ZH if is_chinese(texts) else SUMMARY_PROMPT_EN
        prompt = _check_prompt(prompt)
        return [self._summarize_one(text, threshold, prompt) for text in texts]

    def merge_text_summarize(
        self,
        texts: list[str],
        merge_threshold: int = DEFAULT_MERGE_THRESHOLD,
        not_summarize_threshold: int = DEFAULT_NOT_SUMMARIZE,
        prompt: PromptTemplate | None = None,
    ) -> str:
        """Merge summaries into one: summarise groups of at most ``merge_threshold`` characters, repeat.

        Args:
            texts: 1 to 1024 summaries, (0, 1 MiB] characters in all.
            merge_threshold: characters sent to the LLM at once, in [1024, 1048576], more than
                ``not_summarize_threshold``. Default 4096.
            not_summarize_threshold: in [1, 1048576]. Default 30.
            prompt: a ``PromptTemplate`` whose only variable is ``text``.

        Returns:
            The final summary (after at most 10 rounds; what is left is joined if the LLM's
            summaries never fit one group).
        """
        texts = _check_texts(texts)
        limit = check_int("merge_threshold", merge_threshold, MIN_MERGE_THRESHOLD, MAX_TOTAL_LEN)
        threshold = check_int("not_summarize_threshold", not_summarize_threshold, 1, MAX_TOTAL_LEN)
        if limit <= threshold:
            raise fail("merge_threshold", merge_threshold, f"more than not_summarize_threshold ({threshold})")
        if prompt is None:
            prompt = MERGE_PROMPT_ZH if is_chinese(texts) else MERGE_PROMPT_EN
        prompt = _check_prompt(prompt)
        for _ in range(MAX_ROUNDS):
            groups = _groups(texts, limit)
            texts = [self._summarize_one("\n\n".join(group), threshold, prompt) for group in groups]
            if len(texts) == 1:
                return texts[0]
        logger.warning("merge_text_summarize: %d summaries left after %d rounds; joining them", len(texts), MAX_ROUNDS)
        return "\n\n".join(texts)

    def _summarize_one(self, text: str, threshold: int, prompt: PromptTemplate) -> str:
        if len(text) <= threshold:
            return text
        answer = self.llm.chat(prompt.format(text=text), llm_config=self.llm_config).strip()
        if not answer:
            logger.warning("the LLM gave an empty summary of a %d-character text; keeping the text", len(text))
            return text
        return answer
