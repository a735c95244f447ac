# SPDX-License-Identifier: Apache-2.0
"""``MultiQueryRetriever``: the LLM rewrites the question; every version is retrieved in parallel."""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import BaseOutputParser
from langchain_core.prompts import PromptTemplate
from pydantic import Field, field_validator

from mx_rag.errors import RemoteError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.openai_wire import TRUNCATION_MARK
from mx_rag.llm.protocol import ChatLLM, chat_llm
from mx_rag.retrievers.fusion import reciprocal_rank_fusion, unique
from mx_rag.retrievers.retriever import Retriever
from mx_rag.utils.checks import check_str
from mx_rag.utils.common import TEXT_MAX_LEN
from mx_rag.utils.text import has_han

__all__ = ["DEFAULT_QUERY_PROMPT_CH", "DEFAULT_QUERY_PROMPT_EN", "DefaultOutputParser", "MultiQueryRetriever"]

logger = logging.getLogger(__name__)

DEFAULT_QUERY_PROMPT_CH = PromptTemplate(
    input_variables=["question"],
    template=(
        "你是一个AI语言模型助手。请从不同角度把用户的原始问题改写成三个问题，"
        "帮助检索到更全面的资料。用中文回答，每个问题单独一行，并用从1开始的数字编号。\n"
        "改写示例：\n"
        "原始问题：能介绍一下爱因斯坦吗？\n"
        "改写后的三个问题：\n"
        "1. 爱因斯坦的生平经历和主要科学成就有哪些？\n"
        "2. 爱因斯坦对相对论和其他物理领域有哪些重要贡献？\n"
        "3. 爱因斯坦的个人生活以及他对社会的影响是什么？\n"
        "需要改写的原始问题：{question}"
    ),
)

DEFAULT_QUERY_PROMPT_EN = PromptTemplate(
    input_variables=["question"],
    template=(
        "You are an AI language model assistant. Rewrite the user's question into three questions that look at "
        "it from different angles, to help retrieve more complete information. Answer in English, one question "
        "per line, numbered from 1.\n"
        "Example question: Can you tell me about Einstein?\n"
        "Example rewrites:\n"
        "1. What were Einstein's life and main scientific achievements?\n"
        "2. What did Einstein contribute to relativity and other fields of physics?\n"
        "3. What was Einstein's personal life and his influence on society?\n"
        "Question to rewrite: {question}"
    ),
)

# "1. ...", "2、...", "3) ...", "(4) ..."; not "2024年...", "3.7 million ..." or "10000 ..."
_NUMBERED = re.compile(r"^\s*[(（]?\d{1,2}\s*[.、)）:：]\s*(?!\d)(?P<question>\S.*)$")


class DefaultOutputParser(BaseOutputParser[list[str]]):
    """Numbered lines of the LLM answer, without their numbers."""

    def parse(self, text: str) -> list[str]:
        questions = []
        for line in text.splitlines():
            match = _NUMBERED.match(line)
            if match:
                questions.append(match.group("question").strip())
        return questions


class MultiQueryRetriever(Retriever):
    """Retrieve for the question and for the LLM's rewrites of it, then merge.

    All parameters of ``Retriever`` plus:

    Args:
        llm: the ``Text2TextLLM`` (or any ``ChatLLM``, or a LangChain model) that rewrites the question.
        prompt: a ``PromptTemplate`` whose only input variable is ``question`` (template of 1 to
            1 MiB characters). By default the Chinese prompt for questions containing Chinese
            characters, else its English translation.
        parser: a LangChain output parser turning the LLM answer into questions (numbered lines).
        llm_config: generation settings of the rewrite call.
        fusion: ``"length"`` (the documented behaviour: de-duplicate, then longest documents
            first; the order says nothing about relevance, so do not cut it to a top few) or
            ``"rrf"`` (reciprocal rank fusion of the rankings, the question's own counted twice).

    The original question is always searched too; if the LLM fails, it alone is searched.
    ``invoke`` takes ``k`` (per version of the question, like the field), ``score_threshold``
    and ``filter_dict`` for one call.

    Example:
        >>> r = MultiQueryRetriever(llm=llm, vector_store=vs, document_store=ds,
        ...                         embed_func=emb.embed_documents, k=1, score_threshold=0.2)  # doctest: +SKIP
        >>> r.invoke("Describe the 2024 composition test requirements.")                   # doctest: +SKIP
    """

    llm: ChatLLM
    prompt: PromptTemplate | None = None
    parser: BaseOutputParser = Field(default_factory=DefaultOutputParser)
    llm_config: LLMParameterConfig = Field(default_factory=LLMParameterConfig)
    fusion: Literal["length", "rrf"] = "length"

    @field_validator("llm", mode="before")
    @classmethod
    def _check_llm(cls, value: Any) -> Any:
        return chat_llm("llm", value, stream=False)

    def generate_queries(self, query: str) -> list[str]:
        """The original question followed by the distinct, usable rewrites.

        Rewrites copied from the prompt's own example (small models do that) and lines cut off
        at ``max_tokens`` are dropped.
        """
        prompt = self.prompt or (DEFAULT_QUERY_PROMPT_CH if has_han(query) else DEFAULT_QUERY_PROMPT_EN)
        try:
            answer = self.llm.chat(prompt.format(question=query), role="user", llm_config=self.llm_config)
            rewrites = [q.strip() for q in self.parser.parse(answer) if isinstance(q, str) and q.strip()]
        except RemoteError as exc:
            logger.warning("question rewriting failed, searching the original question only: %s", exc)
            rewrites = []
        usable = [q for q in rewrites if q not in prompt.template and not q.endswith(TRUNCATION_MARK)]
        return list(dict.fromkeys([query, *usable]))

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        settings = self._call_settings(kwargs)  # once: every version of the question searches alike
        queries = self.generate_queries(query)
        with ThreadPoolExecutor(max_workers=min(8, len(queries)), thread_name_prefix="mx_rag-mqr") as pool:
            rankings = list(pool.map(lambda q: self._dense_documents(q, settings), queries))
        if self.fusion == "rrf":  # the question's own ranking counts twice: rewrites must not outvote it
            return reciprocal_rank_fusion([rankings[0], *rankings])
        merged = unique([doc for docs in rankings for doc in docs])
        return sorted(merged, key=lambda doc: len(doc.page_content), reverse=True)
