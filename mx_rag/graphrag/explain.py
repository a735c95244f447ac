# SPDX-License-Identifier: Apache-2.0
"""``GraphRetriever.explain``: the entities and relations behind a question's passages, as JSON.

The view keeps the entities that the returned passages mention (each with the returned passages
that mention it) and the linked (seed) entities, the ``MAX_NODES`` best by PageRank score, and
the relation and synonym edges among the kept entities.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from mx_rag.graphrag.passage_rank import SYNONYM, PassageRanking

__all__ = ["MAX_EDGES", "MAX_NODES", "explanation"]

MAX_NODES = 50
MAX_EDGES = 200


def explanation(mode: str, docs: list[Document], ranking: PassageRanking | None) -> dict[str, Any]:
    """The JSON view of one retrieval.

    Returns:
        ``{"mode": str, "documents": [{"chunk_id", "source", "score", "text"}],
        "nodes": [{"name", "label", "type", "score", "seed", "chunk_ids"}],
        "edges": [{"source", "target", "relation", "kind", "chunk_ids"}]}``: nodes best
        first; a node's ``chunk_ids`` are the returned passages that mention it (possibly none
        for a seed); an edge's ``chunk_ids`` the passages stating it (``kind`` ``"synonym"``:
        none); relation triples (``use_text=False``) appear under ``documents`` with their
        ``chunk_ids``.
    """
    documents = [
        {"chunk_id": d.metadata.get("chunk_id"), "source": d.metadata.get("source"),
         "score": d.metadata.get("score"), "text": d.page_content,
         **({"chunk_ids": list(d.metadata["chunk_ids"])} if "chunk_ids" in d.metadata else {})}
        for d in docs
    ]  # fmt: skip
    view: dict[str, Any] = {"mode": mode, "documents": documents, "nodes": [], "edges": []}
    if ranking is None:
        return view
    returned = [str(d.metadata["chunk_id"]) for d in docs if d.metadata.get("chunk_id")]
    supports: dict[str, list[str]] = {}
    for name, node in ranking.nodes.items():
        found = [c for c in returned if c in node.sources]
        if found or name in ranking.seeds:
            supports[name] = found
    kept = sorted(supports, key=lambda n: (not supports[n], -ranking.entities.get(n, 0.0), n))[:MAX_NODES]
    view["nodes"] = [
        {"name": n, "label": ranking.nodes[n].label, "type": ranking.nodes[n].type,
         "score": round(ranking.entities.get(n, 0.0), 6), "seed": n in ranking.seeds, "chunk_ids": supports[n]}
        for n in kept
    ]  # fmt: skip
    chosen = set(kept)
    edges = [e for e in ranking.edges if e[0] in chosen and e[1] in chosen]
    view["edges"] = [
        {"source": s, "target": t, "relation": r, "kind": "synonym" if r == SYNONYM and not c else "relation",
         "chunk_ids": list(c)}
        for s, t, r, c in edges[:MAX_EDGES]
    ]  # fmt: skip
    return view
