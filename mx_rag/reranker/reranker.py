# SPDX-License-Identifier: Apache-2.0
"""``Reranker``: scores (query, text) pairs; ``rerank_top_k`` keeps the best ``k``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from langchain_core.documents import Document

from mx_rag.utils.checks import check_int, fail
from mx_rag.utils.common import MAX_TOP_K
from mx_rag.utils.factory import Creatable

T = TypeVar("T", str, Document)

MAX_RERANK_ITEMS = 1_000_000


class Reranker(ABC, Creatable):
    """Base of rerankers: ``rerank`` gives one score per text (higher is more relevant).

    Args:
        k: how many items ``rerank_top_k`` keeps, in [1, 10000].
    """

    def __init__(self, k: int = 1) -> None:
        self.k = check_int("k", k, 1, MAX_TOP_K)

    @abstractmethod
    def rerank(self, query: str, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One score per text, in input order."""

    def rerank_top_k(self, objs: Sequence[T], scores: Any) -> list[T]:
        """The ``k`` best of ``objs`` (strings or Documents) by ``scores``, best first, stable.

        Documents keep their metadata and get ``rerank_score``.
        """
        values = np.asarray(scores, dtype=np.float64)
        if values.ndim != 1 or not 1 <= values.size <= MAX_RERANK_ITEMS:
            raise fail("scores", scores, f"a 1-D array of 1 to {MAX_RERANK_ITEMS} numbers")
        if not isinstance(objs, (list, tuple)) or len(objs) != values.size:
            raise fail("objs", objs, f"a list of {values.size} strings or Documents (one per score)")
        order = np.argsort(-values, kind="stable")[: self.k]
        kept: list[T] = []
        for i in order:
            obj = objs[int(i)]
            if isinstance(obj, Document):
                obj = Document(
                    page_content=obj.page_content, metadata={**obj.metadata, "rerank_score": float(values[i])}
                )
            kept.append(obj)
        return kept
