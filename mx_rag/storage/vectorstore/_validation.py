# SPDX-License-Identifier: Apache-2.0
"""Argument checks shared by the vector stores; each raises ``ParameterError`` naming the parameter."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, fail
from mx_rag.utils.common import MAX_TOP_K

INT64_MAX = 2**63 - 1
MAX_FILTER_KEYS = 32
MAX_FILTER_DOCUMENTS = 1024 * 1024
MAX_SPARSE_INDEX = 2**32 - 1
FILTER_KEYS = ("document_id",)


def check_k(k: Any) -> int:
    return check_int("k", k, 1, MAX_TOP_K)


def check_document_id(document_id: Any) -> int:
    return check_int("document_id", document_id, 0, INT64_MAX)


def check_document_ids(document_id: Any, rows: int) -> list[int]:
    """One document id per vector: an int for all of them, or a list with one int per row."""
    if isinstance(document_id, (list, tuple, np.ndarray)):
        if len(document_id) != rows:
            raise ParameterError(f"document_id must hold one id per vector ({rows}), got {len(document_id)}")
        return [
            check_int(f"document_id[{i}]", int(d) if isinstance(d, np.integer) else d, 0, INT64_MAX)
            for i, d in enumerate(document_id)
        ]
    return [check_document_id(document_id)] * rows


def check_ids(
    name: str, ids: Any, *, rows: int | None = None, allow_empty: bool = False, unique: bool = True
) -> np.ndarray:
    """Caller ids as a 1-D int64 array of non-negative ints, ``rows`` of them if given.

    With ``unique`` a repeated id is an error; without it repeats are dropped (order kept).
    """
    if isinstance(ids, np.ndarray) and ids.ndim == 1 and ids.dtype.kind in "iu":
        values: list[Any] = ids.tolist()
    else:
        if isinstance(ids, (str, bytes, Mapping)) or not hasattr(ids, "__len__"):
            raise fail(name, ids, "a list of ints")
        values = list(ids)
        if not all(type(v) is int for v in values):  # the common case needs no per-element checks
            for value in values:
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                    raise fail(f"{name} element", value, "an int")
    bad = [v for v in values if not 0 <= v <= INT64_MAX]
    if bad:
        raise fail(f"{name} element", bad[0], f"an int in [0, {INT64_MAX}]")
    array = np.fromiter(values, dtype=np.int64, count=len(values))
    if len(array) == 0 and not allow_empty:
        raise ParameterError(f"{name} must be a non-empty list of ints")
    if rows is not None and len(array) != rows:
        raise ParameterError(f"{name} has {len(array)} ids but the embeddings have {rows} rows")
    if not unique:
        _, first = np.unique(array, return_index=True)
        return array[np.sort(first)]
    if len(np.unique(array)) != len(array):
        seen, dup = set(), []
        for value in array.tolist():
            if value in seen:
                dup.append(value)
            seen.add(value)
        raise ParameterError(f"{name} must be unique, got duplicates {dup[:10]}")
    return array


def check_filter(filter_dict: Any) -> list[int] | None:
    """The document ids a ``filter_dict`` keeps (sorted, unique), or None for no filter.

    Only ``{"document_id": [int, ...]}`` is understood; any other key is refused rather than
    silently ignored, so a typo cannot turn a filtered search into an unfiltered one.
    """
    if filter_dict is None:
        return None
    if not isinstance(filter_dict, Mapping):
        raise fail("filter_dict", filter_dict, 'a dict like {"document_id": [1, 2]}')
    if not filter_dict:
        return None
    if len(filter_dict) > MAX_FILTER_KEYS:
        raise ParameterError(f"filter_dict may have at most {MAX_FILTER_KEYS} keys, got {len(filter_dict)}")
    unknown = sorted(str(key) for key in filter_dict if key not in FILTER_KEYS)
    if unknown:
        raise ParameterError(f"filter_dict keys must be in {list(FILTER_KEYS)}, got unsupported keys {unknown}")
    docs = filter_dict["document_id"]
    if isinstance(docs, (str, bytes, Mapping)) or not isinstance(docs, (list, tuple, set, frozenset, np.ndarray)):
        raise fail("filter_dict['document_id']", docs, "a list of ints")
    if len(docs) > MAX_FILTER_DOCUMENTS:
        raise ParameterError(f"filter_dict['document_id'] may hold at most {MAX_FILTER_DOCUMENTS} ids, got {len(docs)}")
    for value in docs:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise fail("filter_dict['document_id'] element", value, "an int")
    return sorted({int(v) for v in docs})


def check_sparse(name: str, sparse: Any, *, rows: int | None = None) -> list[dict[int, float]]:
    """Sparse vectors: a non-empty list of ``{index: weight}`` dicts with finite weights."""
    if not isinstance(sparse, (list, tuple)) or not sparse:
        raise fail(name, sparse, "a non-empty list of {int: float} dicts")
    if rows is not None and len(sparse) != rows:
        raise ParameterError(f"{name} has {len(sparse)} rows but {rows} ids were given")
    out: list[dict[int, float]] = []
    for row in sparse:
        if not isinstance(row, Mapping):
            raise fail(f"{name} element", row, "a dict of int to float")
        clean: dict[int, float] = {}
        for key, weight in row.items():
            if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= key <= MAX_SPARSE_INDEX:
                raise fail(f"{name} index", key, f"an int in [0, {MAX_SPARSE_INDEX}]")
            if isinstance(weight, bool) or not isinstance(weight, (int, float, np.floating, np.integer)):
                raise fail(f"{name} weight", weight, "a finite number")
            if not math.isfinite(float(weight)):
                raise fail(f"{name} weight", weight, "a finite number")
            clean[int(key)] = float(weight)
        out.append(clean)
    return out


def check_params(name: str, params: Any, allowed: Mapping[str, tuple[int, int]]) -> dict[str, int]:
    """An optional dict of int tuning knobs, each within its range; unknown keys are refused."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise fail(name, params, f"a dict with keys in {sorted(allowed)}")
    unknown = sorted(str(key) for key in params if key not in allowed)
    if unknown:
        raise ParameterError(f"{name} keys must be in {sorted(allowed)}, got unsupported keys {unknown}")
    return {key: check_int(f"{name}[{key!r}]", value, *allowed[key]) for key, value in params.items()}
