# SPDX-License-Identifier: Apache-2.0
"""Keyword retrieval on the document store's full-text index: ``FullTextRetriever``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import Field

from mx_rag.retrievers.call_settings import CallSettings, CallSettingsRetriever, resolve_call_settings
from mx_rag.storage.document_store.base_storage import Docstore
from mx_rag.utils.checks import check_str
from mx_rag.utils.common import TEXT_MAX_LEN

__all__ = ["FullTextRetriever", "full_text_documents"]


class FullTextRetriever(CallSettingsRetriever):
    """BM25-style keyword search over a ``Docstore`` (SQLite FTS5 or PostgreSQL full text;
    Chinese segmented with jieba).

    ``invoke`` takes ``k`` and ``filter_dict`` for one call (checked like the fields).

    Example:
        >>> FullTextRetriever(document_store=ds, k=5).invoke("apt-get 安装")  # doctest: +SKIP
    """

    document_store: Docstore
    k: int = 1
    filter_dict: dict[str, Any] = Field(default_factory=dict)

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
