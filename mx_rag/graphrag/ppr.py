# SPDX-License-Identifier: Apache-2.0
"""Personalized PageRank over a small weighted undirected graph, in numpy (no graph library).

``personalized_pagerank(size, edges, reset, damping)``: ``edges`` are ``(u, v, weight)`` triples
over node indexes ``0 .. size - 1`` (each taken in both directions), ``reset`` the unnormalised
restart distribution. A walker follows an edge with probability ``damping`` (chosen in
proportion to the edge weights) and restarts with probability ``1 - damping``; a node without
edges sends its mass back to the restart distribution. Power iteration stops when the L1
change falls below ``tolerance`` or after ``max_iterations``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["personalized_pagerank"]


def personalized_pagerank(
    size: int,
    edges: Sequence[tuple[int, int, float]],
    reset: np.ndarray,
    damping: float = 0.5,
    max_iterations: int = 50,
    tolerance: float = 1e-8,
) -> np.ndarray:
    """The stationary distribution (sums to 1), one score per node; zeros if ``reset`` is all 0."""
    restart = np.asarray(reset, dtype=np.float64)
    total = restart.sum()
    if size == 0 or total <= 0:
        return np.zeros(size)
    restart = restart / total
    if not edges:
        return restart
    pairs = np.asarray([(u, v) for u, v, _ in edges], dtype=np.int64)
    weight = np.asarray([w for _, _, w in edges], dtype=np.float64)
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    weight = np.concatenate([weight, weight])
    out = np.bincount(src, weights=weight, minlength=size)
    share = weight / out[src]
    dangling = out == 0
    scores = restart.copy()
    for _ in range(max_iterations):
        walked = np.bincount(dst, weights=scores[src] * share, minlength=size)
        updated = (1 - damping) * restart + damping * (walked + scores[dangling].sum() * restart)
        change = float(np.abs(updated - scores).sum())
        scores = updated
        if change < tolerance:
            break
    return scores / scores.sum()
