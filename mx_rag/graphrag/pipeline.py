# SPDX-License-Identifier: Apache-2.0
"""``GraphRAGPipeline``: documents -> extracted knowledge graph -> ``GraphRetriever``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from mx_rag.graphrag.extraction import Extractor
    from mx_rag.graphrag.graph_store import GraphStore
    from mx_rag.llm.text2text import Text2TextLLM
    from mx_rag.reranker.reranker import Reranker
    from mx_rag.storage.vectorstore.vectorstore import VectorStore

__all__ = ["GraphRAGPipeline"]


class GraphRAGPipeline:
    """Build a knowledge graph from documents with an LLM and retrieve from it.

    Args:
        work_dir: an existing directory for the graph's files (``<graph_name>.json``, ...).
        llm: a ``Text2TextLLM`` that extracts entities and relations; may be None when an
            ``extractor`` is given.
        embedding_model: a LangChain ``Embeddings`` embedding node names and questions.
        dim: the embedding dimension, 1 to 1 MiB.
        rerank_model: optional ``Reranker`` applied to the retrieved contexts.
        graph_type: ``"networkx"`` (a file in ``work_dir``) or ``"postgres"`` (pass
            ``graph_store=``).
        graph_name: a Python identifier of 1 to 255 characters prefixing the files.
        encrypt_fn / decrypt_fn: optional ``str -> str`` applied to the files written / read.

    Keyword Args:
        extractor: an ``Extractor`` used instead of the LLM extraction.
        graph_store: a ``GraphStore`` used instead of the one ``graph_type`` names.
        node_vector_store: a ``VectorStore`` for node embeddings (default: a ``MindFAISS``
            file ``<graph_name>_node_vectors.index`` in ``work_dir``).
        devs: accepted for compatibility (``[device id]`` of the default vector store).
    """

    def __init__(
        self,
        work_dir: str | Path,
        llm: Text2TextLLM | None,
        embedding_model: Embeddings,
        dim: int,
        rerank_model: Reranker | None = None,
        graph_type: str = "networkx",
        graph_name: str = "graph",
        encrypt_fn: Callable[[str], str] | None = None,
        decrypt_fn: Callable[[str], str] | None = None,
        *,
        extractor: Extractor | None = None,
        graph_store: GraphStore | None = None,
        node_vector_store: VectorStore | None = None,
        **kwargs: Any,
    ) -> None:
        raise NotImplementedError("GraphRAGPipeline is being built (issue 5)")
