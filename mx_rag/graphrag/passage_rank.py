# SPDX-License-Identifier: Apache-2.0
"""Rank passages by Personalized PageRank over entities *and* passages (HippoRAG 2's idea).

The walk runs over a subgraph read from the ``GraphStore``: the entity nodes reached from the
start entities (the question's linked entities, their synonyms, and the entities of the best
dense passages) within ``depth`` hops, plus one passage node per chunk that supports any of
them, plus the dense passages themselves. Edges (undirected):

* entity - passage, weight 1, for every chunk in ``Node.sources`` (the passage mentions it);
* entity - entity, weight the number of chunks stating a relation between the two;
* entity - entity synonym edges, weight the embedding similarity of the two names.

The restart distribution gives each linked entity its link score divided by the number of
passages that mention it (*node specificity*: rare names count more than common ones), and each
dense passage its min-max normalised dense score times ``passage_weight``. The damping factor is
the probability of following an edge. Passages rank by their PageRank score.

The same pass runs on every store (the subgraph is read through ``expand``/``get_nodes``), so
NetworkX and PostgreSQL give the same ranking for the same graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from mx_rag.graphrag.graph_store import GraphStore, Node
from mx_rag.graphrag.ppr import personalized_pagerank

__all__ = ["PassageRanking", "rank_passages"]

SYNONYM = "synonym of"


@dataclass(frozen=True)
class PassageRanking:
    """What one ranking pass found.

    Attributes:
        chunks: chunk id -> score, best first (only chunks with a positive score).
        entities: entity name -> PageRank score, best first.
        nodes: the stored entity nodes of the subgraph, by name.
        seeds: entity name -> restart weight before normalisation (the linked entities).
        edges: ``(source, target, relation, chunk ids)`` of the subgraph's edges between
            entities (synonym edges have relation ``"synonym of"`` and no chunks).
    """

    chunks: dict[str, float]
    entities: dict[str, float]
    nodes: dict[str, Node]
    seeds: dict[str, float] = field(default_factory=dict)
    edges: tuple[tuple[str, str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class WalkSettings:
    depth: int = 1
    max_nodes: int = 200
    damping: float = 0.5
    passage_weight: float = 1.0
    dense_expand: int = 5


def rank_passages(
    graph: GraphStore,
    chunk_entities: Callable[[Iterable[str]], Mapping[str, list[str]]],
    entity_seeds: Mapping[str, float],
    dense: Mapping[str, float],
    synonyms: Iterable[tuple[str, str, float]],
    settings: WalkSettings,
) -> PassageRanking:
    """Rank passages for one question (see the module docstring).

    Args:
        graph: the entity graph.
        chunk_entities: chunk ids -> the entity names each chunk mentions.
        entity_seeds: linked entity name -> link score in (0, 1].
        dense: chunk id -> dense similarity, best first.
        synonyms: ``(name, name, similarity)`` pairs to join.
        settings: subgraph size and walk parameters.
    """
    synonym_pairs = list(synonyms)
    start = dict.fromkeys(entity_seeds)
    start.update(dict.fromkeys(n for a, b, _ in synonym_pairs for n in (a, b)))
    for names in chunk_entities(list(dense)[: settings.dense_expand]).values():
        start.update(dict.fromkeys(names))
    sub = graph.expand(start, settings.depth, settings.max_nodes) if start else None
    nodes = graph.get_nodes(sub.nodes) if sub is not None else {}
    entity_index = {name: i for i, name in enumerate(nodes)}
    passage_index: dict[str, int] = {}
    for node in nodes.values():
        for chunk in sorted(node.sources):
            passage_index.setdefault(chunk, len(entity_index) + len(passage_index))
    for chunk in dense:
        passage_index.setdefault(chunk, len(entity_index) + len(passage_index))
    size = len(entity_index) + len(passage_index)
    edges: list[tuple[int, int, float]] = []
    for name, node in nodes.items():
        edges.extend((entity_index[name], passage_index[c], 1.0) for c in node.sources)
    relation_edges: list[tuple[str, str, str, tuple[str, ...]]] = []
    for edge in sub.edges if sub is not None else ():
        if edge.source in entity_index and edge.target in entity_index:
            edges.append((entity_index[edge.source], entity_index[edge.target], float(len(edge.sources))))
            relation_edges.append((edge.source, edge.target, edge.relation, tuple(sorted(edge.sources))))
    for first, second, similarity in synonym_pairs:
        if first in entity_index and second in entity_index and first != second:
            edges.append((entity_index[first], entity_index[second], similarity))
            relation_edges.append((first, second, SYNONYM, ()))
    reset = np.zeros(size)
    seeds: dict[str, float] = {}
    for name, score in entity_seeds.items():
        if name in entity_index and score > 0:
            seeds[name] = score / max(1, len(nodes[name].sources))
            reset[entity_index[name]] = seeds[name]
    for chunk, score in _normalised(dense).items():
        reset[passage_index[chunk]] += score * settings.passage_weight
    scores = personalized_pagerank(size, edges, reset, settings.damping)
    chunk_scores = {c: float(scores[i]) for c, i in passage_index.items() if scores[i] > 0}
    entity_scores = {n: float(scores[i]) for n, i in entity_index.items()}
    return PassageRanking(
        chunks=dict(sorted(chunk_scores.items(), key=lambda item: (-item[1], item[0]))),
        entities=dict(sorted(entity_scores.items(), key=lambda item: (-item[1], item[0]))),
        nodes=nodes, seeds=seeds, edges=tuple(relation_edges),
    )  # fmt: skip


def _normalised(dense: Mapping[str, float]) -> dict[str, float]:
    """Min-max normalised scores in [0, 1] (all 1.0 when they are equal)."""
    if not dense:
        return {}
    low, high = min(dense.values()), max(dense.values())
    if high - low <= 1e-12:
        return dict.fromkeys(dense, 1.0)
    return {c: (s - low) / (high - low) for c, s in dense.items()}
