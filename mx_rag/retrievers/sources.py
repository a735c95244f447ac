# SPDX-License-Identifier: Apache-2.0
"""Document sources: anything that answers ``retrieve(query, top_k)`` with ``RetrievedDocument``s.

``RetrieverSource`` adapts any LangChain retriever (``Retriever``, ``KnowledgeRetriever``, a graph
retriever, ...) to that protocol; CoRAG reads knowledge bases through it, the retrieval servers
serve it, and ``mx_rag.corag.retrieval_api.RetrievalApiClient`` is the same protocol over HTTP.

A source that fails raises (``RetrievalError``, or the ``MxRagError`` its retriever raised); it
never answers ``[]`` for a failure. Whoever calls it decides what a failure means: the CoRAG
agent continues without documents and counts the failure (its ``on_retrieval_error`` policy),
the retrieval server answers 5xx.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mx_rag.errors import MxRagError, RetrievalError  # RetrievalError re-exported: part of this protocol
from mx_rag.storage.validation import check_top_k
from mx_rag.utils.checks import check_instance, check_str
from mx_rag.utils.common import TEXT_MAX_LEN

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from mx_rag.retrievers.call_settings import CallSettingsRetriever

__all__ = ["DocumentSource", "RetrievalError", "RetrievedDocument", "RetrieverSource", "as_retrieval_error"]

logger = logging.getLogger(__name__)

METADATA_ID_KEYS = ("chunk_id", "id")
_ERROR_CHARS = 300


def as_retrieval_error(exc: BaseException) -> RetrievalError:
    """``exc`` itself when it is a ``RetrievalError``, else a ``RetrievalError`` naming it (chain
    it with ``raise as_retrieval_error(exc) from exc``)."""
    if isinstance(exc, RetrievalError):
        return exc
    return RetrievalError(f"{type(exc).__name__}: {short_error(exc)}")


@dataclass(frozen=True)
class RetrievedDocument:
    """One retrieved passage: its id (``"graph_chunk"`` when the source gives none) and text."""

    id: str
    text: str


@runtime_checkable
class DocumentSource(Protocol):
    """Anything that answers ``retrieve(query, top_k)``: the retrieval-API client, or an adapter
    over a ``Retriever`` / knowledge base. A failure raises (``RetrievalError`` or another
    ``MxRagError``); ``[]`` means the source found nothing."""

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]: ...


def id_text(value: Any) -> str | None:
    """An id as text (str, int or float; not bool), or None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value)
    return text if text else None


def check_query(query: Any) -> str:
    return check_str("query", query, 1, TEXT_MAX_LEN)


def short_error(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + "..."


def _base_retriever_class() -> type:
    from langchain_core.retrievers import BaseRetriever

    return BaseRetriever


def _call_settings_class() -> type[CallSettingsRetriever]:
    from mx_rag.retrievers.call_settings import CallSettingsRetriever

    return CallSettingsRetriever


def _document_id(doc: Document) -> str:
    for key in METADATA_ID_KEYS:
        found = id_text(doc.metadata.get(key)) if isinstance(doc.metadata, dict) else None
        if found is not None:
            return found
    own = id_text(getattr(doc, "id", None))
    if own is not None:
        return own
    return hashlib.sha256(doc.page_content.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


class RetrieverSource:
    """A ``DocumentSource`` over any LangChain retriever (``mx_rag.retrievers.Retriever`` and
    the others), so CoRAG can read a knowledge base directly instead of through a URL.

    Args:
        retriever: a LangChain ``BaseRetriever``; it is called with ``invoke(query)``.
        top_k: documents asked for when ``retrieve`` is called without ``top_k``; None uses
            the retriever's own setting.

    A per-call ``top_k`` is passed to the retriever's ``invoke`` as ``k`` when it takes per-call
    settings (every mx_rag retriever); a LangChain retriever with a ``k`` field (``BM25Retriever``)
    or ``search_kwargs`` (``VectorStoreRetriever``) is asked on a copy (the shared one is never
    changed); any other is asked as it is and its results are cut to ``top_k``. Ids come from
    metadata ``chunk_id`` or ``id``, then ``Document.id``, else the first 16 hex digits of the
    text's SHA-256 (stable across runs).

    A failing retriever raises: an ``MxRagError`` (``StorageError``, ``RemoteError``...) as it is,
    anything else as a ``RetrievalError`` chained to it.

    Example:
        >>> source = RetrieverSource(kb.retriever(k=5))            # doctest: +SKIP
        >>> [d.id for d in source.retrieve("Who founded YouTube?", top_k=2)]   # doctest: +SKIP
        ['3f1c0a9b2d4e5f60', '9a8b7c6d5e4f3a2b']
    """

    def __init__(self, retriever: BaseRetriever, top_k: int | None = None) -> None:
        self.retriever = check_instance("retriever", retriever, _base_retriever_class())
        self.top_k = None if top_k is None else check_top_k(top_k)

    def retrieve(self, query: str, top_k: int | None = None) -> list[RetrievedDocument]:
        """At most ``top_k`` documents for ``query``.

        Raises:
            ParameterError: ``query`` or ``top_k`` is out of range.
            MxRagError: the retriever failed (a ``RetrievalError`` for an error of another type).
        """
        check_query(query)
        k = self.top_k if top_k is None else check_top_k(top_k)
        try:
            docs = self._invoke(query, k)
        except MxRagError:
            raise
        except Exception as exc:
            raise as_retrieval_error(exc) from exc
        if k is not None:
            docs = docs[:k]
        return [RetrievedDocument(id=_document_id(d), text=d.page_content) for d in docs if d.page_content]

    retrieve_strict = retrieve
    """The same as ``retrieve`` (kept for callers of the time when ``retrieve`` returned ``[]``
    for a failure)."""

    def _invoke(self, query: str, top_k: int | None) -> list[Document]:
        """The retriever's documents for ``query``, asking for ``top_k`` of them when it can.

        Settings are never cached on a copy, so later changes to the retriever (say
        ``Retriever.set_filter``) are always seen.
        """
        base: Any = self.retriever
        if top_k is None:
            return list(base.invoke(query))
        if isinstance(self.retriever, _call_settings_class()):
            return list(self.retriever.invoke(query, k=top_k))
        fields = getattr(type(base), "model_fields", {})
        if "k" in fields and isinstance(base.k, int):
            base = base if base.k == top_k else base.model_copy(update={"k": top_k})
        elif "search_kwargs" in fields and isinstance(getattr(base, "search_kwargs", None), dict):
            base = base.model_copy(update={"search_kwargs": {**base.search_kwargs, "k": top_k}})
        return list(base.invoke(query))

    def __repr__(self) -> str:
        return f"RetrieverSource({type(self.retriever).__name__}, top_k={self.top_k})"
