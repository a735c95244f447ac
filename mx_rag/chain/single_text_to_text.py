# SPDX-License-Identifier: Apache-2.0
"""``SingleText2TextChain``: retrieve, optionally rerank, then ask the LLM."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.chain.base import Chain
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.openai_wire import check_sys_messages
from mx_rag.llm.protocol import LLMLike, chat_deltas, chat_llm
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.checks import check_bool, check_instance, check_str, fail
from mx_rag.utils.common import LLM_TEXT_MAX_LEN, MAX_PROMPT_LENGTH, TEXT_MAX_LEN
from mx_rag.utils.lazy import lazy_exports
from mx_rag.utils.text import has_han
from mx_rag.utils.tracing import stage

__all__ = ["DEFAULT_RAG_PROMPT", "SingleText2TextChain", "_user_content_builder", "question_first_content"]

DEFAULT_RAG_PROMPT = (
    "根据上述已知信息，简洁和专业地回答用户的问题。如果无法从已知信息中得到答案，请根据自身经验做出回答"
)
DOCUMENT_SEPARATOR = "\n\n"

UserContentBuilder = Callable[..., str]


def default_chain_config() -> LLMParameterConfig:
    """The chains' documented default generation settings (temperature 0.5, top_p 0.95)."""
    return LLMParameterConfig(temperature=0.5, top_p=0.95)


def _user_content_builder(query: str, docs: list[Document], prompt: str) -> str:
    """The documented default: ``doc1 ⏎⏎ … docN ⏎⏎ prompt ⏎⏎ query`` (just the query without docs)."""
    final_prompt = ""
    if docs:
        if prompt != "":
            last = docs[-1]
            last.page_content = f"{last.page_content}{DOCUMENT_SEPARATOR}{prompt}"
            docs[-1] = last
        final_prompt = DOCUMENT_SEPARATOR.join(doc.page_content for doc in docs)
    if final_prompt != "":
        final_prompt += DOCUMENT_SEPARATOR
    return final_prompt + query


def question_first_content(query: str, docs: list[Document], prompt: str) -> str:
    """The served layout: ``Question: q ⏎⏎ doc1 ⏎⏎ … docN ⏎⏎ prompt ⏎⏎ Question: q`` (``问题：`` for Chinese).

    A small model reads the passages with the question in mind: the embedded 1.5B answered
    ``make run``'s question from the same five passages right this way and wrong without the
    question first (docs/benchmarks.md, "The question before the passages"). Without documents it is
    the query alone, as the default.

    >>> print(question_first_content("Why?", [Document(page_content="Because.")], "Answer."))
    Question: Why?
    <BLANKLINE>
    Because.
    <BLANKLINE>
    Answer.
    <BLANKLINE>
    Question: Why?
    """
    if not docs:
        return query
    question = ("问题：" if has_han(query) else "Question: ") + query
    parts = [question, *(doc.page_content for doc in docs), *([prompt] if prompt else []), question]
    return DOCUMENT_SEPARATOR.join(parts)


def source_documents(docs: list[Document]) -> list[dict[str, Any]]:
    return [{"metadata": dict(doc.metadata), "page_content": doc.page_content} for doc in docs]


