# SPDX-License-Identifier: Apache-2.0
"""Keyword retrieval on the document store's full-text index, and dense + keyword fusion."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import ConfigDict, Field, ValidationError, field_validator

from mx_rag.retrievers.call_settings import (
    CallSettings,
    CallSettingsRetriever,
    check_filter_dict,
    check_k,
    resolve_call_settings,
)
from mx_rag.retrievers.fusion import RRF_K, reciprocal_rank_fusion
from mx_rag.retrievers.retriever import Retriever
from mx_rag.storage.document_store.base_storage import Docstore
from mx_rag.utils.checks import as_parameter_error, check_int, check_number, check_str
from mx_rag.utils.common import MAX_TOP_K, TEXT_MAX_LEN
from mx_rag.utils.tracing import stage

__all__ = ["FullTextRetriever", "HybridRetriever"]


class FullTextRetriever(CallSettingsRetriever):
    """BM25-style keyword search over a ``Docstore`` (SQLite FTS5 or PostgreSQL full text;
    Chinese segmented with jieba).

    ``invoke`` takes ``k`` and ``filter_dict`` for one call (checked like the fields).

    Example:
        >>> FullTextRetriever(document_store=ds, k=5).invoke("apt-get 安装")  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    document_store: Docstore
    k: int = 1
    filter_dict: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise as_parameter_error(exc) from exc

    @field_validator("k", mode="before")
    @classmethod
    def _check_k(cls, value: Any) -> int:
        return check_k(value)

    @field_validator("filter_dict", mode="before")
    @classmethod
    def _check_filter(cls, value: Any) -> dict[str, Any]:
        return check_filter_dict(value)

    def set_filter(self, filter_dict: dict[str, Any]) -> None:
        self.filter_dict = check_filter_dict(filter_dict)

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        """The fields ``k`` and ``filter_dict``, overridden by the call's keywords."""
        defaults = CallSettings(k=self.k, filter_dict=self.filter_dict)
        return resolve_call_settings(type(self).__name__, kwargs, defaults, ("k", "filter_dict"))

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        return full_text_documents(self.document_store, query, self._call_settings(kwargs))


def full_text_documents(document_store: Docstore, query: str, settings: CallSettings) -> list[Document]:
    """The keyword search of ``query`` with ``settings`` (``score_threshold`` does not apply)."""
    hits = document_store.full_text_search(query, top_k=settings.k, filter_dict=settings.search_filter)
    return [hit.to_langchain(retrieval_type="sparse") for hit in hits]


# The defaults were measured (bench/retrieval_defaults.py, docs/benchmarks.md "Retrieval defaults"):
# with multilingual-e5-small at k=5, dense ranks counted twice, 20 candidates a side and one subject
# link find 0.925 of HotpotQA's supporting paragraphs (equal weights, 10 a side: 0.885; dense alone
# 0.87), 0.628 on MuSiQue and 28 of 30 Chinese questions.
DENSE_WEIGHT = 2.0
FETCH_PER_K = 4  # fetch_k = 4k when not given
SUBJECT_LINKS = 1


class HybridRetriever(Retriever):
    """Dense retrieval and keyword retrieval fused by reciprocal rank fusion: the product's default
    retrieval (``mxrag ask``, the server, ``LocalKnowledge.retriever()``).

    All parameters of ``Retriever``, plus ``fetch_k`` (candidates taken from each side, default
    ``4 * k``), ``rrf_k`` (the fusion constant, default 60) and ``dense_weight`` (how much more a
    dense rank counts than a keyword rank, in [0.1, 10], default 2). ``subject_links`` follows
    the fused ranking and defaults to 1 here (0 in ``Retriever``). The defaults are measured:
    see ``DENSE_WEIGHT``. Usable anywhere a ``Retriever`` goes; documents carry ``rrf_score``.
    ``invoke`` takes ``k``, ``score_threshold`` (dense side only) and ``filter_dict`` for one call.

    Example:
        >>> HybridRetriever(vector_store=vs, document_store=ds, embed_func=emb.embed_documents, k=5)  # doctest: +SKIP
    """

    fetch_k: int | None = None
    rrf_k: int = RRF_K
    dense_weight: float = DENSE_WEIGHT
    subject_links: int = SUBJECT_LINKS

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
        dense_docs = self._dense_documents(query, candidates)
        with stage("query.keyword_search", k=candidates.k):
            keyword_docs = full_text_documents(self.document_store, query, candidates)
        with stage("query.fusion"):
            fused = reciprocal_rank_fusion([dense_docs, keyword_docs], k=self.rrf_k, weights=(self.dense_weight, 1.0))
        return self._with_subjects(fused, settings)[: settings.k]
