# SPDX-License-Identifier: Apache-2.0
"""SQL of ``OpenGaussDB``: table layout, index DDL, vector literals and distance-to-score maps.

openGauss's vector engine (DataVec) and PostgreSQL's pgvector share the types (``vector(n)``,
``sparsevec(n)``), the distance operators (``<->`` L2, ``<#>`` negative inner product, ``<=>``
cosine distance), the index methods (``hnsw``, ``ivfflat``) and their operator classes, so one
SQL text serves both. What differs is how a search is tuned: pgvector reads ``hnsw.ef_search``,
``ivfflat.probes`` and (0.8 and later) ``*.iterative_scan``; on openGauss none is set.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import numpy as np

from mx_rag.errors import ParameterError
from mx_rag.storage.vectorstore.vectorstore import SCORE_SCALE
from mx_rag.utils.checks import fail

INDEX_TYPES = ("HNSW", "IVFFLAT")
METRIC_TYPES = ("IP", "L2", "COSINE")
MAX_DENSE_DIM: Final = 2000  # the widest vector an HNSW or IVFFLAT index takes
MAX_SPARSE_DIM: Final = 1_000_000_000
MAX_TABLE_NAME: Final = 63  # PostgreSQL's identifier length, in bytes
OPERATOR = {"IP": "<#>", "L2": "<->", "COSINE": "<=>"}
OPS_SUFFIX = {"IP": "ip_ops", "L2": "l2_ops", "COSINE": "cosine_ops"}
# Index build parameters each index method takes (name -> allowed range).
BUILD_PARAMS = {"HNSW": {"m": (2, 100), "ef_construction": (4, 1000)}, "IVFFLAT": {"lists": (1, 32768)}}
DEFAULT_LISTS = 100
DEFAULT_EF_SEARCH = 64  # as MilvusDB's and MindFAISS's HNSW searches (pgvector's own default is 40)
MAX_EF_SEARCH = 1000
MAX_SPARSE_NONZERO = 1000  # the most non-zero weights a sparsevec in an HNSW index may have


def score_of(metric: str) -> Callable[[float], float]:
    """Database distance -> the scaled similarity of ``VectorStore.search`` (higher is better)."""
    if metric == "IP":
        return lambda d: SCORE_SCALE["IP"](-d)  # <#> is the negative inner product
    if metric == "L2":
        return lambda d: SCORE_SCALE["L2"](d * d)  # <-> is the distance, the scale takes its square
    return lambda d: SCORE_SCALE["COSINE"](1.0 - d)  # <=> is 1 - cosine similarity


def dense_literal(row: np.ndarray) -> str:
    """``[x,y,...]``, the text form of a ``vector`` (float32 values printed exactly)."""
    return "[" + ",".join(map(repr, row.tolist())) + "]"


def sparse_literal(row: dict[int, float], dim: int, name: str) -> str:
    """``{i:w,...}/dim``, the text form of a ``sparsevec`` (its indices count from 1)."""
    too_big = [index for index in row if index >= dim]
    if too_big:
        raise ParameterError(f"{name} holds index {too_big[0]}, but sparse_dim is {dim} (indices 0 to {dim - 1})")
    pairs = [(index, weight) for index, weight in sorted(row.items()) if weight != 0.0]
    if len(pairs) > MAX_SPARSE_NONZERO:
        raise ParameterError(f"{name} has {len(pairs)} non-zero weights; the HNSW index of sparse vectors takes at "
                             f"most {MAX_SPARSE_NONZERO}")
    return "{" + ",".join(f"{index + 1}:{weight!r}" for index, weight in pairs) + "}/" + str(dim)


def check_table_name(name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise fail("collection_name", name, "a Python identifier of ASCII letters, digits and _")
    if len(name) > MAX_TABLE_NAME:
        raise fail("collection_name", name, f"at most {MAX_TABLE_NAME} characters (a PostgreSQL identifier)")
    return name


def check_build_params(params: Any, index_type: str) -> tuple[dict[str, int], dict[str, int]]:
    """``params`` (``{"dense": {...}, "sparse": {...}}``) checked: (dense, sparse) build parameters."""
    if params is None:
        return {}, {}
    if not isinstance(params, dict) or not set(params) <= {"dense", "sparse"}:
        raise fail("params", params, 'None or a dict with keys "dense" and/or "sparse"')
    out = []
    for key, method in (("dense", index_type), ("sparse", "HNSW")):
        given = params.get(key) or {}
        allowed = BUILD_PARAMS[method]
        if not isinstance(given, dict) or not set(given) <= set(allowed):
            raise fail(f"params[{key!r}]", given, f"a dict with keys in {sorted(allowed)} ({method} index)")
        checked = {}
        for name, value in given.items():
            low, high = allowed[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise fail(f"params[{key!r}][{name!r}]", value, f"an int in [{low}, {high}]")
            checked[name] = value
        out.append(checked)
    return out[0], out[1]


def index_ddl(quote: Callable[[str], str], table: str, column: str, kind: str, method: str, metric: str,
              params: dict[str, int]) -> str:
    """``CREATE INDEX IF NOT EXISTS`` of one vector column (``kind``: ``vector`` or ``sparsevec``)."""
    name = quote(f"{table}_{column}_{method.lower()}")
    options = dict(params)
    if method == "IVFFLAT":
        options.setdefault("lists", DEFAULT_LISTS)
    with_ = f" WITH ({', '.join(f'{k} = {int(v)}' for k, v in options.items())})" if options else ""
    return (f"CREATE INDEX IF NOT EXISTS {name} ON {quote(table)} USING {method.lower()} "
            f"({quote(column)} {kind}_{OPS_SUFFIX[metric]}){with_}")


def tuning(method: str, k: int, lists: int, iterative: bool) -> dict[str, str]:
    """pgvector's search settings for one query of ``k`` results (set with ``set_config(..., true)``).

    HNSW looks at ``ef_search`` candidates (64, or ``k`` if more); IVFFLAT probes the square root of its
    lists. With pgvector 0.8's iterative scans a filtered search goes on scanning until ``k`` rows
    pass the filter instead of returning fewer.
    """
    if method == "HNSW":
        settings = {"hnsw.ef_search": str(min(max(k, DEFAULT_EF_SEARCH), MAX_EF_SEARCH))}
        if iterative:
            settings["hnsw.iterative_scan"] = "strict_order"
        return settings
    settings = {"ivfflat.probes": str(max(1, math.isqrt(lists)))}
    if iterative:
        settings["ivfflat.iterative_scan"] = "relaxed_order"
    return settings
