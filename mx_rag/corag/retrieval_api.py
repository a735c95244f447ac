# SPDX-License-Identifier: Apache-2.0
"""Where CoRAG's documents come from: a retrieval API over HTTP, or any LangChain retriever.

A retrieval API answers ``POST {"query": "...", "top_k": 5}`` with one of the six JSON shapes
the original SDK documents (plus a bare JSON list)::

    1 {"document_ids": ["d1", "d2"], "documents": ["text 1", "text 2"]}
    2 {"chunks": ["text 1", "text 2"]}
    3 {"data": [{"id": "d1", "content": "text 1"}]}
    4 {"results": [{"doc_id": "d1", "text": "text 1"}]}
    5 {"docs": [{"id": "d1", "contents": "text 1"}]}
    6 {"passages": [{"id": "d1", "content": "text 1"}, "text 2"]}

``normalize_retrieve_api_results`` turns any of them into ``RetrievedDocument`` objects;
``RetrievalApiClient`` calls such an API; ``RetrieverSource`` (in ``mx_rag.retrievers.sources``,
importable from here too) adapts a ``Retriever`` (or any LangChain ``BaseRetriever``) to the same
``DocumentSource`` protocol; ``as_document_source`` picks the right one for a URL, a retriever or
a source. ``mxrag serve-retrieval`` (see
``mx_rag.server``) serves a local knowledge base as such an API.

Example:
    >>> normalize_retrieve_api_results({"results": [{"doc_id": 7, "text": "Paris"}]})
    [RetrievedDocument(id='7', text='Paris')]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mx_rag.errors import RemoteError, RemoteStatusError
from mx_rag.retrievers.sources import (
    DocumentSource,
    RetrievalError,
    RetrievedDocument,
    RetrieverSource,
    check_query,
    check_top_k,
    id_text,
    short_error,
)
from mx_rag.utils.checks import check_instance, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.http import HttpClient, check_url
from mx_rag.utils.lifecycle import Closable

__all__ = [
    "NO_ID",
    "RetrievalApiClient",
    "RetrievalError",
    "RetrieverSource",
    "as_document_source",
    "normalize_retrieve_api_results",
]

logger = logging.getLogger(__name__)

NO_ID = "graph_chunk"
"""The id of a document whose source gave none (the original SDK's placeholder)."""

LIST_KEYS = ("chunks", "data", "results", "docs", "passages")
TEXT_KEYS = ("contents", "content", "text")
ID_KEYS = ("id", "doc_id")
METADATA_ID_KEYS = ("chunk_id", "id")
_ERROR_CHARS = 300


# -- response parsing ------------------------------------------------------------------------------


def normalize_retrieve_api_results(data: Any) -> list[RetrievedDocument]:
    """The documents in a retrieval API's parsed JSON answer, in the order the API gave them.

    Reads the six documented shapes (format 1 ``document_ids`` + ``documents`` zipped; the
    first list among ``chunks``, ``data``, ``results``, ``docs``, ``passages``), a bare list,
    and a dict that is itself one document. Each element is a string (id ``"graph_chunk"``) or
    a dict: text from the first non-empty string among ``contents``, ``content``, ``text``; id
    from ``id`` or ``doc_id`` (stringified), else ``"graph_chunk"``. Elements without usable
    text are skipped (logged at DEBUG) together with their id; nothing is ever stringified into
    a pseudo-document. In format 1, ``document_ids`` of a different length than ``documents``
    cannot be paired safely, so every document then gets ``"graph_chunk"``.

    Example:
        >>> normalize_retrieve_api_results({"document_ids": ["d1", "d2"], "documents": ["a", "b"]})
        [RetrievedDocument(id='d1', text='a'), RetrievedDocument(id='d2', text='b')]
        >>> normalize_retrieve_api_results({"passages": [{"id": 3, "content": "a"}, "b", 42]})
        [RetrievedDocument(id='3', text='a'), RetrievedDocument(id='graph_chunk', text='b')]
        >>> normalize_retrieve_api_results({"error": "index not loaded"})
        []
    """
    if isinstance(data, list):
        return _documents(data, None)
    if not isinstance(data, dict):
        logger.debug("retrieve-API answer is a JSON %s, not a list or object: no documents", type(data).__name__)
        return []
    documents = data.get("documents")
    if isinstance(documents, list):
        return _documents(documents, _paired_ids(data.get("document_ids"), len(documents)))
    for key in LIST_KEYS:
        items = data.get(key)
        if isinstance(items, list):
            return _documents(items, None)
    if any(isinstance(data.get(key), str) and data[key] for key in TEXT_KEYS):
        return _documents([data], None)
    logger.debug("retrieve-API answer has none of the known keys (keys: %s): no documents", sorted(map(str, data))[:10])
    return []


def _paired_ids(ids: Any, count: int) -> list[str | None] | None:
    if ids is None:
        return None
    if not isinstance(ids, list) or len(ids) != count:
        size = len(ids) if isinstance(ids, list) else type(ids).__name__
        logger.debug("retrieve-API document_ids (%s) do not pair with %d documents: ids dropped", size, count)
        return None
    return [id_text(i) for i in ids]


def _documents(items: Sequence[Any], ids: list[str | None] | None) -> list[RetrievedDocument]:
    out: list[RetrievedDocument] = []
    for index, item in enumerate(items):
        given = ids[index] if ids is not None else None
        if isinstance(item, str):
            text, own_id = item, None
        elif isinstance(item, dict):
            text = next((item[k] for k in TEXT_KEYS if isinstance(item.get(k), str) and item[k]), "")
            own_id = next((i for i in (id_text(item.get(k)) for k in ID_KEYS) if i is not None), None)
        else:
            logger.debug("retrieve-API result %d is a JSON %s: skipped", index, type(item).__name__)
            continue
        if not text.strip():
            logger.debug("retrieve-API result %d has no text: skipped", index)
            continue
        out.append(RetrievedDocument(id=own_id or given or NO_ID, text=text))
    return out


# -- HTTP client -------------------------------------------------------------------------------------


class RetrievalApiClient(Closable):
    """A ``DocumentSource`` that POSTs ``{"query", "top_k"}`` to a retrieval API.

    Args:
        url: the API's URL (the CoRAG ``retrieve_api_url``). Checked now against
            ``client_param``: an ``http://`` URL needs ``ClientParam(use_http=True)``.
        client_param: TLS, API key, headers, timeouts and retries; default ``ClientParam()``
            (https only).
        top_k: documents asked for when ``retrieve`` is called without ``top_k``, in [1, 10000].

    ``retrieve`` returns at most ``top_k`` documents; a failing service (connection error,
    timeout, non-2xx answer after ``ClientParam.retries``, malformed or oversized JSON) raises
    ``RetrievalError``, chained to the ``RemoteError`` (the response body, which may echo the
    query, stays out of the message: it is on ``__cause__.body`` and logged at DEBUG). An answer
    in none of the known shapes is no documents. The CoRAG agent turns a failure into a step
    without documents and counts it. One pooled connection set is shared by all threads; call
    ``close()`` (or use ``with``) when done.

    Example:
        >>> from mx_rag.utils import ClientParam
        >>> with RetrievalApiClient("http://127.0.0.1:8000/retrieve",
        ...                         client_param=ClientParam(use_http=True)) as api:   # doctest: +SKIP
        ...     for doc in api.retrieve("Who founded YouTube?", top_k=3):
        ...         print(doc.id, doc.text[:60])
    """

    def __init__(self, url: str, client_param: ClientParam | None = None, top_k: int = 5) -> None:
        self.client_param = check_instance("client_param", client_param or ClientParam(), ClientParam)
        self.url = check_url("retrieve_api_url", url, self.client_param)
        self.top_k = check_top_k(top_k)
        self._http = HttpClient(self.client_param)
        self._closed = False

    def retrieve(self, query: str, top_k: int | None = None) -> list[RetrievedDocument]:
        """At most ``top_k`` documents for ``query``.

        Raises:
            ParameterError: ``query`` is not a str of 1 to 1,000,000 characters, or ``top_k``
                is not an int in [1, 10000].
            RetrievalError: the API failed (see the class docstring).
            RuntimeError: the client is closed.
        """
        check_query(query)
        k = self.top_k if top_k is None else check_top_k(top_k)
        if self._closed:
            raise RuntimeError("RetrievalApiClient is closed")
        try:
            data = self._http.post_json(self.url, {"query": query, "top_k": k}).json()
        except RemoteStatusError as exc:  # the body may echo the query: DEBUG only
            logger.debug("retrieval API error body: %s", exc.body)
            raise RetrievalError(f"retrieval API answered HTTP {exc.status_code} (url: {self.url})") from exc
        except RemoteError as exc:
            raise RetrievalError(f"retrieval API {self.url} failed: {type(exc).__name__}: {short_error(exc)}") from exc
        documents = normalize_retrieve_api_results(data)
        if not documents:
            logger.debug("retrieval API %s returned no usable documents", self.url)
        return documents[:k]

    def close(self) -> None:
        """Close the pooled connections; idempotent."""
        self._closed = True
        self._http.close()


    def __repr__(self) -> str:
        return f"RetrievalApiClient(url={self.url!r}, top_k={self.top_k})"


# -- picking a source ----------------------------------------------------------------------------------


def as_document_source(obj: Any, client_param: ClientParam | None = None, top_k: int = 5) -> DocumentSource:
    """A ``DocumentSource`` for what a CoRAG caller passed as its retrieval source.

    * a ``str`` URL → ``RetrievalApiClient(obj, client_param, top_k)`` (the URL is checked now);
    * a LangChain ``BaseRetriever`` → ``RetrieverSource(obj, top_k)`` (``client_param`` unused);
    * anything with ``retrieve(query, top_k)`` (a ``DocumentSource``) → itself, unchanged.

    Raises:
        ParameterError: anything else, an invalid URL, or ``top_k`` out of [1, 10000].

    Example:
        >>> from mx_rag.utils import ClientParam
        >>> as_document_source("http://127.0.0.1:8000/retrieve", ClientParam(use_http=True))
        RetrievalApiClient(url='http://127.0.0.1:8000/retrieve', top_k=5)
    """
    from langchain_core.retrievers import BaseRetriever

    if isinstance(obj, str):
        return RetrievalApiClient(obj, client_param=client_param, top_k=top_k)
    if isinstance(obj, BaseRetriever):
        return RetrieverSource(obj, top_k=check_top_k(top_k))
    if isinstance(obj, DocumentSource):
        return obj
    raise fail(
        "retrieval source", obj, "a retrieve-API URL (str), a LangChain BaseRetriever or a DocumentSource"
    )
