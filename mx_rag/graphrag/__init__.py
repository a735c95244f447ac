# SPDX-License-Identifier: Apache-2.0
"""Graph RAG: extract a knowledge graph from documents (with an LLM, or offline with spaCy / jieba)
and retrieve passages from it.

Importing this package imports neither networkx nor faiss; names load on first access.

Example:
    >>> from mx_rag.graphrag import GraphRAGPipeline
    >>> pipeline = GraphRAGPipeline("/data/graph", llm, embedding, dim=384)
    >>> pipeline.upload_files(["/data/docs/a.txt"], LoaderMng.with_defaults())
    >>> pipeline.build_graph()
    >>> pipeline.as_retriever().invoke("Who founded the company?")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.graphrag.extraction import Chunk, Entity, Extraction, Extractor, Relation
    from mx_rag.graphrag.graph_evaluator import GraphEvaluator
    from mx_rag.graphrag.graph_store import Edge, GraphStore, Node, Subgraph
    from mx_rag.graphrag.json_repair import loads_tolerant
    from mx_rag.graphrag.llm_extractor import LLMExtractor
    from mx_rag.graphrag.merge import normalise_name
    from mx_rag.graphrag.networkx_store import NetworkxGraphStore
    from mx_rag.graphrag.offline_extractor import JiebaExtractor, OfflineExtractor, SpacyExtractor
    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore
    from mx_rag.graphrag.pipeline import BuildEstimate, GraphRAGPipeline
    from mx_rag.graphrag.retriever import GraphRetriever

_LAZY = {
    "BuildEstimate": "mx_rag.graphrag.pipeline",
    "GraphRetriever": "mx_rag.graphrag.retriever",
    "LLMExtractor": "mx_rag.graphrag.llm_extractor",
    "NetworkxGraphStore": "mx_rag.graphrag.networkx_store",
    "JiebaExtractor": "mx_rag.graphrag.offline_extractor",
    "OfflineExtractor": "mx_rag.graphrag.offline_extractor",
    "SpacyExtractor": "mx_rag.graphrag.offline_extractor",
    "PostgresGraphStore": "mx_rag.graphrag.pg_graph_store",
    "loads_tolerant": "mx_rag.graphrag.json_repair",
    "normalise_name": "mx_rag.graphrag.merge",
    "Chunk": "mx_rag.graphrag.extraction",
    "Edge": "mx_rag.graphrag.graph_store",
    "Entity": "mx_rag.graphrag.extraction",
    "Extraction": "mx_rag.graphrag.extraction",
    "Extractor": "mx_rag.graphrag.extraction",
    "GraphEvaluator": "mx_rag.graphrag.graph_evaluator",
    "GraphRAGPipeline": "mx_rag.graphrag.pipeline",
    "GraphStore": "mx_rag.graphrag.graph_store",
    "Node": "mx_rag.graphrag.graph_store",
    "Relation": "mx_rag.graphrag.extraction",
    "Subgraph": "mx_rag.graphrag.graph_store",
}

__all__ = [
    "BuildEstimate",
    "Chunk",
    "Edge",
    "Entity",
    "Extraction",
    "Extractor",
    "GraphEvaluator",
    "GraphRAGPipeline",
    "GraphRetriever",
    "GraphStore",
    "JiebaExtractor",
    "LLMExtractor",
    "NetworkxGraphStore",
    "Node",
    "OfflineExtractor",
    "PostgresGraphStore",
    "Relation",
    "SpacyExtractor",
    "Subgraph",
    "loads_tolerant",
    "normalise_name",
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
