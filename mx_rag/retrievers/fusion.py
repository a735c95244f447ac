# SPDX-License-Identifier: Apache-2.0
"""Reciprocal rank fusion of several ranked Document lists."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

RRF_K = 60  # the usual constant (Cormack et al., 2009); LangChain's EnsembleRetriever uses it too


def document_key(doc: Document) -> str:
    """Identity of a retrieved chunk: its text (ids differ between retrieval paths)."""
    return doc.page_content


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Document]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[Document]:
    """Merge ranked lists: each document scores the sum of ``weight / (k + rank)`` over the lists it
    is in (``weights``: one per list, default all 1).

    The first occurrence of a document keeps its metadata, plus ``rrf_score``; best first, ties
    broken by first appearance.
    """
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    elif len(weights) != len(ranked_lists):
        raise ValueError(f"weights: {len(weights)} given for {len(ranked_lists)} ranked lists")
    scores: dict[str, float] = {}
    first: dict[str, Document] = {}
    for docs, weight in zip(ranked_lists, weights, strict=True):
        for rank, doc in enumerate(docs, start=1):
            key = document_key(doc)
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
            first.setdefault(key, doc)
    order = sorted(scores, key=lambda key: -scores[key])  # sorted() is stable: ties keep first appearance
    return [
        Document(page_content=first[key].page_content, metadata={**first[key].metadata, "rrf_score": scores[key]})
        for key in order
    ]


def unique(docs: Sequence[Document]) -> list[Document]:
    """Drop repeated chunks, keeping the first occurrence."""
    seen: set[str] = set()
    out: list[Document] = []
    for doc in docs:
        key = document_key(doc)
        if key not in seen:
            seen.add(key)
            out.append(doc)
    return out
