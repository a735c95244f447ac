# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeRetriever``: a ``Retriever`` that only ever returns one knowledge base's chunks.

Several knowledge bases may share one vector store and one chunk store (the seeds' wiring: one
``MindFAISS`` and one ``SQLiteDocstore`` for every user). A plain ``Retriever`` then searches all
of them unless its caller passes the right ``filter_dict``. This one is scoped by construction:
every call searches only the documents that are ready in its knowledge base at that moment
(within any ``filter_dict`` of the call), so documents added or deleted since, by this process or
another, are followed. Build it with ``KnowledgeDB.as_retriever``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import field_validator

from mx_rag.retrievers.call_settings import CallSettings
from mx_rag.retrievers.retriever import Retriever
from mx_rag.utils.checks import fail

__all__ = ["KnowledgeRetriever"]


class KnowledgeRetriever(Retriever):
    """A ``Retriever`` whose every search is limited to ``document_ids()``.

    Args:
        document_ids: returns the ids of the documents that may be returned (read on each call).
        The other arguments are ``Retriever``'s.
    """

    document_ids: Callable[[], list[int]]

    @field_validator("document_ids", mode="before")
    @classmethod
    def _check_document_ids(cls, value: Any) -> Any:
        if not callable(value):
            raise fail("document_ids", value, "a callable returning a list of document ids")
        return value

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        return super()._call_settings(kwargs).narrowed_to(self.document_ids())
