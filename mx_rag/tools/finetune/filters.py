# SPDX-License-Identifier: Apache-2.0
"""Selection of generated (question, passage) pairs: BM25 + reranker rank fusion, and LLM scores."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from mx_rag.retrievers.bm25 import BM25Index

__all__ = ["RRF_K", "feature_pairs", "parse_score", "rank_fusion_scores"]

RRF_K = 60
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def rank_fusion_scores(*score_lists: Sequence[float]) -> list[float]:
    """Reciprocal rank fusion: for each item, the sum over lists of ``1 / (60 + rank)`` (rank 1 = best).

    >>> [round(s, 5) for s in rank_fusion_scores([3.0, 1.0, 2.0], [0.1, 0.9, 0.5])]
    [0.03227, 0.03227, 0.03226]
    """
    fused = [0.0] * len(score_lists[0])
    for scores in score_lists:
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        for rank, i in enumerate(order, start=1):
            fused[i] += 1.0 / (RRF_K + rank)
    return fused


def feature_pairs(pairs: Sequence[tuple[str, str]], reranker: Any, percentage: float,
                  batch_size: int = 32) -> list[tuple[str, str]]:
    """The best ``percentage`` of ``pairs`` (at least one), by fused BM25 and reranker ranks.

    BM25 scores each question against its own passage within the index of all passages (so a
    question that names its passage's rare words ranks high); the reranker scores the pair
    directly. Pairs keep their order.
    """
    if not pairs:
        return []
    docs = list(dict.fromkeys(doc for _, doc in pairs))
    index = BM25Index(docs)
    position = {doc: i for i, doc in enumerate(docs)}
    bm25 = [index.query(query)[position[doc]] for query, doc in pairs]
    rerank = [float(reranker.rerank(query, [doc], batch_size=batch_size)[0]) for query, doc in pairs]
    fused = rank_fusion_scores(bm25, rerank)
    keep = max(1, math.ceil(len(pairs) * percentage))
    chosen = sorted(sorted(range(len(pairs)), key=lambda i: -fused[i])[:keep])
    return [pairs[i] for i in chosen]


def parse_score(answer: str) -> float | None:
    """The relevance score in an LLM answer, in [0, 1]: the first number; a number above 1
    (and at most 100) is read as a percentage. None when there is none.

    >>> parse_score("分数：0.85"), parse_score("得分是62.5"), parse_score("无法判断")
    (0.85, 0.625, None)
    """
    match = _NUMBER.search(answer)
    if match is None:
        return None
    value = float(match.group())
    if value > 1.0:
        value = value / 100.0 if value <= 100.0 else math.nan
    return None if math.isnan(value) else value
