# SPDX-License-Identifier: Apache-2.0
"""Keyword retrieval on the document store's full-text index, and dense + keyword fusion."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, ValidationError, field_validator

from mx_rag.retrievers.fusion import RRF_K, reciprocal_rank_fusion
from mx_rag.retrievers.retriever import Retriever
from mx_rag.storage.document_store.base_storage import Docstore, document_ids_filter
from mx_rag.utils.checks import as_parameter_error, check_int, check_str
from mx_rag.utils.common import MAX_TOP_K, TEXT_MAX_LEN

__all__ = ["FullTextRetriever", "HybridRetriever"]


class FullTextRetriever(BaseRetriever):
    """BM25-style keyword search over a ``Docstore`` (SQLite FTS5 or PostgreSQL full text;
    Chinese segmented with jieba).

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
        return check_int("k", value, 1, MAX_TOP_K)

    @field_validator("filter_dict", mode="before")
    @classmethod
    def _check_filter(cls, value: Any) -> dict[str, Any]:
        document_ids_filter(value)
        return dict(value or {})

    def set_filter(self, filter_dict: dict[str, Any]) -> None:
        document_ids_filter(filter_dict)
        self.filter_dict = dict(filter_dict)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None
    ) -> list[Document]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        hits = self.document_store.full_text_search(query, top_k=self.k, filter_dict=self.filter_dict or None)
        return [hit.to_langchain(retrieval_type="sparse") for hit in hits]


class HybridRetriever(Retriever):
    """Dense retrieval and keyword retrieval fused by reciprocal rank fusion.

    All parameters of ``Retriever`` plus ``fetch_k`` (candidates taken from each side, default
    ``2 * k``) and ``rrf_k`` (the fusion constant, default 60). Usable anywhere a ``Retriever``
    goes; documents carry ``rrf_score``.

    Example:
        >>> HybridRetriever(vector_store=vs, document_store=ds, embed_func=emb.embed_documents, k=5)  # doctest: +SKIP
    """

    fetch_k: int | None = None
    rrf_k: int = RRF_K

    @field_validator("fetch_k", mode="before")
    @classmethod
    def _check_fetch_k(cls, value: Any) -> int | None:
        return None if value is None else check_int("fetch_k", value, 1, MAX_TOP_K)

    @field_validator("rrf_k", mode="before")
    @classmethod
    def _check_rrf_k(cls, value: Any) -> int:
        return check_int("rrf_k", value, 1, 10_000)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None
    ) -> list[Document]:
        fetch = self.fetch_k or min(2 * self.k, MAX_TOP_K)
        dense = self.model_copy(update={"k": fetch})
        dense_docs = Retriever._get_relevant_documents(dense, query)
        keyword = FullTextRetriever(document_store=self.document_store, k=fetch, filter_dict=self.filter_dict)
        keyword_docs = keyword.invoke(query)
        return reciprocal_rank_fusion([dense_docs, keyword_docs], k=self.rrf_k)[: self.k]
