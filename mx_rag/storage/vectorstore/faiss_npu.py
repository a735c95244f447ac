# SPDX-License-Identifier: Apache-2.0
"""``MindFAISS``: a FAISS vector store on CPU, or on a CUDA GPU where the faiss build has one.

The module keeps the original's name (``faiss_npu``) for import compatibility; nothing here needs
an NPU. faiss is imported when a ``MindFAISS`` is built, not when this module is imported.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.validation import DocumentIds, check_filter, check_ids, check_k
from mx_rag.storage.vectorstore import _sidecar
from mx_rag.storage.vectorstore._validation import check_document_ids, check_params
from mx_rag.storage.vectorstore.vectorstore import SCORE_SCALE, VectorStore, as_matrix
from mx_rag.utils.atomic import remove_stale_temps, write_atomic
from mx_rag.utils.checks import check_bool, check_choice, check_int, fail
from mx_rag.utils.common import MAX_DEVICE_ID
from mx_rag.utils.file_check import check_writable_parent
from mx_rag.utils.lazy import extra_import
from mx_rag.utils.process_lock import ProcessLock, lock_path_for

if TYPE_CHECKING:
    from mx_rag.storage.vectorstore._faiss_index import FaissIndex

logger = logging.getLogger(__name__)

MAX_DIM = 1024 * 1024
INDEX_TYPES = ("FLAT", "HNSW", "IVF")
METRIC_TYPES = ("IP", "L2", "COSINE")
_KNOWN_FILTERS = 8  # DocumentIds filters whose id arrays are kept until the vectors change
_CACHED_FILTERS = 16  # multi-document filters whose id arrays are kept between searches


def _faiss_backend() -> Any:
    with extra_import("faiss", "faiss", only={"faiss"}):
        from mx_rag.storage.vectorstore import _faiss_index
    return _faiss_index


class MindFAISS(VectorStore):
    """Dense vectors in a FAISS index, keyed by caller ids and tagged with a ``document_id``.

    Args:
        x_dim: vector dimension, 1 to 1 MiB.
        devs: None (CPU) or a list of exactly one device id 0..63. Where faiss sees GPUs the
            index is served from that GPU; elsewhere the CPU is used, without error.
        load_local_index: the index file. Loaded if it exists, and where every change is saved
            (atomically; the ``document_id`` tags go to ``<file>.meta.npz``). None keeps the
            index in memory only.
        index_type: ``"FLAT"`` (exact), ``"HNSW"`` or ``"IVF"`` (trains itself once
            ``train_size`` vectors exist, exact search before that).
        metric_type: ``"IP"``, ``"L2"`` or ``"COSINE"`` (inputs are normalised for you).
        auto_save: save after every ``add``/``delete``/``update`` call.
        index_params: ``{"quantize_from"}`` for FLAT (from this many vectors, default 100,000,
            unfiltered searches score exactly the ``4 * k`` best candidates of an in-memory 8-bit
            copy: about twice as fast), ``{"M", "efConstruction", "efSearch"}`` for HNSW,
            ``{"nlist", "nprobe", "train_size"}`` for IVF.

    Scores are scaled similarities (higher is better, at most 1.0); ``search`` honours
    ``filter_dict={"document_id": [...]}``. All methods are thread-safe, and with a file several
    processes may share one index: each write holds ``<file>.lock`` and starts from the newest
    saved index, and every read first checks (one ``stat``) whether another process saved a newer
    one, and reloads it if so.

    Example:
        >>> store = MindFAISS(x_dim=4, devs=[0], load_local_index=None)
        >>> store.add([7, 8], [[1, 0, 0, 0], [0, 1, 0, 0]], document_id=1)
        >>> store.search([[1, 0, 0, 0]], k=1)
        ([[1.0]], [[7]])
    """

    def __init__(
        self,
        x_dim: int,
        devs: list[int] | None = None,
        load_local_index: str | os.PathLike[str] | None = None,
        index_type: str = "FLAT",
        metric_type: str = "IP",
        auto_save: bool = True,
        index_params: dict[str, int] | None = None,
    ) -> None:
        backend = _faiss_backend()
        dim = check_int("x_dim", x_dim, 1, MAX_DIM)
        device = _check_devs(devs)
        index_type = check_choice("index_type", index_type, INDEX_TYPES)
        self._metric = check_choice("metric_type", metric_type, METRIC_TYPES)
        self._auto_save = check_bool("auto_save", auto_save)
        params = check_params("index_params", index_params, backend.PARAM_RANGES[index_type])
        spec = backend.IndexSpec.build(dim, index_type, self._metric, params)
        self._path = None if load_local_index is None else check_writable_parent("load_local_index", load_local_index)
        self._lock = threading.RLock()
        self._file_lock = None if self._path is None else ProcessLock(lock_path_for(self._path))
        self._backend, self._spec, self._device = backend, spec, device
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime_ns, size) of the file we hold
        self._dirty = False  # changes not saved yet (auto_save=False)
        self._docs: dict[int, int] = {}
        self._by_doc: dict[int, set[int]] = {}
        self._doc_arrays: dict[int, np.ndarray] = {}  # read-only id arrays of _by_doc, built on demand
        self._filter_arrays: dict[tuple[int, ...], np.ndarray] = {}  # the same for multi-document filters
        # the ids of the last DocumentIds filters (by object: one per knowledge base and registry generation)
        self._known_filters: dict[int, tuple[DocumentIds, np.ndarray]] = {}
        self._index: FaissIndex = backend.FaissIndex(spec)
        if device is not None:
            gpus = backend.faiss.get_num_gpus()
            if gpus > 0 and device >= gpus:
                raise ParameterError(f"devs names GPU {device} but faiss sees {gpus} GPU(s)")
            self._device = device if gpus > 0 else None
        with self._writing():  # loads the file when there is one
            if self._seen is None and self._device is not None:
                self._index.use_gpu(self._device)

    @staticmethod
    def create(**kwargs: Any) -> MindFAISS:
        """Build a ``MindFAISS`` from keyword arguments (the factory entry point)."""
        try:
            inspect.signature(MindFAISS).bind(**kwargs)
        except TypeError as exc:
            raise ParameterError(f"MindFAISS.create: {exc}") from exc
        return MindFAISS(**kwargs)

    # -- writes ----------------------------------------------------------------------------------

    def add(self, ids: Sequence[int], embeddings: Any, document_id: int | Sequence[int] = 0) -> None:
        """Add vectors under new, unique ``ids`` tagged with ``document_id`` (one id for all, or one
        per vector); saves once if auto_save."""
        vectors = self._matrix("embeddings", embeddings)
        new = check_ids("ids", ids, rows=len(vectors))
        docs = check_document_ids(document_id, len(new))
        with self._writing():
            present = [i for i in new.tolist() if i in self._docs]
            if present:
                raise ParameterError(f"ids are already in the index: {present[:10]} (use update to replace vectors)")
            self._index.add(new, vectors)
            self._tag(dict(zip(new.tolist(), docs, strict=True)))
            self._commit(lambda: self._drop(new))

    def delete(self, ids: Sequence[int]) -> int:
        """Remove vectors by id; returns how many existed. Unknown ids are ignored."""
        wanted = check_ids("ids", ids, allow_empty=True, unique=False)
        with self._writing():
            gone = np.asarray([i for i in wanted.tolist() if i in self._docs], dtype=np.int64)
            if len(gone) == 0:
                logger.debug("delete: none of the %d ids are in the index", len(wanted))
                return 0
            vectors = self._index.reconstruct(gone)
            tags = {i: self._docs[i] for i in gone.tolist()}
            self._drop(gone)
            self._commit(lambda: self._restore(gone, vectors, tags))
            return len(gone)

    def update(self, ids: Sequence[int], dense: Any = None, sparse: Any = None) -> None:
        """Replace the vectors of existing ``ids`` (their document tags stay), in one locked step."""
        if dense is None:
            raise ParameterError("dense must be given: MindFAISS stores dense vectors only")
        if sparse is not None:
            logger.warning("MindFAISS stores no sparse vectors; the sparse argument of update is ignored")
        vectors = self._matrix("dense", dense)
        targets = check_ids("ids", ids, rows=len(vectors))
        with self._writing():
            missing = [i for i in targets.tolist() if i not in self._docs]
            if missing:
                raise ParameterError(f"ids are not in the index: {missing[:10]} (use add for new vectors)")
            old = self._index.reconstruct(targets)
            self._index.remove(targets)
            self._index.add(targets, vectors)
            self._commit(lambda: self._replace(targets, old))

    # -- reads -----------------------------------------------------------------------------------

    def search(
        self, embeddings: Any, k: int = 3, filter_dict: dict[str, Any] | None = None
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Top-``k`` (scaled scores, ids) per query row, best first; ``filter_dict`` keeps documents."""
        k = check_k(k)
        queries = self._matrix("embeddings", embeddings)
        docs = check_filter(filter_dict)
        with self._reading():
            allowed = None if docs is None else self._ids_of(docs)
            available = self._index.ntotal if allowed is None else len(allowed)
            if available == 0:
                return [[] for _ in queries], [[] for _ in queries]
            distances, labels = self._index.search(queries, min(k, available), allowed)
        scale = SCORE_SCALE[self._metric]
        scores_out: list[list[float]] = []
        ids_out: list[list[int]] = []
        for row_d, row_i in zip(distances.tolist(), labels.tolist(), strict=True):
            hits = [(scale(d), i) for d, i in zip(row_d, row_i, strict=True) if i >= 0]
            scores_out.append([s for s, _ in hits])
            ids_out.append([i for _, i in hits])
        return scores_out, ids_out

    def get_all_ids(self) -> list[int]:
        with self._reading():
            return sorted(self._docs)

    def count(self) -> int:
        with self._reading():
            return len(self._docs)

    def get_ntotal(self) -> int:
        with self._reading():
            return self._index.ntotal

    # -- persistence -----------------------------------------------------------------------------

    def save_local(self) -> None:
        """Write the index file and its sidecar atomically (a crash leaves the old or the new one)."""
        if self._path is None:
            raise StorageError("this MindFAISS is in memory only (load_local_index=None): there is no file to save")
        with self._lock, self._writing(sync=False):
            if self._seen != _signature(self._path):
                logger.warning("%s was saved by another process since this one loaded it; overwriting", self._path)
            self._save()

    def get_save_file(self) -> str:
        return "" if self._path is None else str(self._path)

    def _save(self) -> None:
        assert self._path is not None
        sidecar = _sidecar.path_for(self._path)
        ids = np.fromiter(self._docs.keys(), dtype=np.int64, count=len(self._docs))
        docs = np.fromiter(self._docs.values(), dtype=np.int64, count=len(self._docs))
        meta = {"metric_type": self._metric, "index_type": self._index.spec.kind, "x_dim": self._index.spec.dim}
        try:
            write_atomic(sidecar, lambda tmp: _sidecar.write(tmp, ids, docs, meta))
            write_atomic(self._path, self._index.write)
        except (OSError, RuntimeError) as exc:
            raise StorageError(f"cannot save the index to {str(self._path)!r}: {exc}") from exc
        self._seen, self._dirty = _signature(self._path), False

    # -- sharing one file between processes ------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self, sync: bool = True) -> Iterator[None]:
        """Hold the thread lock and the file lock; start from the newest saved index."""
        with self._lock, self._file_lock or contextlib.nullcontext():
            if sync:
                self._sync()
            yield

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Hold the thread lock, having reloaded the file if another process saved a newer one."""
        with self._lock:
            if self._path is not None and self._seen != _signature(self._path):
                with self._file_lock or contextlib.nullcontext():
                    self._sync()
            yield

    def _sync(self) -> None:
        """Reload the file if it changed since we loaded or saved it (the caller holds the file lock)."""
        if self._path is None:
            return
        current = _signature(self._path)
        if current == self._seen:
            return
        if current is None:
            logger.warning("%s disappeared; keeping the %d vectors in memory", self._path, len(self._docs))
            self._seen = None
            return
        if self._dirty:
            logger.warning("%s changed on disk but this index has unsaved changes; not reloading", self._path)
            self._seen = current
            return
        self._load()

    def _load(self) -> None:
        """Read the index file and its sidecar, replacing what is in memory (file lock held)."""
        assert self._path is not None
        remove_stale_temps(self._path)
        seen = _signature(self._path)
        index = self._backend.FaissIndex.load(str(self._path), self._spec)
        repeats = index.drop_duplicate_ids()
        if repeats:
            logger.warning("%s held %d repeated ids; kept the newest vector of each", self._path, repeats)
        index_ids = index.ids()
        tags, meta = _sidecar.read(_sidecar.path_for(self._path))
        stored_metric = meta.get("metric_type")
        if stored_metric not in (None, self._metric):
            raise ParameterError(
                f"metric_type is {self._metric!r} but {str(self._path)!r} was written with {stored_metric!r}"
            )
        tagged = _sidecar.reconcile(tags, index_ids, str(self._path))
        self._index = index
        if self._device is not None:
            self._index.use_gpu(self._device)
        self._docs, self._by_doc = {}, {}
        self._doc_arrays.clear()
        self._tag(tagged)
        self._seen, self._dirty = seen, False
        logger.info("loaded %d vectors from %s", len(index_ids), self._path)

    def _commit(self, undo: Callable[[], None]) -> None:
        """Save if auto_save; on failure undo the in-memory change so memory matches the file."""
        if not self._auto_save or self._path is None:
            self._dirty = True
            return
        try:
            self._save()
        except BaseException:
            try:
                undo()
            except Exception:
                logger.exception("could not undo an unsaved change; the index in memory differs from the file")
            raise

    # -- bookkeeping -----------------------------------------------------------------------------

    def _matrix(self, name: str, embeddings: Any) -> np.ndarray:
        matrix = as_matrix(name, embeddings, self._index.spec.dim)
        if self._metric == "COSINE":
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix = np.ascontiguousarray(matrix / np.where(norms == 0, 1.0, norms), dtype=np.float32)
        return matrix

    def _tag(self, tags: dict[int, int]) -> None:
        for vid, doc in tags.items():
            self._docs[vid] = doc
            self._by_doc.setdefault(doc, set()).add(vid)
            self._doc_arrays.pop(doc, None)
        self._filter_arrays.clear()
        self._known_filters.clear()

    def _drop(self, ids: np.ndarray) -> None:
        self._index.remove(ids)
        for vid in ids.tolist():
            doc = self._docs.pop(vid)
            self._doc_arrays.pop(doc, None)
            members = self._by_doc[doc]
            members.discard(vid)
            if not members:
                del self._by_doc[doc]
        self._filter_arrays.clear()
        self._known_filters.clear()

    def _restore(self, ids: np.ndarray, vectors: np.ndarray, tags: dict[int, int]) -> None:
        self._index.add(ids, vectors)
        self._tag(tags)

    def _replace(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self._index.remove(ids)
        self._index.add(ids, vectors)

    def _ids_of(self, docs: list[int]) -> np.ndarray:
        """The vector ids of ``docs`` (each document's array is cached until its vectors change;
        a ``DocumentIds`` filter's array too, for as long as that object comes back)."""
        if isinstance(docs, DocumentIds):
            known = self._known_filters.get(id(docs))
            if known is not None and known[0] is docs:
                return known[1]
            merged = self._merged_ids(docs)
            if len(self._known_filters) >= _KNOWN_FILTERS:
                self._known_filters.pop(next(iter(self._known_filters)))
            self._known_filters[id(docs)] = (docs, merged)
            return merged
        return self._merged_ids(docs)

    def _merged_ids(self, docs: list[int]) -> np.ndarray:
        arrays = []
        for doc in dict.fromkeys(docs):
            array = self._doc_arrays.get(doc)
            if array is None and doc in self._by_doc:
                members = self._by_doc[doc]
                array = np.fromiter(sorted(members), dtype=np.int64, count=len(members))
                array.flags.writeable = False
                self._doc_arrays[doc] = array
            if array is not None:
                arrays.append(array)
        if len(arrays) == 1:
            return arrays[0]
        if isinstance(docs, DocumentIds):
            whole = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
            whole.flags.writeable = False
            return whole
        key = tuple(docs)
        merged = self._filter_arrays.get(key)
        if merged is None:
            merged = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
            merged.flags.writeable = False
            if len(self._filter_arrays) >= _CACHED_FILTERS:
                self._filter_arrays.pop(next(iter(self._filter_arrays)))
            self._filter_arrays[key] = merged
        return merged

    def __repr__(self) -> str:
        where = self._path or "memory"
        return f"MindFAISS({self._index.spec.kind}/{self._metric}, x_dim={self._index.spec.dim}, at {where})"


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What changes whenever a save replaces ``path`` (a new inode each time), or None if absent."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_mtime_ns, info.st_size


def _check_devs(devs: Any) -> int | None:
    if devs is None:
        return None
    if not isinstance(devs, (list, tuple)) or len(devs) != 1:
        raise fail("devs", devs, "None or a list holding exactly one device id")
    return check_int("devs[0]", devs[0], 0, MAX_DEVICE_ID)


__all__ = ["MindFAISS"]
