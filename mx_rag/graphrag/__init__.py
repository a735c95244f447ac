# SPDX-License-Identifier: Apache-2.0
"""Graph RAG: extract a knowledge graph from documents with an LLM, retrieve subgraphs from it.

Importing this package imports neither networkx nor faiss; names load on first access.

Example:
    >>> from mx_rag.graphrag import GraphRAGPipeline
    >>> pipeline = GraphRAGPipeline("/data/graph", llm, embedding, dim=384)
    >>> pipeline.upload_files(["/data/docs/a.txt"], LoaderMng.with_defaults())
    >>> pipeline.build_graph()
    >>> pipeline.as_retriever().invoke("Who founded the company?")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mx_rag.graphrag.extraction import Chunk, Entity, Extraction, Extractor, Relation
    from mx_rag.graphrag.graph_store import Edge, GraphStore, Node, Subgraph
    from mx_rag.graphrag.pipeline import GraphRAGPipeline

_LAZY = {
    "Chunk": "mx_rag.graphrag.extraction",
    "Edge": "mx_rag.graphrag.graph_store",
    "Entity": "mx_rag.graphrag.extraction",
    "Extraction": "mx_rag.graphrag.extraction",
    "Extractor": "mx_rag.graphrag.extraction",
    "GraphRAGPipeline": "mx_rag.graphrag.pipeline",
    "GraphStore": "mx_rag.graphrag.graph_store",
    "Node": "mx_rag.graphrag.graph_store",
    "Relation": "mx_rag.graphrag.extraction",
    "Subgraph": "mx_rag.graphrag.graph_store",
}

__all__ = [
    "Chunk",
    "Edge",
    "Entity",
    "Extraction",
    "Extractor",
    "GraphRAGPipeline",
    "GraphStore",
    "Node",
    "Relation",
    "Subgraph",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
