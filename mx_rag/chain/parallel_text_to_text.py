# SPDX-License-Identifier: Apache-2.0
"""``ParallelText2TextChain``: retrieval runs while the LLM server pre-processes the prompt prefix.

How it saves time: the user message is laid out stable part first (instruction and question,
then the retrieved documents). While the retriever works, a one-token request carrying the
system messages and that stable part goes to the LLM server, whose prefix cache (llama.cpp,
vLLM, SGLang, MindIE) then holds it. The final request repeats the prefix and adds the
documents, so the server only processes the documents. The answer uses the same documents as
``SingleText2TextChain``; nothing is ever answered without them.

Each query uses its own threads and futures: nothing is shared between queries. A failed or slow
warm-up is ignored (it only costs the saving).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.chain.single_text_to_text import (
    DEFAULT_RAG_PROMPT,
    DOCUMENT_SEPARATOR,
    SingleText2TextChain,
    UserContentBuilder,
)
from mx_rag.errors import MxRagError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.protocol import LLMLike
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.checks import check_number

__all__ = ["FIRST_RAG_PROMPT", "NEXT_RAG_PROMPT", "ParallelText2TextChain"]

logger = logging.getLogger(__name__)

FIRST_RAG_PROMPT = DEFAULT_RAG_PROMPT
NEXT_RAG_PROMPT = "下面是已知信息："


def _parallel_user_content_builder(query: str, docs: list[Document], prompt: str) -> str:
    """Stable part first: ``prompt ⏎⏎ query``, then ``⏎⏎ NEXT_RAG_PROMPT ⏎ doc1 ⏎⏎ … docN``."""
    head = f"{prompt}{DOCUMENT_SEPARATOR}{query}" if prompt else query
    if not docs:
        return head
    return f"{head}{DOCUMENT_SEPARATOR}{NEXT_RAG_PROMPT}\n" + DOCUMENT_SEPARATOR.join(d.page_content for d in docs)


def _stable_prefix(query: str, prompt: str) -> str:
    return _parallel_user_content_builder(query, [], prompt)


class ParallelText2TextChain(SingleText2TextChain):
    """RAG with retrieval overlapped with the LLM's prefill of the prompt prefix.

    Same parameters as ``SingleText2TextChain``, plus ``warmup_timeout`` (seconds to wait for the
    warm-up request once retrieval is done, default 5). The default ``user_content_builder``
    puts the instruction and question before the documents (so they form a cacheable prefix); a
    custom builder is used as given, and the warm-up then covers the system messages only.

    ``query`` returns ``{"query", "prompt", "result", "source_documents"}`` (``prompt`` repeats
    the question, as the seed documents; ``query`` is what the original returned), or an iterator
    of such dicts when ``llm_config.stream`` is True.

    Example:
        >>> chain = ParallelText2TextChain(llm=llm, retriever=retriever)   # doctest: +SKIP
        >>> chain.query(text="What is mxVision?")["result"]                # doctest: +SKIP
    """

    def __init__(
        self,
        llm: LLMLike,
        retriever: BaseRetriever,
        reranker: Reranker | None = None,
        prompt: str = FIRST_RAG_PROMPT,
        sys_messages: list[dict[str, Any]] | None = None,
        source: bool = True,
        user_content_builder: UserContentBuilder = _parallel_user_content_builder,
        warmup_timeout: float = 5.0,
    ) -> None:
        super().__init__(llm, retriever, reranker, prompt, sys_messages, source, user_content_builder)
        self._warmup_timeout = check_number("warmup_timeout", warmup_timeout, 0.0, 600.0)

    def _retrieve(self, text: str) -> list[Document]:
        """Retrieval, while the warm-up request prefills the prompt's stable prefix."""
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mx_rag-parallel")
        try:
            warmup = pool.submit(self._warm_up, text)
            docs = pool.submit(super()._retrieve, text).result()  # a retrieval error propagates
            self._wait_for(warmup)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # never wait on an abandoned warm-up
        return docs

    def _result(self, text: str, answer: str, sources: list[dict[str, Any]] | None) -> dict[str, Any]:
        return {**super()._result(text, answer, sources), "prompt": text}

    def _warm_up(self, text: str) -> None:
        """Send the stable prefix with ``max_tokens=1`` so the server caches its prefill."""
        prefix = _stable_prefix(text, self._prompt)
        if self._user_content_builder is not _parallel_user_content_builder:
            if not self._sys_messages:
                return
            prefix = " "  # only the system messages are known to be a shared prefix
        warm = LLMParameterConfig(max_tokens=1, temperature=0.0)
        self._llm.chat(prefix, sys_messages=self._sys_messages, role="user", llm_config=warm)

    def _wait_for(self, warmup: Future[None]) -> None:
        done, _ = wait([warmup], timeout=self._warmup_timeout)
        if not done:
            logger.info("prefix warm-up still running after %.1f s; not waiting for it", self._warmup_timeout)
            return
        error = warmup.exception()
        if isinstance(error, MxRagError):
            logger.warning("prefix warm-up failed (answering without it): %s", error)
        elif error is not None:
            raise error
