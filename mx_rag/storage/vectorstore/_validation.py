# SPDX-License-Identifier: Apache-2.0
"""Argument checks of the vector stores only (document tags, sparse vectors, tuning knobs); the
checks they share with the chunk stores (``k``, ids, ``filter_dict``) are in
``mx_rag.storage.validation``. Each raises ``ParameterError`` naming the parameter."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mx_rag.errors import ParameterError
from mx_rag.storage.validation import check_id
from mx_rag.utils.checks import check_int, fail

MAX_SPARSE_INDEX = 2**32 - 1


def check_document_id(document_id: Any) -> int:
    return check_id("document_id", document_id)


def check_document_ids(document_id: Any, rows: int) -> list[int]:
    """One document id per vector: an int for all of them, or a list with one int per row."""
    if isinstance(document_id, (list, tuple, np.ndarray)):
        if len(document_id) != rows:
            raise ParameterError(f"document_id must hold one id per vector ({rows}), got {len(document_id)}")
        return [check_id(f"document_id[{i}]", d) for i, d in enumerate(document_id)]
    return [check_document_id(document_id)] * rows


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
