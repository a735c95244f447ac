# SPDX-License-Identifier: Apache-2.0
"""Document sources: anything that answers ``retrieve(query, top_k)`` with ``RetrievedDocument``s.

``RetrieverSource`` adapts any LangChain retriever (``Retriever``, ``KnowledgeRetriever``, a graph
retriever, ...) to that protocol; CoRAG reads knowledge bases through it, the retrieval servers
serve it, and ``mx_rag.corag.retrieval_api.RetrievalApiClient`` is the same protocol over HTTP.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_instance, check_int, check_str
from mx_rag.utils.common import MAX_TOP_K, TEXT_MAX_LEN

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

__all__ = ["DocumentSource", "RetrievedDocument", "RetrieverSource"]

logger = logging.getLogger(__name__)

METADATA_ID_KEYS = ("chunk_id", "id")
_ERROR_CHARS = 300


@dataclass(frozen=True)
class RetrievedDocument:
    """One retrieved passage: its id (``"graph_chunk"`` when the source gives none) and text."""

    id: str
    text: str


@runtime_checkable
class DocumentSource(Protocol):
    """Anything that answers ``retrieve(query, top_k)``: the retrieval-API client, or an adapter
    over a ``Retriever`` / knowledge base. Failures degrade to an empty list (and a warning)."""

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]: ...


def id_text(value: Any) -> str | None:
    """An id as text (str, int or float; not bool), or None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value)
    return text if text else None


def check_top_k(top_k: Any) -> int:
    return check_int("top_k", top_k, 1, MAX_TOP_K)


def check_query(query: Any) -> str:
    return check_str("query", query, 1, TEXT_MAX_LEN)


def short_error(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + "..."


def _base_retriever_class() -> type:
    from langchain_core.retrievers import BaseRetriever

    return BaseRetriever


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

    A per-call ``top_k`` is honoured on a copy of the retriever (never by changing the shared
    one) when it has a ``k`` field (``Retriever``, ``BMRetriever``...) or ``search_kwargs``
    (LangChain's ``VectorStoreRetriever``); otherwise the results are cut to ``top_k``. Ids
    come from metadata ``chunk_id`` or ``id``, then ``Document.id``, else the first 16 hex
    digits of the text's SHA-256 (stable across runs). ``retrieve`` logs a warning and
    returns ``[]`` when the retriever fails; ``retrieve_strict`` raises instead.

    Example:
        >>> source = RetrieverSource(kb.retriever(k=5))            # doctest: +SKIP
        >>> [d.id for d in source.retrieve("Who founded YouTube?", top_k=2)]   # doctest: +SKIP
        ['3f1c0a9b2d4e5f60', '9a8b7c6d5e4f3a2b']
    """

    def __init__(self, retriever: BaseRetriever, top_k: int | None = None) -> None:
        self.retriever = check_instance("retriever", retriever, _base_retriever_class())
        self.top_k = None if top_k is None else check_top_k(top_k)

    def retrieve(self, query: str, top_k: int | None = None) -> list[RetrievedDocument]:
        """At most ``top_k`` documents for ``query``; ``[]`` (and a warning) when the retriever fails.

        Raises:
            ParameterError: ``query`` or ``top_k`` is out of range.
        """
        check_query(query)
        k = self.top_k if top_k is None else check_top_k(top_k)
        try:
            return self._search(query, k)
        except ParameterError:
            raise
        except Exception as exc:  # the protocol: a failing source degrades to no documents
            logger.warning("retriever failed, using no documents: %s: %s", type(exc).__name__, short_error(exc))
            logger.debug("retriever failure", exc_info=True)
            return []

    def retrieve_strict(self, query: str, top_k: int | None = None) -> list[RetrievedDocument]:
        """Like ``retrieve``, but the retriever's errors propagate (used by the retrieval server)."""
        check_query(query)
        return self._search(query, self.top_k if top_k is None else check_top_k(top_k))

    def _search(self, query: str, top_k: int | None) -> list[RetrievedDocument]:
        docs = self._sized(top_k).invoke(query)
        if top_k is not None:
            docs = docs[:top_k]
        return [RetrievedDocument(id=_document_id(d), text=d.page_content) for d in docs if d.page_content]

    def _sized(self, top_k: int | None) -> Any:
        """The retriever, or a shallow copy of it asking for ``top_k`` results.

        Copied per call (cheap) rather than cached, so later changes to the retriever (say
        ``Retriever.set_filter``) are always seen.
        """
        base: Any = self.retriever
        if top_k is None:
            return base
        fields = getattr(type(base), "model_fields", {})
        if "k" in fields and isinstance(base.k, int):
            return base if base.k == top_k else base.model_copy(update={"k": top_k})
        search_kwargs = getattr(base, "search_kwargs", None)
        if "search_kwargs" in fields and isinstance(search_kwargs, dict):
            return base.model_copy(update={"search_kwargs": {**search_kwargs, "k": top_k}})
        return base

    def __repr__(self) -> str:
        return f"RetrieverSource({type(self.retriever).__name__}, top_k={self.top_k})"
