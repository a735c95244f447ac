# SPDX-License-Identifier: Apache-2.0
"""HTTP services built on mx_rag (needs the ``server`` extra: fastapi and uvicorn).

``create_retrieval_app`` turns a ``Retriever`` (or any ``DocumentSource``) into the retrieval
API that CoRAG's ``retrieve_api_url`` expects; ``RetrievalServer`` runs it with uvicorn in a
background thread. ``mxrag serve-retrieval --docs DIR`` does both for a folder of documents.
Nothing here is imported by ``import mx_rag``; fastapi is imported on first use.

Example:
    >>> from mx_rag.server import RetrievalServer, create_retrieval_app      # doctest: +SKIP
    >>> with RetrievalServer(create_retrieval_app(kb.retriever(k=5))) as srv:  # doctest: +SKIP
    ...     print(srv.url)
    http://127.0.0.1:38211/retrieve
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.server.retrieval import RetrievalServer, create_retrieval_app

__all__ = ["RetrievalServer", "create_retrieval_app"]

__getattr__, __dir__ = lazy_exports(globals(), {name: "mx_rag.server.retrieval" for name in __all__})
