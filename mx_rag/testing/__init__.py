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

import importlib
from typing import TYPE_CHECKING, Any

from mx_rag.testing.replies import TINY_PNG, Reply
from mx_rag.testing.scripted_server import RecordedRequest, ScriptedServer

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mx_rag.testing' has no attribute {name!r}")
