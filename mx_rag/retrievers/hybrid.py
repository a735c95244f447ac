# SPDX-License-Identifier: Apache-2.0
"""Dense + keyword fusion: ``HybridRetriever`` (``FullTextRetriever`` lives in ``full_text``)."""

from __future__ import annotations

import contextvars
import dataclasses
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import PrivateAttr, field_validator

from mx_rag.retrievers.call_settings import CallSettings
from mx_rag.retrievers.full_text_retriever import FullTextRetriever, full_text_documents
from mx_rag.retrievers.fusion import RRF_K, reciprocal_rank_fusion
from mx_rag.retrievers.retriever import Retriever
from mx_rag.utils.checks import check_int, check_number, check_str
from mx_rag.utils.common import MAX_TOP_K, TEXT_MAX_LEN
from mx_rag.utils.tracing import stage

__all__ = ["FullTextRetriever", "HybridRetriever"]


# The defaults were measured (bench/retrieval_defaults.py, docs/benchmarks.md "Retrieval defaults"):
# with multilingual-e5-small at k=5, dense ranks counted twice, 20 candidates a side and one subject
# link find 0.925 of HotpotQA's supporting paragraphs (equal weights, 10 a side: 0.885; dense alone
# 0.87), 0.628 on MuSiQue and 28 of 30 Chinese questions.
DENSE_WEIGHT = 2.0
FETCH_PER_K = 4  # fetch_k = 4k when not given
SUBJECT_LINKS = 1
# Threads that run keyword searches beside the calling thread's dense search (FAISS and SQLite
# release the GIL while they search). A question whose keyword search has not started by the time
# its dense side is done runs it itself, so a busy pool never makes a question wait. Where this
# retriever's last keyword search took less than BESIDE_FROM_S, the next one runs in the caller's
# thread too: handing it over costs about half a millisecond (4,000 chunks: 3.0 against 2.5 ms).
KEYWORD_THREADS = 8
BESIDE_FROM_S = 0.005
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _keyword_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=KEYWORD_THREADS, thread_name_prefix="mx_rag-keyword")
        return _pool


def _forget_pool() -> None:  # a forked child has none of its parent's threads
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


class HybridRetriever(Retriever):
    """Dense retrieval and keyword retrieval fused by reciprocal rank fusion: the product's default
    retrieval (``mxrag ask``, the server, ``LocalKnowledge.retriever()``).

    All parameters of ``Retriever``, plus ``fetch_k`` (candidates taken from each side, default
    ``4 * k``), ``rrf_k`` (the fusion constant, default 60) and ``dense_weight`` (how much more a
    dense rank counts than a keyword rank, in [0.1, 10], default 2). ``subject_links`` follows
    the fused ranking and defaults to 1 here (0 in ``Retriever``). The defaults are measured:
    see ``DENSE_WEIGHT``. Usable anywhere a ``Retriever`` goes; documents carry ``rrf_score``.
    ``invoke`` takes ``k``, ``score_threshold`` (dense side only) and ``filter_dict`` for one call.
    The keyword search runs on a pool thread while the calling thread runs the dense one (where
    the last one took 5 ms or more: smaller knowledge bases search both in the caller's thread).

    Example:
        >>> HybridRetriever(vector_store=vs, document_store=ds, embed_func=emb.embed_documents, k=5)  # doctest: +SKIP
    """

    fetch_k: int | None = None
    rrf_k: int = RRF_K
    dense_weight: float = DENSE_WEIGHT
    subject_links: int = SUBJECT_LINKS
    _keyword_s: float = PrivateAttr(default=math.inf)  # the last keyword search's seconds (none yet: beside)

    @field_validator("fetch_k", mode="before")
    @classmethod
    def _check_fetch_k(cls, value: Any) -> int | None:
        return None if value is None else check_int("fetch_k", value, 1, MAX_TOP_K)

    @field_validator("rrf_k", mode="before")
    @classmethod
    def _check_rrf_k(cls, value: Any) -> int:
        return check_int("rrf_k", value, 1, 10_000)

    @field_validator("dense_weight", mode="before")
    @classmethod
    def _check_dense_weight(cls, value: Any) -> float:
        return check_number("dense_weight", value, 0.1, 10.0)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        settings = self._call_settings(kwargs)
        candidates = dataclasses.replace(settings, k=self.fetch_k or min(FETCH_PER_K * settings.k, MAX_TOP_K))
        if self._keyword_s < BESIDE_FROM_S:
            dense_docs = self._dense_documents(query, candidates)
            keyword_docs = self._keyword_documents(query, candidates)
        else:
            keyword = _keyword_pool().submit(contextvars.copy_context().run, self._keyword_documents, query,
                                             candidates)
            try:
                dense_docs = self._dense_documents(query, candidates)
            except BaseException:
                keyword.cancel()
                raise
            keyword_docs = self._keyword_documents(query, candidates) if keyword.cancel() else keyword.result()
        with stage("query.fusion"):
            fused = reciprocal_rank_fusion([dense_docs, keyword_docs], k=self.rrf_k, weights=(self.dense_weight, 1.0))
        return self._with_subjects(fused, settings)[: settings.k]

    def _keyword_documents(self, query: str, candidates: CallSettings) -> list[Document]:
        start = time.perf_counter()
        with stage("query.keyword_search", k=candidates.k):
            found = full_text_documents(self.document_store, query, candidates)
        self._keyword_s = time.perf_counter() - start
        return found
