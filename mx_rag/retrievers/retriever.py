# SPDX-License-Identifier: Apache-2.0
"""``Retriever``: dense retrieval over a vector store and a chunk store (a LangChain retriever)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import Field, field_validator

from mx_rag.retrievers.call_settings import CallSettings, CallSettingsRetriever, resolve_call_settings
from mx_rag.retrievers.full_text_retriever import full_text_documents
from mx_rag.retrievers.fusion import document_key
from mx_rag.retrievers.subject_links import MAX_SUBJECT_LINKS, SUBJECT_HITS, subject_documents
from mx_rag.storage.document_store.base_storage import Docstore
from mx_rag.storage.vectorstore.vectorstore import VectorStore, as_matrix
from mx_rag.utils.checks import check_int, check_str
from mx_rag.utils.common import TEXT_MAX_LEN
from mx_rag.utils.tracing import stage
from mx_rag.utils.validated import callable_field

__all__ = ["Retriever", "query_embedder", "query_vector"]

logger = logging.getLogger(__name__)


class Retriever(CallSettingsRetriever):
    """Embed the query, search the vector store, fetch the chunks in one docstore query.

    Args:
        vector_store: any ``VectorStore``.
        document_store: any ``Docstore`` holding the chunks whose ids the vectors carry.
        embed_func: ``texts -> vectors`` (e.g. ``TextEmbedding(...).embed_documents``). The
            question is embedded as a *query*: when ``embed_func`` is the ``embed_documents``
            method of an object that also has ``embed_query`` (every mx_rag and LangChain
            embedding), ``embed_query(question)`` is called, so models with query and passage
            prompts (multilingual-e5: ``"query: "`` / ``"passage: "``) get the query one. Any
            other callable is called with a one-element list.
        k: documents to return, in [1, 10000]. Default 1.
        score_threshold: keep hits with a scaled similarity at least this, in [0, 1]; None keeps all.
        filter_dict: ``{"document_id": [ids]}`` restricts the search to those documents.
        subject_links: follow the capitalised names of the first ``subject_links`` results to
            the chunks that open with them (found by the document store's keyword search), which
            then come next (``mx_rag.retrievers.subject_links``), in [0, 100]. Default 0: off.

    Each Document's metadata is a copy of the stored metadata plus ``score`` and
    ``retrieval_type`` (``"dense"``); stored records are never modified.

    ``invoke`` takes ``k``, ``score_threshold`` and ``filter_dict`` for one call (checked like
    the fields). Subclasses resolve them with ``_call_settings(kwargs)``; override it to narrow
    the filter of every call.

    Example:
        >>> r = Retriever(vector_store=vs, document_store=ds, embed_func=emb.embed_documents,
        ...               k=3, score_threshold=0.5)               # doctest: +SKIP
        >>> r.invoke("What is in the manual?")                    # doctest: +SKIP
        >>> r.invoke("What is in the manual?", k=10, filter_dict={"document_id": [7]})  # doctest: +SKIP
    """

    vector_store: VectorStore
    document_store: Docstore
    embed_func: Callable[[list[str]], Any]
    k: int = 1
    score_threshold: float | None = None
    filter_dict: dict[str, Any] = Field(default_factory=dict)
    subject_links: int = 0

    @field_validator("subject_links", mode="before")
    @classmethod
    def _check_subject_links(cls, value: Any) -> int:
        return check_int("subject_links", value, 0, MAX_SUBJECT_LINKS)

    _check_embed = callable_field("embed_func", "a callable taking a list of texts")

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        """The settings of one call: the fields, overridden by the call's keywords.

        Override it to narrow the filter of every call (e.g. to one knowledge base).
        """
        defaults = CallSettings(k=self.k, score_threshold=self.score_threshold, filter_dict=self.filter_dict)
        return resolve_call_settings(type(self).__name__, kwargs, defaults)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None, **kwargs: Any
    ) -> list[Document]:
        check_str("query", query, 1, TEXT_MAX_LEN)
        settings = self._call_settings(kwargs)
        return self._with_subjects(self._dense_documents(query, settings), settings)[: settings.k]

    def _with_subjects(self, docs: list[Document], settings: CallSettings) -> list[Document]:
        """``docs`` with the subject links of their first ``subject_links`` (none when 0)."""
        if not self.subject_links or not docs:
            return docs
        hits = dataclasses.replace(settings, k=SUBJECT_HITS)
        with stage("query.subject_links"):
            return subject_documents(docs, self.subject_links, document_key,
                                     lambda name: full_text_documents(self.document_store, name, hits))  # fmt: skip

    def _dense_documents(self, query: str, settings: CallSettings) -> list[Document]:
        """The dense search of ``query`` with ``settings`` (the core of every call)."""
        check_str("query", query, 1, TEXT_MAX_LEN)
        with stage("query.embed"):
            vector = query_vector(self.embed_func, query)
        with stage("query.vector_search", k=settings.k):
            if settings.score_threshold is None:
                scores, ids = self.vector_store.search(vector, k=settings.k, filter_dict=settings.search_filter)
            else:
                scores, ids = self.vector_store.search_with_threshold(
                    vector, k=settings.k, threshold=settings.score_threshold, filter_dict=settings.search_filter
                )
            hits = [(s, i) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]
            chunks = self.document_store.search_many([i for _, i in hits])
        docs = [chunks[i].to_langchain(score=float(s), retrieval_type="dense") for s, i in hits if i in chunks]
        if len(docs) < len(hits):
            logger.warning("%d vector hits have no chunk in the document store", len(hits) - len(docs))
        return docs[: settings.k]


def query_embedder(embed_func: Callable[..., Any]) -> Callable[[str], Any] | None:
    """The ``embed_query`` of the object whose ``embed_documents`` method ``embed_func`` is, or None.

    The seeds pass ``emb.embed_documents`` as the retriever's ``embed_func``; a question must
    still be embedded as a query (models such as multilingual-e5 prefix queries and passages
    differently). A plain function, a lambda or any other method gives None.
    """
    owner = getattr(embed_func, "__self__", None)
    method = getattr(embed_func, "__func__", None)
    if owner is None or getattr(method, "__name__", None) != "embed_documents":
        return None
    embed_query = getattr(owner, "embed_query", None)
    return embed_query if callable(embed_query) else None


def query_vector(embed_func: Callable[..., Any], query: str) -> Any:
    """``query`` as a 1-row matrix: through ``query_embedder(embed_func)`` when there is one,
    else ``embed_func([query])``."""
    embed_query = query_embedder(embed_func)
    if embed_query is not None:
        return as_matrix("embed_query result", [embed_query(query)])
    return as_matrix("embed_func result", embed_func([query]))[:1]
