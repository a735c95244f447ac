# SPDX-License-Identifier: Apache-2.0
"""``ClusterCompressor``: cluster the context's pieces by embedding; drop each cluster's least relevant."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter

from mx_rag.compress.base_compressor import (
    DEFAULT_COMPRESS_RATE,
    PromptCompressor,
    check_compress_args,
    check_splitter,
    pieces,
    select,
)
from mx_rag.utils.checks import check_int, fail
from mx_rag.utils.common import MAX_DEVICE_ID

__all__ = ["ClusterCompressor"]

MAX_LABELS = 1000 * 1000
ClusterFunc = Callable[[list[list[float]]], list[int] | np.ndarray]


def _cosine(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query) or 1.0)
    return (vectors @ query) / np.where(norms == 0, 1.0, norms)


def _labels(raw: Any, count: int) -> list[int]:
    if not isinstance(raw, (list, np.ndarray)):
        raise fail("cluster_func result", raw, "a list of ints or a numpy array")
    labels = np.asarray(raw).reshape(-1)
    if labels.size != count or labels.size > MAX_LABELS:
        raise fail("cluster_func result", f"<{labels.size} labels>", f"one label per piece ({count})")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        raise fail("cluster_func result", raw, "integer labels")
    return [int(label) for label in labels]


class ClusterCompressor(PromptCompressor):
    """Cluster the pieces of a context; in each cluster, drop the pieces least similar to the question.

    Args:
        cluster_func: takes the pieces' embeddings, returns one integer label per piece (a list
            or an ndarray; e.g. sklearn's ``HDBSCAN().fit_predict``). Label -1 (noise) is one
            cluster like any other.
        embed: a LangChain ``Embeddings`` (``TextEmbedding``, ``TEIEmbedding``).
        splitter: a LangChain ``TextSplitter``; default ``RecursiveCharacterTextSplitter(
            chunk_size=100, chunk_overlap=0, separators=["。", "！", "？", "\\n", "，", "；", " ", ""])``.
        dev_id: accepted for compatibility, in [0, 63]; the embedder owns its device.

    Example:
        >>> from mx_rag.compress import ClusterCompressor
        >>> # compressor = ClusterCompressor(cluster_func=lambda v: [0] * len(v), embed=TextEmbedding())
        >>> # shorter = compressor.compress_texts(long_text, "What does FAISS index?", 0.6)
    """

    def __init__(
        self,
        cluster_func: ClusterFunc,
        embed: Embeddings,
        splitter: TextSplitter | None = None,
        dev_id: int = 0,
    ) -> None:
        if not callable(cluster_func):
            raise fail("cluster_func", cluster_func, "a callable")
        if not isinstance(embed, Embeddings):
            raise fail("embed", embed, "a langchain_core Embeddings")
        self.cluster_func = cluster_func
        self.embed = embed
        if splitter is None:
            splitter = RecursiveCharacterTextSplitter(
                chunk_size=100, chunk_overlap=0, separators=["。", "！", "？", "\n", "，", "；", " ", ""]
            )
        self.splitter = check_splitter(splitter)
        self.dev_id = check_int("dev_id", dev_id, 0, MAX_DEVICE_ID)

    def compress_texts(
        self, context: str, question: str, compress_rate: float = DEFAULT_COMPRESS_RATE
    ) -> str:
        """Drop about ``compress_rate`` of each cluster's characters, the pieces least similar first.

        Args:
            context: 1 to 16 MiB characters.
            question: 1 to 1,000,000 characters.
            compress_rate: the share to drop, in (0, 1). Default 0.6.

        Returns:
            The compressed context, its pieces in their original order.
        """
        rate = check_compress_args(context, question, compress_rate)
        parts = pieces(context, self.splitter)
        if len(parts) < 2:
            return context
        vectors = self.embed.embed_documents([part.strip() or part for part in parts])
        labels = _labels(self.cluster_func(vectors), len(parts))
        similarity = _cosine(np.asarray(vectors, dtype=np.float64), np.asarray(self.embed.embed_query(question)))
        clusters: dict[int, list[int]] = defaultdict(list)
        for index, label in enumerate(labels):
            clusters[label].append(index)
        kept: list[int] = []
        for members in clusters.values():
            chosen = select([parts[i] for i in members], [similarity[i] for i in members], rate)
            kept.extend(members[i] for i in chosen)
        return "".join(parts[i] for i in sorted(kept))
