# SPDX-License-Identifier: Apache-2.0
"""The requests and the ranker of ``MilvusDB.hybrid_search`` (pymilvus is passed in, not imported)."""

from __future__ import annotations

from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_number, fail

MAX_RRF_K = 16384


def ranker(pymilvus: Any, weights: Any, rrf_k: Any) -> Any:
    """``RRFRanker(rrf_k)`` without ``weights``; ``WeightedRanker(dense, sparse)`` with them.

    Reciprocal rank fusion scores a hit ``sum(1 / (rrf_k + rank))`` over the two lists; the weighted
    ranker sums each list's score squashed into (0, 1) by Milvus (``norm_score``), times its weight.
    """
    rrf_k = check_int("rrf_k", rrf_k, 1, MAX_RRF_K)
    if weights is None:
        return pymilvus.RRFRanker(rrf_k)
    if not isinstance(weights, (list, tuple)) or len(weights) != 2:
        raise fail("weights", weights, "None or (dense weight, sparse weight), each in [0, 1]")
    dense, sparse = (check_number(f"weights[{i}]", w, 0.0, 1.0) for i, w in enumerate(weights))
    if dense == sparse == 0.0:
        raise ParameterError("weights must not both be 0")
    return pymilvus.WeightedRanker(dense, sparse, norm_score=True)


def requests(pymilvus: Any, dense: list[Any], sparse: list[Any], *, k: int, expr: str, params: dict[str, Any],
             metric: str, knobs: dict[str, Any]) -> list[Any]:
    """One dense and one sparse ``AnnSearchRequest``, each for the ``k`` best of its field."""
    common = {"limit": k, "expr": expr, **({"expr_params": params} if params else {})}
    return [
        pymilvus.AnnSearchRequest(data=dense, anns_field="vector", param={"metric_type": metric, "params": knobs},
                                  **common),
        pymilvus.AnnSearchRequest(data=sparse, anns_field="sparse_vector", param={"metric_type": "IP", "params": {}},
                                  **common),
    ]
