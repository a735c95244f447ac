# SPDX-License-Identifier: Apache-2.0
"""``BM25Index``: Okapi BM25 over texts held in memory (jieba for Chinese, words elsewhere).

Used where the texts are a short list given by the caller (``BMRetriever``'s documents, the
fine-tuning data filter), not a store: stores rank in their database.

>>> index = BM25Index(["FAISS searches dense vectors", "Bananas are yellow", "dense fog"])
>>> [round(s, 3) for s in index.scores(["dense", "vectors"])]
[1.262, 0.0, 0.553]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from mx_rag.storage.document_store.text_tokens import tokenize

__all__ = ["BM25Index"]


class BM25Index:
    """BM25 scores of query tokens against each text (``k1`` 1.5, ``b`` 0.75, Lucene's idf, never negative)."""

    def __init__(self, texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._counts = [Counter(tokenize(text)) for text in texts]
        self._lengths = [sum(c.values()) for c in self._counts]
        total = sum(self._lengths)
        self._avg = total / len(self._lengths) if total else 1.0
        frequency: Counter[str] = Counter()
        for counts in self._counts:
            frequency.update(counts.keys())
        n = len(self._counts)
        self._idf = {term: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def __len__(self) -> int:
        return len(self._counts)

    def scores(self, tokens: Sequence[str]) -> list[float]:
        """One score per text for the query ``tokens`` (a repeated token counts once)."""
        terms = [t for t in dict.fromkeys(tokens) if t in self._idf]
        out: list[float] = []
        for counts, length in zip(self._counts, self._lengths, strict=True):
            norm = self.k1 * (1.0 - self.b + self.b * length / self._avg)
            score = 0.0
            for term in terms:
                tf = counts.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self.k1 + 1.0) / (tf + norm)
            out.append(score)
        return out

    def query(self, text: str) -> list[float]:
        """``scores`` of the tokens of ``text``."""
        return self.scores(tokenize(text))
