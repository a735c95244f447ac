# SPDX-License-Identifier: Apache-2.0
"""Collection layout, filter expressions and row building for ``MilvusDB`` (no pymilvus import)."""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from mx_rag.errors import ParameterError
from mx_rag.storage.vectorstore.vectorstore import SearchMode
from mx_rag.utils.checks import fail

logger = logging.getLogger(__name__)

INDEX_TYPES = ("FLAT", "IVF_FLAT", "IVF_PQ", "HNSW")
METRIC_TYPES = ("IP", "L2", "COSINE")
LITE_INDEX = {"IVF_PQ": "IVF_FLAT"}  # milvus-lite accepts IVF_PQ but cannot build it
DEFAULT_SEARCH = {"HNSW": {"ef": 64}, "IVF_FLAT": {"nprobe": 16}, "IVF_PQ": {"nprobe": 16}}
DENSE_MODES = (SearchMode.DENSE, SearchMode.HYBRID)
SPARSE_MODES = (SearchMode.SPARSE, SearchMode.HYBRID)


_LITE_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LITE_LOCKS_GUARD = threading.Lock()


# The standalone server of the PyPI package ``milvus`` (<= 2.3, once named "Milvus Lite") reports
# "v2.3.5-lite" but is a whole Milvus (etcd, rocksmq, every component): not milvus-lite.
_OLD_STANDALONE = re.compile(r"^v?2\.[0-3]\.\d+-lite$")
# Build parameters Milvus < 2.4 requires (newer servers default them; these are knowhere's current defaults)
OLD_SERVER_BUILD = {"HNSW": {"M": 30, "efConstruction": 360}, "IVF_FLAT": {"nlist": 128}, "IVF_PQ": {"nlist": 128}}


def is_lite(server_version: str) -> bool:
    """milvus-lite, the embedded local-file store, reports "milvus_lite-<package version>"."""
    version = server_version.strip().lower()
    return "lite" in version and not _OLD_STANDALONE.match(version)


def release(server_version: str) -> tuple[int, int] | None:
    """The (major, minor) Milvus release of a server that is not milvus-lite, if it says one."""
    match = re.search(r"(\d+)\.(\d+)", server_version)
    if is_lite(server_version) or not match:
        return None
    return int(match[1]), int(match[2])


def before(server_version: str, wanted: tuple[int, int]) -> bool:
    """Whether the server is a Milvus release older than ``wanted`` (never for milvus-lite)."""
    found = release(server_version)
    return found is not None and found < wanted


def build_params(
    params: dict[str, dict[str, Any]], mode: SearchMode, index_type: str, server_version: str
) -> dict[str, dict[str, Any]]:
    """``params`` with the dense build parameters a Milvus < 2.4 server requires filled in.

    Those servers refuse an HNSW index without ``M``/``efConstruction`` and an IVF one without
    ``nlist``; newer servers and milvus-lite default them and get ``params`` unchanged. Sparse
    vectors need Milvus 2.4 or later (ParameterError on older servers).
    """
    if not before(server_version, (2, 4)):
        return params
    if mode in SPARSE_MODES:
        raise ParameterError(f"sparse vectors need Milvus 2.4 or later; the server is {server_version}")
    return {**params, "dense": {**OLD_SERVER_BUILD.get(index_type, {}), **params.get("dense", {})}}


def hit_document(hit: dict[str, Any]) -> int:
    """The ``document_id`` of a search hit asked for that field (-1 when the hit lacks it)."""
    return int(hit.get("entity", {}).get("document_id", -1))


def lite_write_lock(client: Any) -> threading.Lock:
    """One lock per milvus-lite client: its server corrupts its sequence numbers when writes and
    flushes of several threads overlap ("current_seq is monotonic"), so writes take turns there.
    A Milvus cluster needs no such lock and gets none."""
    with _LITE_LOCKS_GUARD:
        return _LITE_LOCKS.setdefault(client, threading.Lock())


def served_index_type(index_type: str, server_version: str) -> str:
    """The index type to ask for: milvus-lite builds FLAT, IVF_FLAT and HNSW, not IVF_PQ."""
    if is_lite(server_version) and index_type in LITE_INDEX:
        logger.warning("milvus-lite cannot build %s indexes; using %s", index_type, LITE_INDEX[index_type])
        return LITE_INDEX[index_type]
    return index_type


