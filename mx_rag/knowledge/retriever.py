# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeRetriever``: any mx_rag retriever, limited to one knowledge base's chunks.

Several knowledge bases may share one vector store and one chunk store (the seeds' wiring: one
``MindFAISS`` and one ``SQLiteDocstore`` for every user). A plain retriever then searches all of
them unless its caller passes the right ``filter_dict``. This one is scoped by construction:
every call passes the wrapped retriever a ``filter_dict`` of the documents that are ready in the
knowledge base at that moment (within the call's own ``filter_dict``, if any), so documents
added or deleted since, by this process or another, are followed. Build it with
``KnowledgeDB.as_retriever`` (dense) or ``KnowledgeDB.scoped(retriever)`` (any retriever that
takes a per-call ``filter_dict``: ``Retriever``, ``HybridRetriever``, ``FullTextRetriever``,
``MultiQueryRetriever``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr, field_validator

from mx_rag.retrievers.call_settings import CallSettingsRetriever, check_filter_dict, check_k
from mx_rag.storage.validation import DocumentIds
from mx_rag.utils.validated import callable_field

__all__ = ["KnowledgeRetriever"]


class KnowledgeRetriever(CallSettingsRetriever):
    """``retriever``, searching only the documents ``document_ids()`` returns at each call.

    Args:
        retriever: an mx_rag retriever that honours a per-call ``filter_dict``.
        document_ids: returns the ids of the documents that may be returned.
        k: documents per call; None leaves it to the wrapped retriever.
        generation: returns a number that changes whenever ``document_ids()`` may (the registry's
            ``KnowledgeStore.generation``); with it the ids are read again only after a change and
            passed on as one unchanging ``DocumentIds``, whose id arrays the stores keep. None reads
            them at every call.

    ``invoke`` takes the wrapped retriever's per-call settings (``k``, ``score_threshold``,
    ``filter_dict``); a ``filter_dict`` can only narrow the knowledge base, never widen it.
    """

    retriever: BaseRetriever
    document_ids: Callable[[], list[int]]
    k: int | None = None
    generation: Callable[[], int] | None = None
    _cached: tuple[int, DocumentIds] | None = PrivateAttr(default=None)

    @field_validator("k", mode="before")
    @classmethod
    def _check_k(cls, value: Any) -> int | None:  # replaces the base's check: None is allowed
        return None if value is None else check_k(value)

    _check_document_ids = callable_field("document_ids", "a callable returning a list of document ids")

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        allowed = self._allowed()
        given = check_filter_dict(kwargs.pop("filter_dict", None)).get("document_id")
        ids = allowed if given is None else sorted(allowed.members.intersection(given))
        if self.k is not None:
            kwargs.setdefault("k", self.k)
        return self.retriever.invoke(query, filter_dict={"document_id": ids}, **kwargs)

    def _allowed(self) -> DocumentIds:
        if self.generation is None:
            ids = self.document_ids()
            return ids if isinstance(ids, DocumentIds) else DocumentIds(ids)
        generation = self.generation()  # read first: a change after it makes the next call read again
        cached = self._cached
        if cached is None or cached[0] != generation:
            cached = self._cached = (generation, DocumentIds(self.document_ids()))
        return cached[1]
