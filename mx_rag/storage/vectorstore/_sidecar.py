# SPDX-License-Identifier: Apache-2.0
"""The sidecar of a FAISS index file: each id's ``document_id`` and how the index was built.

``<index file>.meta.npz`` holds three arrays: ``ids`` and ``document_ids`` (int64, same length)
and ``meta`` (a JSON string: metric, index type, dimension, format version). It is written
before the index file on every save, so after a crash it may be one save ahead of the index;
``reconcile`` drops ids the index lacks and gives ids it lacks document 0. No pickle is used.
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from mx_rag.errors import StorageError

logger = logging.getLogger(__name__)

SUFFIX = ".meta.npz"
FORMAT_VERSION = 1


def path_for(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + SUFFIX)


def write(target: str, ids: np.ndarray, document_ids: np.ndarray, meta: dict[str, Any]) -> None:
    header = json.dumps({"format": FORMAT_VERSION, **meta})
    with open(target, "wb") as handle:
        np.savez(handle, ids=ids, document_ids=document_ids, meta=np.array(header))


def read(path: Path) -> tuple[dict[int, int], dict[str, Any]]:
    """The id -> document_id map and the header; empty when there is no sidecar."""
    if not path.exists():
        logger.info("no sidecar %s: every vector gets document_id 0", path)
        return {}, {}
    try:
        with np.load(path, allow_pickle=False) as data:
            ids, docs = data["ids"], data["document_ids"]
            meta = json.loads(str(data["meta"]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        raise StorageError(
            f"cannot read the sidecar {str(path)!r} ({exc}); delete it to load the index with document_id 0 for all"
        ) from exc
    if ids.shape != docs.shape or ids.ndim != 1 or not isinstance(meta, dict):
        raise StorageError(f"the sidecar {str(path)!r} is malformed; delete it to load with document_id 0 for all")
    return dict(zip(ids.tolist(), docs.tolist(), strict=True)), meta


def reconcile(tags: dict[int, int], index_ids: np.ndarray, where: str) -> dict[int, int]:
    """The tag of every id in the index: its sidecar entry, or document 0 where it has none."""
    out = {vid: tags.get(vid, 0) for vid in index_ids.tolist()}
    untagged = len(out) - sum(1 for vid in out if vid in tags)
    extra = len(tags) - (len(out) - untagged)
    if tags and (untagged or extra):
        logger.warning(
            "sidecar of %s disagrees with the index (an interrupted save?): %d ids without a tag get "
            "document_id 0, %d tags of absent ids are dropped",
            where,
            untagged,
            extra,
        )
    return out
