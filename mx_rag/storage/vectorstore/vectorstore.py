# SPDX-License-Identifier: Apache-2.0
"""The ``VectorStore`` interface and the score scaling shared by its implementations."""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_number

if TYPE_CHECKING:
    from mx_rag.retrievers.retriever import Retriever

MAX_SEARCH_BATCH = 1024 * 1024

SCORE_SCALE: dict[str, Callable[[float], float]] = {
    "IP": lambda x: min(x, 1.0),
    "COSINE": lambda x: min(x, 1.0),
    "L2": lambda x: max(1.0 - x / 2.0, 0.0),  # squared L2 of unit vectors -> cosine similarity
}


class SearchMode(Enum):
    """Which vectors a store holds: dense, sparse (``{index: weight}``) or both (hybrid)."""

    DENSE = 0
    SPARSE = 1
    HYBRID = 2


class VectorStore(ABC):
    """Dense vectors keyed by integer ids (the chunk ids of the document store).

    ``search`` returns *scaled similarities*: higher is better, 1.0 at most; for unit vectors
    every metric maps to cosine similarity. Implementations: ``MindFAISS``, ``MilvusDB``.

    Example:
        >>> store.add([10, 11], [[1.0, 0.0], [0.0, 1.0]], document_id=3)
        >>> store.search([[1.0, 0.0]], k=1, filter_dict={"document_id": [3]})
        ([[1.0]], [[10]])
    """

    @abstractmethod
    def add(self, ids: Sequence[int], embeddings: Any, document_id: int | Sequence[int] = 0) -> None:
        """Insert vectors (an (n, dim) array-like) under ``ids``, tagged with ``document_id``
        (one id for all vectors, or one per vector)."""

    @abstractmethod
    def delete(self, ids: Sequence[int]) -> int:
        """Delete vectors by id; return how many were removed."""

    @abstractmethod
    def search(
        self, embeddings: Any, k: int = 3, filter_dict: dict[str, Any] | None = None
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Top-``k`` per query row: ``(scores, ids)``, best first; missing neighbours are dropped."""

    @abstractmethod
    def get_all_ids(self) -> list[int]:
        """Every stored id, ascending."""

    def count(self) -> int:
        """Number of stored vectors."""
        return len(self.get_all_ids())

    def ids_from(self, first_id: int, limit: int = 2) -> list[int]:
        """Up to ``limit`` stored ids ``>= first_id`` (in no particular order)."""
        ids = self.get_all_ids()
        start = bisect.bisect_left(ids, first_id)
        return ids[start : start + limit]

    def get_ntotal(self) -> int:
        return self.count()

    def update(self, ids: Sequence[int], dense: Any = None, sparse: Any = None) -> None:
        """Replace the vectors of existing ids (delete then add)."""
        if dense is None:
            raise ParameterError("dense must be given to update vectors")
        self.delete(list(ids))
        self.add(ids, dense)

    def add_sparse(self, ids: Sequence[int], sparse_embeddings: Any, document_id: int | Sequence[int] = 0) -> None:
        raise ParameterError(f"{type(self).__name__} does not store sparse vectors")

    def add_dense_and_sparse(
        self, ids: Sequence[int], dense_embeddings: Any, sparse_embeddings: Any, document_id: int | Sequence[int] = 0
    ) -> None:
        raise ParameterError(f"{type(self).__name__} does not store sparse vectors")

    def save_local(self) -> None:
        """Persist to disk where the store is file-backed (no-op otherwise)."""
        return None

    def get_save_file(self) -> str:
        return ""

    def search_with_threshold(
        self, embeddings: Any, k: int = 3, threshold: float = 0.1, filter_dict: dict[str, Any] | None = None
    ) -> tuple[list[list[float]], list[list[int]]]:
        """``search`` keeping, in every query row, only hits with ``score >= threshold``."""
        check_number("threshold", threshold, 0.0, 1.0)
        scores, ids = self.search(embeddings, k=k, filter_dict=filter_dict)
        kept = [
            [(s, i) for s, i in zip(row_s, row_i, strict=True) if s >= threshold]
            for row_s, row_i in zip(scores, ids, strict=True)
        ]
        return [[s for s, _ in row] for row in kept], [[i for _, i in row] for row in kept]

    def as_retriever(self, **kwargs: Any) -> Retriever:
        from mx_rag.retrievers.retriever import Retriever

        return Retriever(vector_store=self, **kwargs)


def as_matrix(name: str, embeddings: Any, dim: int | None = None) -> np.ndarray:
    """A C-contiguous float32 (n, dim) matrix from a list of lists or an array."""
    try:
        matrix = np.ascontiguousarray(np.asarray(embeddings, dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{name} must be a 2-D array of numbers: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ParameterError(f"{name} must be a non-empty 2-D array, got shape {matrix.shape}")
    if matrix.shape[0] > MAX_SEARCH_BATCH:
        raise ParameterError(f"{name} may have at most {MAX_SEARCH_BATCH} rows, got {matrix.shape[0]}")
    if dim is not None and matrix.shape[1] != dim:
        raise ParameterError(f"{name} must have {dim} columns (x_dim), got {matrix.shape[1]}")
    if not np.isfinite(matrix).all():
        raise ParameterError(f"{name} contains NaN or infinite values")
    return matrix
