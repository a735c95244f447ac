# SPDX-License-Identifier: Apache-2.0
"""The second hop of ``mode="mix"``: a keyword search for what the best passage leaves open.

A multi-hop question names one entity and asks about another one that the passage about the
first names (the bridge): "Who was the first president of the association which published the
Journal of Psychotherapy Integration?" finds the journal's passage, which names the American
Psychological Association, whose first president is in a passage that shares few words with the
question. Iterative retrievers ask again with what the first passage told them (IRCoT: Trivedi et
al., 2023, with an LLM; MDR: Xiong et al., 2021, with a trained encoder over the question and the
passage). This step does it with no model at all:

* the *head* is the best passage of the first fusion (graph, dense and keyword rankings);
* the *open words* are the question's words (stop words left out) that the head does not contain
  ("first", "president"): what the head did not answer;
* the *bridge names* are the labels of the entities the head names that the question does not
  (in the head's order, at most ``BRIDGE_NAMES``; names mentioned by more than
  ``BRIDGE_MAX_SOURCES`` passages are too common to lead anywhere);
* their BM25 search over the chunk texts (``KeywordIndex``) is a fourth ranking, fused with the
  other three (``hop_weight`` times the keyword ranking's weight).

``second_hop`` returns the hits, ``hop_query`` builds the query text, ``rrf_scores`` fuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mx_rag.graphrag.graph_store import GraphStore
from mx_rag.graphrag.keywords import KeywordIndex
from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.storage.document_store.text_tokens import query_tokens, tokenize
from mx_rag.utils.names import normalise_name

__all__ = ["BRIDGE_MAX_SOURCES", "BRIDGE_NAMES", "HOP_TOP_K", "hop_query", "rrf_scores", "second_hop"]

BRIDGE_NAMES = 5  # entity labels of the head passage in the second-hop query
HOP_TOP_K = 20  # keyword hits of the second-hop query fused into the ranking
RRF_K = 60  # reciprocal rank fusion constant (Cormack et al., 2009)
BRIDGE_MAX_SOURCES = 50  # names mentioned by more chunks are too common to lead anywhere


def second_hop(question: str, head: str, registry: ChunkRegistry, graph: GraphStore,
               keyword_index: KeywordIndex | None) -> list[str]:  # fmt: skip
    """Chunk ids of the ``HOP_TOP_K`` best keyword matches of the second-hop query from the
    ``head`` chunk, best first (none without a keyword index or a known head)."""
    record = registry.chunks([head]).get(head)
    if keyword_index is None or record is None:
        return []
    asked = normalise_name(question)
    names = [n for n in registry.entities_of([head]).get(head, []) if n not in asked]
    nodes = graph.get_nodes(names)
    labels = [nodes[n].label for n in names if n in nodes and len(nodes[n].sources) <= BRIDGE_MAX_SOURCES]
    text = hop_query(question, record.text, labels[:BRIDGE_NAMES])
    numbers = keyword_index.search(text, HOP_TOP_K) if text else []
    chunks = registry.by_number(numbers)
    return [chunks[n] for n in numbers if n in chunks]


def hop_query(question: str, head_text: str, bridge_names: Sequence[str]) -> str:
    """The second-hop keyword query: the question's words missing from ``head_text``, then
    ``bridge_names`` (labels), space-joined; ``""`` when both are empty."""
    seen = set(tokenize(head_text))
    open_words = [t for t in query_tokens(question) if t not in seen]
    return " ".join([*open_words, *bridge_names]).strip()


def rrf_scores(rankings: Iterable[tuple[Iterable[str], float]]) -> dict[str, float]:
    """Weighted reciprocal rank fusion of ``(keys best first, weight)`` rankings: key -> the sum
    of ``weight / (RRF_K + rank)``, best first (ties by key)."""
    fused: dict[str, float] = {}
    for ranked, weight in rankings:
        if weight <= 0:
            continue
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (RRF_K + rank)
    return dict(sorted(fused.items(), key=lambda item: (-item[1], item[0])))
