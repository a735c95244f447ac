# SPDX-License-Identifier: Apache-2.0
"""The FAISS index under ``MindFAISS``: building, id bookkeeping, removal, search, load and save.

One class, ``FaissIndex``, hides how each index kind stores caller ids:

* ``FLAT``: ``IndexIDMap2(IndexFlat)``; exact search. From ``quantize_from`` vectors on (default
  100,000), an unfiltered search takes its ``REFINE_FACTOR * k`` best candidates from an 8-bit
  scalar-quantised copy (a quarter of the memory, scanned about twice as fast) and scores them
  exactly on the flat vectors. The copy lives in memory only: built at the first such search,
  kept in step with adds and removals, and not written to the file.
* ``HNSW``: ``IndexIDMap2(IndexHNSWFlat)``; FAISS cannot remove from an HNSW graph, so a removal
  rebuilds the graph from the stored vectors (O(n log n): prefer FLAT or IVF when deletes are
  frequent).
* ``IVF``: an ``IndexIDMap2(IndexFlat)`` (exact search) until ``train_size`` vectors exist, then
  an ``IndexIVFFlat`` trained on all of them, holding the ids natively with a hashtable direct
  map (so removal and reconstruction by id work). It stays IVF after that.

The file written is a plain FAISS index file. This module imports faiss; it carries no lock (the
caller, ``MindFAISS``, holds one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import faiss as _faiss
import numpy as np

from mx_rag.errors import ParameterError, StorageError

logger = logging.getLogger(__name__)
faiss: Any = _faiss  # the bundled type stubs lag the library (SearchParametersHNSW, DirectMap)

KINDS = ("FLAT", "HNSW", "IVF")
METRICS = ("IP", "L2", "COSINE")
PARAM_RANGES: dict[str, dict[str, tuple[int, int]]] = {
    "FLAT": {"quantize_from": (1, 2**63 - 1)},
    "HNSW": {"M": (2, 256), "efConstruction": (1, 65536), "efSearch": (1, 65536)},
    "IVF": {"nlist": (1, 65536), "nprobe": (1, 65536), "train_size": (1, 2**31 - 1)},
}
DEFAULTS: dict[str, dict[str, int]] = {
    "FLAT": {"quantize_from": 100_000},
    "HNSW": {"M": 32, "efConstruction": 40, "efSearch": 64},
    "IVF": {"nlist": 100, "nprobe": 8},
}
TRAIN_POINTS_PER_LIST = 39  # FAISS's own rule of thumb for k-means training
MAX_TRAIN_POINTS_PER_LIST = 256
EXACT_FILTER_MAX = 4096  # filtered searches over at most this many vectors are exact on every kind
# A FLAT index scans every vector with a filter too; copying out the allowed ones and scanning only
# them wins while they are at most 1 % of the index (1M vectors, 1,000 allowed: 0.45 vs 4.2 ms).
FLAT_EXACT_RATIO = 100
# A filter keeping at least half the vectors is applied after an unfiltered search for
# POST_FILTER_FETCH * k + POST_FILTER_SLACK hits (the selector path tests every vector visited).
POST_FILTER_SHARE = 2
POST_FILTER_FETCH = 4
POST_FILTER_SLACK = 16
# Candidates per result taken from the quantised copy of a large FLAT index before exact scoring
# (1M hash vectors: 26 ms instead of 43 ms a search, each top 10 scoring at least FLAT's 10th).
REFINE_FACTOR = 4
_IDMAP_FOURCC, _IDMAP2_FOURCC = b"IxMp", b"IxM2"


@dataclass(frozen=True)
class IndexSpec:
    """What the caller asked for: dimension, kind, metric and tuning knobs (defaults applied)."""

    dim: int
    kind: str
    metric: str
    params: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def build(dim: int, kind: str, metric: str, params: dict[str, int]) -> IndexSpec:
        merged = {**DEFAULTS[kind], **params}
        if kind == "IVF":
            merged.setdefault("train_size", TRAIN_POINTS_PER_LIST * merged["nlist"])
            if merged["train_size"] < merged["nlist"]:
                raise ParameterError(
                    f"index_params['train_size'] must be at least nlist ({merged['nlist']}), got {merged['train_size']}"
                )
        return IndexSpec(dim, kind, metric, merged)

    @property
    def faiss_metric(self) -> int:
        return int(faiss.METRIC_L2 if self.metric == "L2" else faiss.METRIC_INNER_PRODUCT)


class FaissIndex:
    """A CPU FAISS index keyed by caller ids, with an optional GPU replica for unfiltered search."""

    def __init__(self, spec: IndexSpec, index: Any = None) -> None:
        self.spec = spec
        self.kind = spec.kind  # what the index holds now: FLAT, HNSW or IVF (an untrained IVF is FLAT)
        self.index = index if index is not None else self._empty(spec.kind == "HNSW")
        self._gpu: Any = None
        self._gpu_res: Any = None
        self._gpu_device: int | None = None
        self._gpu_stale = True
        # the selector of the last filtered search: callers pass the same read-only array for the
        # same filter until its vectors change, so repeated filters skip rebuilding the id set
        self._selector: tuple[np.ndarray, Any] | None = None
        self._quantized: Any = None  # the 8-bit copy of a large FLAT index, row for row

    # -- construction ----------------------------------------------------------------------------

    @property
    def index(self) -> Any:
        return self._index

    @index.setter
    def index(self, value: Any) -> None:
        self._index = value
        self.kind = _kind(value)
        self._quantized = None

    def _empty(self, hnsw: bool) -> Any:
        spec = self.spec
        if hnsw:
            inner = faiss.IndexHNSWFlat(spec.dim, spec.params["M"], spec.faiss_metric)
            inner.hnsw.efConstruction = spec.params["efConstruction"]
        else:
            inner = faiss.IndexFlat(spec.dim, spec.faiss_metric)
        return faiss.IndexIDMap2(inner)

    @property
    def trained_ivf(self) -> bool:
        return isinstance(self.index, faiss.IndexIVF)

    @classmethod
    def load(cls, path: str, spec: IndexSpec) -> FaissIndex:
        """Read an index file; StorageError if unreadable, ParameterError if it does not fit ``spec``."""
        try:
            raw = faiss.read_index(path)
        except (RuntimeError, MemoryError) as exc:
            raise StorageError(f"cannot read the FAISS index file {path!r} (corrupt or truncated?): {exc}") from exc
        index = _normalise(raw, path)
        if index.d != spec.dim:
            raise ParameterError(f"x_dim is {spec.dim} but the index file {path!r} holds {index.d}-d vectors")
        if index.metric_type != spec.faiss_metric:
            found = "L2" if index.metric_type == faiss.METRIC_L2 else "IP or COSINE"
            raise ParameterError(
                f"metric_type is {spec.metric!r} but the index file {path!r} uses {found}; pass that metric_type"
            )
        kind = _kind(index)
        if kind != spec.kind and not (kind == "FLAT" and spec.kind == "IVF"):
            raise ParameterError(
                f"index_type is {spec.kind!r} but the index file {path!r} holds a {kind} index; "
                f"pass index_type={kind!r}"
            )
        if isinstance(index, faiss.IndexIVF) and index.direct_map.type != faiss.DirectMap.Hashtable:
            index.set_direct_map_type(faiss.DirectMap.Hashtable)
        return cls(spec, index)

    def write(self, path: str) -> None:
        faiss.write_index(self.index, path)

    # -- contents --------------------------------------------------------------------------------

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    def ids(self) -> np.ndarray:
        """Every stored id, in internal order."""
        if isinstance(self.index, faiss.IndexIVF):
            lists = self.index.invlists
            parts = [
                faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
                for i in range(self.index.nlist)
                if lists.list_size(i)
            ]
            return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        return faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        if len(ids) == 0:
            return np.empty((0, self.spec.dim), dtype=np.float32)
        return np.asarray(self.index.reconstruct_batch(ids), dtype=np.float32).reshape(len(ids), self.spec.dim)

    def _all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(self.index, faiss.IndexIVF):
            ids = self.ids()
            return ids, self.reconstruct(ids)
        inner = faiss.downcast_index(self.index.index)
        vectors = inner.reconstruct_n(0, self.ntotal) if self.ntotal else np.empty((0, self.spec.dim), np.float32)
        return self.ids(), np.asarray(vectors, dtype=np.float32)

    def drop_duplicate_ids(self) -> int:
        """Keep the last vector of each repeated id (files of the original SDK, whose ``update``
        appended instead of replacing, hold such repeats); returns how many were dropped."""
        ids = self.ids()
        if len(np.unique(ids)) == len(ids):
            return 0
        if self.trained_ivf:
            raise StorageError("the IVF index file holds repeated ids; rebuild it")
        _, vectors = self._all_vectors()
        _, last_reversed = np.unique(ids[::-1], return_index=True)
        keep = np.sort(len(ids) - 1 - last_reversed)
        rebuilt = self._empty(hnsw=self.kind == "HNSW")
        rebuilt.add_with_ids(vectors[keep], ids[keep])
        self.index = rebuilt
        return len(ids) - len(keep)

    # -- mutations (the caller has checked that added ids are new and removed ids exist) ----------

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self._gpu_stale = True
        untrained = self.spec.kind == "IVF" and not self.trained_ivf
        if untrained and self.ntotal + len(ids) >= self.spec.params["train_size"]:
            old_ids, old_vectors = self._all_vectors()
            self.index = self._train_ivf(np.concatenate([old_ids, ids]), np.vstack([old_vectors, vectors]))
            return
        self.index.add_with_ids(vectors, ids)
        if self._quantized is not None:
            self._quantized.add(vectors)

    def _train_ivf(self, ids: np.ndarray, vectors: np.ndarray) -> Any:
        spec = self.spec
        nlist = spec.params["nlist"]
        quantizer = faiss.IndexFlat(spec.dim, spec.faiss_metric)
        ivf = faiss.IndexIVFFlat(quantizer, spec.dim, nlist, spec.faiss_metric)
        sample = vectors
        if len(vectors) > MAX_TRAIN_POINTS_PER_LIST * nlist:
            rows = np.random.default_rng(0).choice(len(vectors), MAX_TRAIN_POINTS_PER_LIST * nlist, replace=False)
            sample = vectors[np.sort(rows)]
        logger.info("training the IVF index: %d lists on %d vectors", nlist, len(sample))
        ivf.train(sample)
        ivf.nprobe = min(spec.params["nprobe"], nlist)
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
        ivf.add_with_ids(vectors, ids)
        return ivf

    def remove(self, ids: np.ndarray) -> None:
        if len(ids) == 0:
            return
        self._gpu_stale = True
        if isinstance(self.index, faiss.IndexIVF):
            self.index.remove_ids(faiss.IDSelectorArray(ids))  # the hashtable direct map needs an array
        elif self.kind == "HNSW":
            all_ids, vectors = self._all_vectors()
            keep = ~np.isin(all_ids, ids)
            rebuilt = self._empty(hnsw=True)
            if keep.any():
                rebuilt.add_with_ids(vectors[keep], all_ids[keep])
            self.index = rebuilt
        else:
            if self._quantized is not None:  # the same rows leave the copy, which keeps its order
                rows = np.flatnonzero(np.isin(self._id_map(), ids))
                self._quantized.remove_ids(faiss.IDSelectorBatch(rows))
            self.index.remove_ids(faiss.IDSelectorBatch(ids))
            if self._quantized is not None and self._quantized.ntotal != self.ntotal:
                self._quantized = None

    # -- search ----------------------------------------------------------------------------------

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` (distances, ids) per query, ids -1 where fewer exist; ``allowed`` (ids held by
        the index, no repeats) restricts ids.

        When ``allowed`` is every id the search is unfiltered; when it is most of them (a knowledge
        base that fills most of a shared index), an unfiltered search for a few more than ``k``
        is filtered afterwards, and only where that leaves fewer than ``k`` does the index search
        with a selector, which tests every vector it visits."""
        if allowed is not None and len(allowed) >= self.ntotal:
            allowed = None
        if allowed is not None and self._exact_is_faster(len(allowed)):
            return self._exact_among(queries, k, allowed)
        if allowed is not None and len(allowed) * POST_FILTER_SHARE >= self.ntotal:
            found = self._post_filtered(queries, k, allowed)
            if found is not None:
                return found
        if allowed is None and (replica := self._gpu_replica()) is not None:
            return replica.search(queries, k)
        if allowed is None and self._quantizes():
            return self._refined(queries, k)
        selector = self._selector_of(allowed) if allowed is not None else None
        return self.index.search(queries, k, params=self._search_params(k, selector))

    def _post_filtered(self, queries: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The top ``k`` allowed hits among an unfiltered top ``fetch``, or None where a query row
        kept fewer than ``k`` of them while more vectors exist."""
        fetch = min(self.ntotal, POST_FILTER_FETCH * k + POST_FILTER_SLACK)
        replica = self._gpu_replica()
        if replica is not None:
            distances, labels = replica.search(queries, fetch)
        elif self._quantizes():
            distances, labels = self._refined(queries, fetch)
        else:
            distances, labels = self.index.search(queries, fetch, params=self._search_params(fetch, None))
        selector = self._selector_of(allowed)
        out_d = np.full((len(queries), k), -1.0, dtype=np.float32)
        out_i = np.full((len(queries), k), -1, dtype=np.int64)
        for row in range(len(queries)):
            kept = [j for j, label in enumerate(labels[row].tolist()) if label >= 0 and selector.is_member(label)][:k]
            if len(kept) < k and fetch < self.ntotal:
                return None
            out_d[row, : len(kept)] = distances[row, kept]
            out_i[row, : len(kept)] = labels[row, kept]
        return out_d, out_i

    def _quantizes(self) -> bool:
        """Whether unfiltered searches go through the quantised copy (a large FLAT index)."""
        return self.spec.kind == "FLAT" and self.ntotal >= self.spec.params["quantize_from"]

    def _id_map(self) -> np.ndarray:
        """The caller id of each row of an ``IndexIDMap2`` (a view: valid until the next change)."""
        return faiss.rev_swig_ptr(self.index.id_map.data(), self.ntotal)

    def _refined(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` by exact score among the quantised copy's top ``REFINE_FACTOR * k``."""
        flat = faiss.downcast_index(self.index.index)
        if self._quantized is None:
            quantized = faiss.IndexScalarQuantizer(self.spec.dim, faiss.ScalarQuantizer.QT_8bit, self.spec.faiss_metric)
            vectors = faiss.rev_swig_ptr(flat.get_xb(), self.ntotal * self.spec.dim).reshape(self.ntotal, -1)
            quantized.train(vectors)
            quantized.add(vectors)
            logger.info("quantised a copy of the FLAT index's %d vectors for search", self.ntotal)
            self._quantized = quantized
        refine = faiss.IndexRefine(self._quantized, flat)
        refine.k_factor = REFINE_FACTOR
        distances, rows = refine.search(queries, k)
        return distances, np.where(rows >= 0, self._id_map()[np.maximum(rows, 0)], -1)

    def _selector_of(self, allowed: np.ndarray) -> Any:
        cached = self._selector
        if cached is not None and cached[0] is allowed and not allowed.flags.writeable:
            return cached[1]
        selector = faiss.IDSelectorBatch(allowed)
        self._selector = (allowed, selector)
        return selector

    def _exact_is_faster(self, allowed: int) -> bool:
        """Whether scanning only the ``allowed`` vectors beats the index's own filtered search."""
        if allowed > EXACT_FILTER_MAX:
            return False
        return self.kind != "FLAT" or allowed * FLAT_EXACT_RATIO <= self.ntotal

    def _search_params(self, k: int, selector: Any) -> Any:
        params: Any = None
        if self.kind == "HNSW":
            params = faiss.SearchParametersHNSW(efSearch=max(self.spec.params["efSearch"], k))
        elif isinstance(self.index, faiss.IndexIVF):
            params = faiss.SearchParametersIVF(nprobe=min(self.spec.params["nprobe"], self.index.nlist))
        elif selector is not None:
            params = faiss.SearchParameters()
        if selector is not None:
            params.sel = selector
        return params

    def _exact_among(self, queries: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scratch = faiss.IndexFlat(self.spec.dim, self.spec.faiss_metric)
        scratch.add(self.reconstruct(allowed))
        distances, rows = scratch.search(queries, k)
        return distances, np.where(rows >= 0, allowed[np.maximum(rows, 0)], -1)

    # -- GPU replica -----------------------------------------------------------------------------

    def use_gpu(self, device: int) -> None:
        """Serve unfiltered searches from a replica on ``device`` (FLAT and IVF; HNSW stays on CPU)."""
        if self.spec.kind == "HNSW":
            logger.info("FAISS has no GPU HNSW index; HNSW searches run on the CPU")
            return
        self._gpu_res = faiss.StandardGpuResources()
        self._gpu_device = device

    def _gpu_replica(self) -> Any:
        if self._gpu_device is None:
            return None
        if self._gpu_stale or self._gpu is None:
            try:
                replica = faiss.index_cpu_to_gpu(self._gpu_res, self._gpu_device, self.index)
                if isinstance(self.index, faiss.IndexIVF):
                    faiss.GpuParameterSpace().set_index_parameter(replica, "nprobe", self.spec.params["nprobe"])
            except (RuntimeError, AttributeError) as exc:
                logger.warning("GPU replica failed on device %s, searching on the CPU: %s", self._gpu_device, exc)
                self._gpu_device = self._gpu = None
                return None
            self._gpu, self._gpu_stale = replica, False
        return self._gpu


def _kind(index: Any) -> str:
    if isinstance(index, faiss.IndexIVF):
        return "IVF"
    inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap) else index
    return "HNSW" if isinstance(inner, faiss.IndexHNSW) else "FLAT"


def _normalise(raw: Any, path: str) -> Any:
    """An index we can serve: IDMap2 over Flat/HNSWFlat, or IVFFlat; other layouts are refused."""
    if isinstance(raw, faiss.IndexIDMap) and not isinstance(raw, faiss.IndexIDMap2):
        # IDMap and IDMap2 share one on-disk layout; IDMap2 adds the reverse map (built on read).
        data = faiss.serialize_index(raw)
        data[:4] = np.frombuffer(_IDMAP2_FOURCC, dtype=np.uint8)
        raw = faiss.deserialize_index(data)
    if isinstance(raw, faiss.IndexIDMap2):
        inner = faiss.downcast_index(raw.index)
        if type(inner) in (faiss.IndexFlat, faiss.IndexFlatIP, faiss.IndexFlatL2, faiss.IndexHNSWFlat):
            return raw
        raise ParameterError(f"the index file {path!r} wraps an unsupported {type(inner).__name__}")
    if isinstance(raw, faiss.IndexIVFFlat):
        return raw
    if type(raw) in (faiss.IndexFlat, faiss.IndexFlatIP, faiss.IndexFlatL2):  # no ids: they are 0..n-1
        wrapped = faiss.IndexIDMap2(faiss.IndexFlat(raw.d, raw.metric_type))
        if raw.ntotal:
            wrapped.add_with_ids(raw.reconstruct_n(0, raw.ntotal), np.arange(raw.ntotal, dtype=np.int64))
        return wrapped
    raise ParameterError(f"the index file {path!r} holds an unsupported {type(raw).__name__}")
