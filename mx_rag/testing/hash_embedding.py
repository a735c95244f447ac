# SPDX-License-Identifier: Apache-2.0
"""``HashEmbedding``: a deterministic, dependency-free lexical embedder for tests and demos."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from langchain_core.embeddings import Embeddings

_TOKEN = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "in",
        "is",
        "it",
        "me",
        "of",
        "on",
        "or",
        "tell",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "about",
    ]
)


class HashEmbedding(Embeddings):
    """Bag-of-words vectors by feature hashing, L2-normalised.

    Texts sharing words get a positive cosine similarity, so retrieval behaves sensibly, yet no
    model is loaded. CJK characters count as single tokens; common English function words are
    ignored.

    Example:
        >>> emb = HashEmbedding(dim=64)
        >>> len(emb.embed_query("hello world"))
        64
    """

    def __init__(self, dim: int = 384) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 65536:
            raise ValueError(f"dim must be an int in [1, 65536], got {dim!r}")
        self.dim = dim

    def _tokens(self, text: str) -> list[str]:
        tokens: list[str] = []
        for word in _TOKEN.findall(text.lower()):
            if any("\u4e00" <= ch <= "\u9fff" for ch in word):
                tokens.extend(word)
            elif word not in _STOPWORDS:
                tokens.append(word)
        return tokens

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for token in self._tokens(text):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0:
            vector[0] = norm = 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str], **_: Any) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)
