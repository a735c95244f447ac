# SPDX-License-Identifier: Apache-2.0
"""Test helpers shipped for users and our own tests.

``ScriptedServer`` / ``Reply``: a scripted OpenAI-compatible HTTP server (standard library only).
``HashEmbedding``: a deterministic lexical embedder that needs no model (loaded on first access).

Conformance suites, classes to subclass in a backend's tests (they need pytest; see each
module's docstring): ``VectorStoreConformance`` (``mx_rag.testing.vector_store``),
``DocstoreConformance`` (``mx_rag.testing.document_store``), ``GraphStoreConformance``
(``mx_rag.testing.graph_store``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.testing.replies import TINY_PNG, Reply
from mx_rag.testing.scripted_server import RecordedRequest, ScriptedServer
from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.testing.document_store import DocstoreConformance
    from mx_rag.testing.graph_store import GraphStoreConformance
    from mx_rag.testing.hash_embedding import HashEmbedding
    from mx_rag.testing.vector_store import VectorStoreConformance

_LAZY = {
    "DocstoreConformance": "mx_rag.testing.document_store",
    "GraphStoreConformance": "mx_rag.testing.graph_store",
    "HashEmbedding": "mx_rag.testing.hash_embedding",
    "VectorStoreConformance": "mx_rag.testing.vector_store",
}

__all__ = [
    "TINY_PNG",
    "DocstoreConformance",
    "GraphStoreConformance",
    "HashEmbedding",
    "RecordedRequest",
    "Reply",
    "ScriptedServer",
    "VectorStoreConformance",
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
