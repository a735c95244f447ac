# SPDX-License-Identifier: Apache-2.0
"""The retrieval API that CoRAG's ``retrieve_api_url`` expects, served with FastAPI.

``POST /retrieve`` takes ``{"query": str (1 to 1,000,000 chars), "top_k": int}`` (``top_k``
optional; extra keys such as the original SDK's ``"stream": false`` are ignored) and answers
format 1 of the original documentation::

    {"document_ids": ["3f1c0a9b2d4e5f60", ...], "documents": ["chunk text", ...]}

Errors have the shape of every mx_rag app (``mx_rag.server.errors``): a malformed body gets 422
(the fields named, their values not echoed), a body over 16 MiB 413, and a failing retriever 500
(its error is logged, not sent).
``GET /health`` answers ``{"status": "ok"}``.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the endpoint annotations at
# runtime, and the request model is built per app (its ``top_k`` bounds are the app's).

import logging
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.retrievers.sources import DocumentSource, RetrieverSource
from mx_rag.server.runner import AppServer
from mx_rag.utils.checks import check_int, fail
from mx_rag.utils.common import MAX_TOP_K, MB, TEXT_MAX_LEN
from mx_rag.utils.lazy import extra_import

with extra_import("server", "fastapi"):
    from fastapi import FastAPI

    from mx_rag.server.errors import ApiError, install_error_handling

from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

__all__ = ["MAX_BODY_BYTES", "RetrievalServer", "RetrieveResponse", "create_retrieval_app"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * MB
_ERROR_CHARS = 300


class RetrieveResponse(BaseModel):
    """The answer of ``POST /retrieve`` (format 1): parallel lists of ids and texts."""

    document_ids: list[str]
    documents: list[str]


def _request_model(max_top_k: int, default_top_k: int) -> type[BaseModel]:
    class RetrieveRequest(BaseModel):
        """The body of ``POST /retrieve``."""

        model_config = ConfigDict(extra="ignore")

        query: StrictStr = Field(min_length=1, max_length=TEXT_MAX_LEN)
        top_k: StrictInt = Field(default=default_top_k, ge=1, le=max_top_k)

    return RetrieveRequest


def create_retrieval_app(
    source: DocumentSource | BaseRetriever,
    *,
    max_top_k: int = 100,
    default_top_k: int = 5,
) -> FastAPI:
    """A FastAPI app serving ``POST /retrieve`` and ``GET /health`` over ``source``.

    Args:
        source: a LangChain ``BaseRetriever`` (e.g. ``LocalKnowledge.retriever()``), or any
            ``DocumentSource``. A URL is refused (this app is not a proxy).
        max_top_k: largest ``top_k`` a request may ask for (larger gets 422), in [1, 10000].
        default_top_k: ``top_k`` of a request without one, in [1, max_top_k].

    The endpoint is synchronous: FastAPI runs each request in its worker threads, so the source
    must be thread-safe (``Retriever`` over ``MindFAISS`` and ``SQLiteDocstore`` is).

    Example:
        >>> from mx_rag.server import create_retrieval_app                       # doctest: +SKIP
        >>> app = create_retrieval_app(kb.retriever(k=5), max_top_k=50)            # doctest: +SKIP
        >>> # uvicorn.run(app, host="127.0.0.1", port=8000), or RetrievalServer(app)
    """
    check_int("max_top_k", max_top_k, 1, MAX_TOP_K)
    check_int("default_top_k", default_top_k, 1, max_top_k)
    search = _search_function(source)
    body_model: Any = _request_model(max_top_k, default_top_k)

    app = FastAPI(title="mx_rag retrieval API", version="1", docs_url=None, redoc_url=None)

    install_error_handling(app, MAX_BODY_BYTES)

    @app.post("/retrieve", response_model=RetrieveResponse)
    def retrieve(body: body_model) -> RetrieveResponse:
        try:
            docs = search(body.query, body.top_k)
        except ParameterError as exc:
            raise ApiError(422, "invalid_argument", str(exc)) from exc
        except Exception as exc:
            text = str(exc)[:_ERROR_CHARS]
            logger.warning("retrieval failed: %s: %s", type(exc).__name__, text)
            raise ApiError(500, "internal_error", f"retrieval failed ({type(exc).__name__})") from exc
        return RetrieveResponse(document_ids=[d.id for d in docs], documents=[d.text for d in docs])

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _search_function(source: Any) -> Any:
    """``(query, top_k) -> list[RetrievedDocument]``; a retriever's errors propagate (500)."""
    if isinstance(source, BaseRetriever):
        strict = RetrieverSource(source)
        return strict.retrieve_strict
    if isinstance(source, RetrieverSource):
        return source.retrieve_strict
    if not isinstance(source, str) and isinstance(source, DocumentSource):
        return source.retrieve
    raise fail("source", source, "a LangChain BaseRetriever or a DocumentSource (not a URL)")


RetrievalServer = AppServer  # the name this runner had when it only served the retrieval API