class SingleText2TextChain(Chain):
    """Single-turn RAG: retrieve documents, rerank them, and answer with the LLM.

    Args:
        llm: a ``Text2TextLLM``, any ``ChatLLM`` or a LangChain chat or text model (see
            ``mx_rag.llm.protocol``).
        retriever: any LangChain retriever (``Retriever``, ``MultiQueryRetriever``, ...).
        reranker: optional ``Reranker`` applied to the retrieved documents.
        prompt: instruction added after the documents, 1 to 1 MiB characters.
        sys_messages: messages sent before the user turn (at most 16; never modified).
        source: include ``source_documents`` in the result. Default True.
        user_content_builder: ``(query, docs, prompt) -> str`` building the user message (at
            most 4 MiB); it gets a copy of the documents.

    Example:
        >>> chain = SingleText2TextChain(llm=llm, retriever=retriever)            # doctest: +SKIP
        >>> chain.query("What does mxVision contain?")["result"]                   # doctest: +SKIP
    """

    def __init__(
        self,
        llm: LLMLike,
        retriever: BaseRetriever,
        reranker: Reranker | None = None,
        prompt: str = DEFAULT_RAG_PROMPT,
        sys_messages: list[dict[str, Any]] | None = None,
        source: bool = True,
        user_content_builder: UserContentBuilder = _user_content_builder,
    ) -> None:
        self._llm = chat_llm("llm", llm)
        self._retriever = check_instance("retriever", retriever, BaseRetriever)
        self._reranker = None if reranker is None else check_instance("reranker", reranker, Reranker)
        self._prompt = check_str("prompt", prompt, 1, MAX_PROMPT_LENGTH)
        self._sys_messages = copy.deepcopy(check_sys_messages(sys_messages))
        self._source = check_bool("source", source)
        if not callable(user_content_builder):
            raise fail("user_content_builder", user_content_builder, "a callable (query, docs, prompt) -> str")
        self._user_content_builder = user_content_builder

    def query(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """Answer ``text``: ``{"query", "result", "source_documents"}``, or an iterator of such
        dicts (each holding the answer so far) when ``llm_config.stream`` is True."""
        config = self._check_query(text, llm_config)
        content, sources = self._prepare(text)
        if config.stream:
            return self._growing(text, sources, self._deltas(text, content, sources, config))
        with stage("query.llm"):
            answer = self._llm.chat(content, sys_messages=self._sys_messages, role="user", llm_config=config)
        return self._result(text, answer, sources)

    def stream(self, text: str, llm_config: LLMParameterConfig | None = None) -> Iterator[tuple[str, Any]]:
        """The answer as the LLM sends it: ``("delta", text)`` items, then ``("result", result)``
        with the whole result as ``query`` returns it. Retrieval runs before the first item."""
        config = self._check_query(text, llm_config).replace(stream=True)
        content, sources = self._prepare(text)
        return self._deltas(text, content, sources, config)

    # -- steps -----------------------------------------------------------------------------------

    def _prepare(self, text: str) -> tuple[str, list[dict[str, Any]] | None]:
        """The user message and the result's sources (None without ``source``)."""
        docs = self._retrieve(text)
        return self._build_content(text, docs), source_documents(docs) if self._source else None

    # -- steps -----------------------------------------------------------------------------------

    @staticmethod
    def _check_query(text: Any, llm_config: Any) -> LLMParameterConfig:
        check_str("text", text, 1, TEXT_MAX_LEN)
        if llm_config is None:
            return default_chain_config()
        return check_instance("llm_config", llm_config, LLMParameterConfig)

    def _retrieve(self, text: str) -> list[Document]:
        docs = list(self._retriever.invoke(text))
        if self._reranker is not None and docs:
            with stage("query.rerank", documents=len(docs)):
                scores = self._reranker.rerank(text, [doc.page_content for doc in docs])
                docs = self._reranker.rerank_top_k(docs, scores)
        return docs

    def _build_content(self, text: str, docs: list[Document]) -> str:
        with stage("query.prompt"):
            content = self._user_content_builder(text, copy.deepcopy(docs), self._prompt)
        if not isinstance(content, str) or not 0 < len(content) <= LLM_TEXT_MAX_LEN:
            raise fail("user_content_builder result", content, f"a str of 1 to {LLM_TEXT_MAX_LEN} characters")
        return content

    def _deltas(
        self, text: str, content: str, sources: list[dict[str, Any]] | None, config: LLMParameterConfig
    ) -> Iterator[tuple[str, Any]]:
        answer = ""
        with stage("query.llm"), contextlib.ExitStack() as first_token:
            first_token.enter_context(stage("query.llm_first_token"))
            for delta in chat_deltas(self._llm, content, self._sys_messages, "user", config):
                first_token.close()  # ends that span at the first token; later calls do nothing
                answer += delta
                yield "delta", delta
        yield "result", self._result(text, answer, sources)

    def _growing(self, text: str, sources: list[dict[str, Any]] | None,
                 events: Iterator[tuple[str, Any]]) -> Iterator[dict[str, Any]]:
        """``query``'s streamed shape: a result per delta, holding the answer so far."""
        answer = ""
        for kind, value in events:
            if kind == "delta":
                answer += value
                yield self._result(text, answer, sources)

    def _result(self, text: str, answer: str, sources: list[dict[str, Any]] | None) -> dict[str, Any]:
        result: dict[str, Any] = {"query": text, "result": answer}
        if sources is not None:
            result["source_documents"] = sources
        return result


# GraphRagText2TextChain lives in graph_text_to_text (which imports this module); the
# documented import path is this module.
__getattr__, __dir__ = lazy_exports(globals(), {"GraphRagText2TextChain": "mx_rag.chain.graph_text_to_text"})