def build_collection(
    client: Any,
    types: Any,
    *,
    mode: SearchMode,
    auto_id: bool,
    dim: int | None,
    index_type: str,
    metric: str,
    params: dict[str, dict[str, Any]],
) -> tuple[Any, Any]:
    """The schema (``id``, ``vector``/``sparse_vector``, ``document_id``, dynamic fields) and indexes."""
    schema = client.create_schema(auto_id=auto_id, enable_dynamic_field=True)
    schema.add_field("id", types.INT64, is_primary=True)
    indexes = client.prepare_index_params()
    if mode in DENSE_MODES:
        schema.add_field("vector", types.FLOAT_VECTOR, dim=dim)
        dense = dict(params.get("dense", {}))
        if index_type == "IVF_PQ" and "m" not in dense:
            dense["m"] = next(m for m in (16, 8, 4, 2, 1) if dim and dim % m == 0)
        indexes.add_index(
            field_name="vector", index_name="dense_index", index_type=index_type, metric_type=metric, params=dense
        )
    if mode in SPARSE_MODES:
        schema.add_field("sparse_vector", types.SPARSE_FLOAT_VECTOR)
        indexes.add_index(
            field_name="sparse_vector",
            index_name="sparse_index",
            index_type="SPARSE_INVERTED_INDEX",
            metric_type="IP",
            params=dict(params.get("sparse", {})),
        )
    schema.add_field("document_id", types.INT64)
    return schema, indexes


def in_expr(field: str, values: Sequence[int], server_version: str) -> tuple[str, dict[str, Any]]:
    """``field in [...]`` as a parameterised template where the server has them (Milvus >= 2.5).

    Older servers and milvus-lite get the values inline; they are validated Python ints, so the
    expression cannot be injected into.
    """
    found = release(server_version)
    if found is not None and found >= (2, 5):
        return f"{field} in {{values}}", {"values": [int(v) for v in values]}
    return f"{field} in [{', '.join(str(int(v)) for v in values)}]", {}


def check_output_fields(fields: Any) -> list[str] | None:
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        raise fail("output_fields", fields, "None or a list of field names")
    return fields


def search_knobs(index_type: str, field: str, search_params: Any, k: int) -> dict[str, Any]:
    if search_params is not None and not isinstance(search_params, dict):
        raise fail("search_params", search_params, "None or a dict of index search parameters")
    knobs = dict(DEFAULT_SEARCH.get(index_type, {})) if field == "vector" else {}
    knobs.update(search_params or {})
    if "ef" in knobs:
        knobs["ef"] = max(int(knobs["ef"]), k)
    return knobs


def make_rows(
    vectors: dict[str, list[Any]],
    count: int,
    document_id: list[int],
    keys: np.ndarray | None,
    docs: Any,
    metadatas: Any,
) -> list[dict[str, Any]]:
    """One insert row per vector: the vector fields, its ``document_id``, ``id`` and dynamic fields."""
    texts = check_rows("docs", docs, count, str)
    metas = check_rows("metadatas", metadatas, count, dict)
    rows: list[dict[str, Any]] = []
    for n in range(count):
        row: dict[str, Any] = {name: values[n] for name, values in vectors.items()}
        row["document_id"] = document_id[n]
        if keys is not None:
            row["id"] = int(keys[n])
        if texts is not None:
            row["document"] = texts[n]
        if metas is not None:
            row["metadata"] = metas[n]
        rows.append(row)
    return rows


def replace_vectors(
    rows: list[dict[str, Any]], ids: list[int], fields: dict[str, list[Any]], collection: str
) -> list[dict[str, Any]]:
    """Copies of the stored ``rows`` of ``ids`` with the vector ``fields`` replaced, for an upsert."""
    for name, values in fields.items():
        if len(values) != len(ids):
            raise ParameterError(f"ids has {len(ids)} ids but {name} has {len(values)} rows")
    by_id = {int(row["id"]): row for row in rows}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ParameterError(f"ids are not in collection {collection!r}: {missing[:10]}")
    return [{**by_id[vid], **{name: values[n] for name, values in fields.items()}} for n, vid in enumerate(ids)]


def check_rows(name: str, values: Any, count: int, kind: type) -> list[Any] | None:
    if values is None:
        return None
    if not isinstance(values, (list, tuple)) or len(values) != count:
        raise fail(name, values, f"None or a list of {count} {kind.__name__} values (one per vector)")
    for value in values:
        if not isinstance(value, kind):
            raise fail(f"{name} element", value, f"a {kind.__name__}")
    return list(values)


def check_index_params(params: Any) -> dict[str, dict[str, Any]]:
    if params is None:
        return {}
    if not isinstance(params, dict) or not set(params) <= {"dense", "sparse"}:
        raise fail("params", params, 'None or a dict with keys "dense" and/or "sparse"')
    for key, value in params.items():
        if not isinstance(value, dict):
            raise fail(f"params[{key!r}]", value, "a dict of index build parameters")
    return params
