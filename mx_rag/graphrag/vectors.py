# SPDX-License-Identifier: Apache-2.0
"""Keep the pipeline's two vector stores in step with the graph and the chunk registry.

* node vectors: one per entity node, keyed by ``Node.id``, embedding its label;
* passage vectors: one per chunk, keyed by ``chunk_number(chunk id)``, embedding its text (the
  dense scores that seed the graph walk, and the dense half of ``mode="mix"``).

Both syncs embed what is missing and drop what is stale, so running one again after a crash
finishes the job.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from mx_rag.graphrag.graph_store import GraphStore
from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.storage.vectorstore.vectorstore import VectorStore

__all__ = ["passage_vectors_stale", "sync_node_vectors", "sync_passage_vectors"]


def _sync(store: VectorStore, texts: dict[int, str], embedding: Embeddings, batch_size: int) -> None:
    stored = set(store.get_all_ids())
    stale = sorted(stored - texts.keys())
    if stale:
        store.delete(stale)
    missing = sorted(texts.keys() - stored)
    for start in range(0, len(missing), batch_size):
        ids = missing[start : start + batch_size]
        store.add(ids, embedding.embed_documents([texts[i] for i in ids]))
    store.save_local()


def sync_node_vectors(graph: GraphStore, store: VectorStore, embedding: Embeddings, batch_size: int) -> None:
    """Embed nodes that have no vector yet; drop vectors of deleted nodes."""
    _sync(store, {node.id: node.label for node in graph.iter_nodes()}, embedding, batch_size)


def sync_passage_vectors(registry: ChunkRegistry, store: VectorStore, embedding: Embeddings,
                         batch_size: int) -> None:  # fmt: skip
    """Embed chunks that have no vector yet; drop vectors of removed chunks."""
    numbers = registry.chunk_numbers()
    records = registry.chunks(numbers.values())
    _sync(store, {n: records[c].text for n, c in numbers.items() if c in records}, embedding, batch_size)


def passage_vectors_stale(registry: ChunkRegistry, store: VectorStore) -> bool:
    """Whether the passage vectors miss chunks or keep removed ones (say, a graph built by an
    older version, which had none)."""
    return store.count() != len(registry.chunk_numbers())
