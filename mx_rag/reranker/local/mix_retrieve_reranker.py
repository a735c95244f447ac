# SPDX-License-Identifier: Apache-2.0
"""``MixRetrieveReranker``: fuses dense and sparse (BM25) results with a query-length-dependent weight."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from mx_rag.errors import ParameterError
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.checks import check_int, check_number, check_str, fail
from mx_rag.utils.common import MAX_BATCH_SIZE, MB

__all__ = ["MixRetrieveReranker"]

MAX_TEXTS = 1_000_000
RETRIEVAL_TYPES = ("dense", "sparse")


def _score(doc: Document) -> float:
    return float(doc.metadata.get("score", 0.0))


def _normalise(scores: list[float]) -> list[float]:
    """Min-max scaled to [0, 1]; equal scores (one result, say) all count as the best, 1.0."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


class MixRetrieveReranker(Reranker):
    """Merges the results of a dense and a sparse search of one query into one ranking.

    Each document carries ``metadata["retrieval_type"]`` (``"dense"`` or ``"sparse"``) and
    ``metadata["score"]`` (higher is better). Scores are min-max normalised per retrieval type;
    a text found by both searches (same ``page_content``) adds its two parts. The dense weight
    depends on the query's length in characters::

        w = baseline + amplitude / (1 + exp(-slope * (len(query) - midpoint)))
        score = w * dense + (1 - w) * sparse

    so short (keyword-like) queries lean on the sparse search and long ones on the dense one.

    Args:
        k: how many documents ``rerank`` returns, 1 to 10000 (default 100).
        baseline: the weight of the dense score for very short queries, 0 to 1 (default 0.4).
        amplitude: what long queries add to it, 0 to 1 (default 0.3); ``baseline + amplitude`` must
            not exceed 1.
        slope: steepness of the transition, above 0 (default 1).
        midpoint: query length at the middle of the transition, above 0 (default 6).

    Example:
        >>> from langchain_core.documents import Document
        >>> docs = [Document(page_content="document1", metadata={"score": 1.0, "retrieval_type": "dense"}),
        ...         Document(page_content="document2", metadata={"score": 2.0, "retrieval_type": "sparse"})]
        >>> reranker = MixRetrieveReranker(k=100)
        >>> [d.page_content for d in reranker.rerank("这是一个问题", docs)]  # 6 characters: dense weight 0.55
        ['document1', 'document2']
        >>> [d.page_content for d in reranker.rerank("问题", docs)]  # short: sparse leads
        ['document2', 'document1']
    """

    def __init__(self, k: int = 100, baseline: float = 0.4, amplitude: float = 0.3, slope: float = 1,
                 midpoint: float = 6) -> None:
        super().__init__(k)
        self.baseline = check_number("baseline", baseline, 0.0, 1.0)
        self.amplitude = check_number("amplitude", amplitude, 0.0, 1.0)
        self.slope = check_number("slope", slope, 0.0, math.inf, low_open=True)
        self.midpoint = check_number("midpoint", midpoint, 0.0, math.inf, low_open=True)
        if self.baseline + self.amplitude > 1.0:
            raise ParameterError(f"baseline + amplitude must be at most 1 (the dense weight stays in [0, 1]), "
                                 f"got {self.baseline} + {self.amplitude}")

    def dense_weight(self, query: str) -> float:
        """The weight of the dense score for ``query``, in [baseline, baseline + amplitude]."""
        exponent = -self.slope * (len(query) - self.midpoint)
        return self.baseline + self.amplitude / (1.0 + math.exp(min(exponent, 700.0)))

    def rerank(self, query: str, texts: Sequence[Any], batch_size: int = 32) -> list[Document]:  # type: ignore[override]
        """The ``k`` best documents of ``texts``, best first, with ``metadata["mix_score"]``.

        Args:
            query: the question, 1 to 1 Mi characters.
            texts: 1 to 1,000,000 ``Document``s from the dense and sparse searches.
            batch_size: accepted for the base signature, 1 to 1024; unused.

        Inputs are not modified; a document found by both searches comes back once, with
        ``retrieval_type`` ``"both"``.
        """
        check_str("query", query, 1, MB)
        check_int("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        if not isinstance(texts, (list, tuple)) or not 1 <= len(texts) <= MAX_TEXTS:
            raise fail("texts", texts, f"a list of 1 to {MAX_TEXTS} Documents")
        groups: dict[str, list[int]] = {kind: [] for kind in RETRIEVAL_TYPES}
        for i, doc in enumerate(texts):
            if not isinstance(doc, Document):
                raise fail(f"texts[{i}]", doc, "a langchain_core Document")
            check_str(f"texts[{i}].page_content", doc.page_content, 1, MB)
            kind = doc.metadata.get("retrieval_type")
            if kind not in groups:
                raise fail(f"texts[{i}].metadata['retrieval_type']", kind, f"one of {list(RETRIEVAL_TYPES)}")
            score = doc.metadata.get("score", 0.0)
            if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
                raise fail(f"texts[{i}].metadata['score']", score, "a number")
            groups[kind].append(i)
        weight = self.dense_weight(query)
        parts = {"dense": weight, "sparse": 1.0 - weight}
        merged: dict[str, dict[str, Any]] = {}
        for kind, indices in groups.items():
            best: dict[str, int] = {}  # one search listing a text twice: its better score counts
            for i in indices:
                text = texts[i].page_content
                if text not in best or _score(texts[i]) > _score(texts[best[text]]):
                    best[text] = i
            kept = list(best.values())
            normalised = _normalise([_score(texts[i]) for i in kept])
            for i, value in zip(kept, normalised, strict=True):
                entry = merged.setdefault(texts[i].page_content, {"doc": texts[i], "kinds": [], "score": 0.0})
                entry["kinds"].append(kind)
                entry["score"] += parts[kind] * value
        ranked = sorted(merged.values(), key=lambda e: -e["score"])[: self.k]
        out = []
        for entry in ranked:
            doc = entry["doc"]
            kind = "both" if len(entry["kinds"]) == 2 else entry["kinds"][0]
            out.append(Document(page_content=doc.page_content, id=doc.id,
                                metadata={**doc.metadata, "retrieval_type": kind, "mix_score": entry["score"]}))
        return out
