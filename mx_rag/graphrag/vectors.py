# SPDX-License-Identifier: Apache-2.0
"""Keep the pipeline's two vector stores in step with the graph and the chunk registry.

* node vectors: one per entity node, keyed by ``Node.id``, embedding its label;
* passage vectors: one per chunk, keyed by ``chunk_number(chunk id)``, embedding its text (the
  dense scores that seed the graph walk, and the dense half of ``mode="mix"``);
* fact vectors (HippoRAG 2's query-to-triple linking): one per ordered pair of related nodes,
  embedding the fact ``"<source label> <relations> <target label>"`` (the pair's relations,
  sorted, joined by ``"; "``), keyed by ``fact_key(text)``, a 63-bit hash of that text, so a
  fact whose text changes (a relation added or removed) gets a new vector and the old one is
  dropped as stale. ``sync_fact_vectors`` returns fact key -> (source name, target name).

Both syncs embed what is missing and drop what is stale, so running one again after a crash
finishes the job.
"""

from __future__ import annotations

import hashlib

from langchain_core.embeddings import Embeddings

from mx_rag.graphrag.graph_store import GraphStore
from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.storage.vectorstore.vectorstore import VectorStore

__all__ = ["fact_key", "fact_texts", "passage_vectors_stale", "sync_fact_vectors", "sync_node_vectors",
           "sync_passage_vectors"]

FactEnds = dict[int, tuple[str, str]]


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


def fact_key(text: str) -> int:
    """A positive 63-bit key for a fact's text (a vector store id)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1 or 1


def fact_texts(graph: GraphStore) -> tuple[dict[int, str], FactEnds]:
    """The facts of the graph: key -> text, and key -> (source name, target name)."""
    labels = {node.name: node.label for node in graph.iter_nodes()}
    relations: dict[tuple[str, str], set[str]] = {}
    for edge in graph.iter_edges():
        relations.setdefault((edge.source, edge.target), set()).add(edge.relation or "related to")
    texts: dict[int, str] = {}
    ends: FactEnds = {}
    for (source, target), found in sorted(relations.items()):
        if source in labels and target in labels:
            text = f"{labels[source]} {'; '.join(sorted(found))} {labels[target]}"
            key = fact_key(text)
            texts[key] = text
            ends[key] = (source, target)
    return texts, ends


def sync_fact_vectors(graph: GraphStore, store: VectorStore, embedding: Embeddings, batch_size: int) -> FactEnds:
    """Embed facts that have no vector yet; drop vectors of facts no longer in the graph.

    Returns:
        fact key -> (source name, target name), for every fact of the graph.
    """
    texts, ends = fact_texts(graph)
    _sync(store, texts, embedding, batch_size)
    return ends
