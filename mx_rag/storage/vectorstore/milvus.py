# SPDX-License-Identifier: Apache-2.0
"""``MilvusDB``: vectors in a Milvus collection through ``pymilvus.MilvusClient``.

The same code serves a Milvus cluster and milvus-lite (``MilvusClient("./milvus.db")``, a local
file). pymilvus is imported when a ``MilvusDB`` is built, not when this module is imported.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.validation import (
    DocumentIds,
    check_filter,
    check_ids,
    check_k,
    post_filter_fetch,
    post_filter_first,
    post_filter_keep,
)
from mx_rag.storage.vectorstore import _milvus_hybrid as hybrid_
from mx_rag.storage.vectorstore import _milvus_schema as schema_
from mx_rag.storage.vectorstore._milvus_collection import MilvusCollection
from mx_rag.storage.vectorstore._milvus_schema import DENSE_MODES, INDEX_TYPES, METRIC_TYPES, SPARSE_MODES
from mx_rag.storage.vectorstore._validation import check_document_ids, check_sparse
from mx_rag.storage.vectorstore.vectorstore import SCORE_SCALE, SearchMode, VectorStore, as_matrix
from mx_rag.utils.checks import check_bool, check_choice, check_instance, check_int, check_str
from mx_rag.utils.lazy import extra_import

logger = logging.getLogger(__name__)

MAX_DIM = 32768
CONSISTENCY_LEVELS = ("Strong", "Session", "Bounded", "Eventually")
ID_BATCH = 4096  # ids per "id in [...]" expression
INSERT_BYTES = 16 * 1024 * 1024  # vector bytes per insert request (gRPC messages are capped)
ITERATOR_BATCH = 1000
INDEX_WAIT_S = 30.0  # how long an existing collection may still be getting its indexes (see _open_existing)
Rows = tuple[list[list[float]], list[list[int]]]
Texts = list[str] | None
Metas = list[dict[str, Any]] | None


def _pymilvus() -> Any:
    with extra_import("milvus", "pymilvus"):
        import pymilvus
    return pymilvus


class MilvusDB(VectorStore, MilvusCollection):
    """Vectors in a Milvus collection: ``id`` (INT64 key), ``vector``/``sparse_vector``, ``document_id``.

    ``document`` and ``metadata`` (given to ``add``) are stored as dynamic fields. Searches honour
    ``filter_dict={"document_id": [...]}``; scores are scaled similarities (at most 1.0).
    Instances hold no per-call state, so one may be shared by threads. With ``auto_id=True``
    Milvus assigns the ids and the ``ids`` given to ``add`` are ignored. milvus-lite cannot build
    IVF_PQ (IVF_FLAT is used there) and gets filter values inline instead of as parameters.
    Milvus 2.3 servers are served too: dense modes only (sparse vectors need 2.4), filter values
    inline, and the HNSW/IVF build parameters they require filled in with newer servers' defaults.
    In HYBRID mode ``hybrid_search`` fuses a dense and a sparse search in Milvus (2.4 and later).

    ``consistency_level`` is what searches ask of a Milvus server: ``"Strong"`` (the default) sees
    every write acknowledged before the search, and so waits for the server's next time tick, about
    200 ms with the server's defaults, at every search; ``"Session"`` sees the inserts made in
    this process at once (pymilvus tracks them) and other writes within about a tick, without that wait
    (and the first search with each new ``DocumentIds`` scope, one per registry change, is strong);
    ``"Bounded"`` and ``"Eventually"`` as Milvus defines them. milvus-lite is always strong.

    Example:
        >>> from pymilvus import MilvusClient
        >>> store = MilvusDB.create(client=MilvusClient("./milvus.db"), x_dim=384, metric_type="IP")
        >>> store.add([1, 2], vectors, document_id=7)
        >>> scores, ids = store.search(query_vectors, k=2, filter_dict={"document_id": [7]})
    """

    def __init__(
        self,
        client: Any,
        collection_name: str = "rag_sdk",
        search_mode: SearchMode = SearchMode.DENSE,
        auto_id: bool = False,
        index_type: str = "FLAT",
        metric_type: str = "L2",
        auto_flush: bool = True,
        consistency_level: str = "Strong",
    ) -> None:
        pymilvus = _pymilvus()
        self._client = check_instance("client", client, pymilvus.MilvusClient)
        self._error = pymilvus.MilvusException
        self._types = pymilvus.DataType
        self._collection = check_str("collection_name", collection_name, 1, 1024)
        self._mode: SearchMode = check_instance("search_mode", search_mode, SearchMode)
        self._auto_id = check_bool("auto_id", auto_id)
        self._index_type = check_choice("index_type", index_type, INDEX_TYPES)
        self._metric = check_choice("metric_type", metric_type, METRIC_TYPES)
        self._auto_flush = check_bool("auto_flush", auto_flush)
        self._consistency = check_choice("consistency_level", consistency_level, CONSISTENCY_LEVELS)
        self._strong_scopes: dict[int, weakref.ref[DocumentIds]] = {}  # scopes searched strongly, by id()
        self._dim: int | None = None  # caches of server facts; never per-call state
        self._server: str | None = None

    @staticmethod
    def create(**kwargs: Any) -> MilvusDB:
        """Build a store and create (or load) its collection; raises on any error."""
        options = dict(kwargs)
        if "client" not in options:
            raise ParameterError("MilvusDB.create needs client (a pymilvus.MilvusClient)")
        x_dim, params = options.pop("x_dim", None), options.pop("params", None)
        known = ("client", "collection_name", "search_mode", "auto_id", "index_type", "metric_type", "auto_flush",
                 "consistency_level")  # fmt: skip
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ParameterError(f"MilvusDB.create got unsupported arguments {unknown}")
        store = MilvusDB(**options)
        store.create_collection(x_dim=x_dim, params=params)
        return store

    @property
    def search_mode(self) -> SearchMode:
        return self._mode

    def set_collection_name(self, collection_name: str) -> None:
        self._collection = check_str("collection_name", collection_name, 1, 1024)
        self._dim = None

    # -- collection ------------------------------------------------------------------------------

    def create_collection(self, x_dim: int | None = None, params: dict[str, Any] | None = None) -> None:
        """Create the collection with its indexes, or load it if it exists.

        ``params``: ``{"dense": {...}, "sparse": {...}}`` index build parameters.
        """
        if self.has_collection(self._collection):
            self._open_existing()
            return
        dim = check_int("x_dim", x_dim, 1, MAX_DIM) if self._mode in DENSE_MODES else None
        server = self._server_version()
        index_type = schema_.served_index_type(self._index_type, server)
        schema, indexes = schema_.build_collection(
            self._client,
            self._types,
            mode=self._mode,
            auto_id=self._auto_id,
            dim=dim,
            index_type=index_type,
            metric=self._metric,
            params=schema_.build_params(schema_.check_index_params(params), self._mode, index_type, server),
        )
        with self._call("create_collection"):  # Milvus takes a second identical create as done
            self._client.create_collection(
                self._collection, schema=schema, index_params=indexes, consistency_level="Strong"
            )
        self._dim = dim

    def has_collection(self, collection_name: str | None = None) -> bool:
        name = self._collection if collection_name is None else check_str("collection_name", collection_name, 1, 1024)
        with self._call("has_collection"):
            return bool(self._client.has_collection(name))

    def drop_collection(self) -> None:
        with self._call("drop_collection"):
            self._client.drop_collection(self._collection)
        self._dim = None

    def flush(self) -> None:
        with self._call("flush", write=True):
            self._client.flush(self._collection)

    # -- writes ----------------------------------------------------------------------------------

    def add(
        self,
        ids: Sequence[int],
        embeddings: Any,
        document_id: int | Sequence[int] = 0,
        docs: Texts = None,
        metadatas: Metas = None,
    ) -> None:
        """Insert dense vectors (DENSE mode); ``docs``/``metadatas`` go to dynamic fields."""
        self._require((SearchMode.DENSE,), "add")
        vectors = as_matrix("embeddings", embeddings, self._dimension())
        self._insert(ids, {"vector": list(vectors)}, len(vectors), document_id, docs, metadatas)

    def add_sparse(
        self,
        ids: Sequence[int],
        sparse_embeddings: Any,
        document_id: int | Sequence[int] = 0,
        docs: Texts = None,
        metadatas: Metas = None,
    ) -> None:
        """Insert sparse ``{index: weight}`` vectors (SPARSE mode)."""
        self._require((SearchMode.SPARSE,), "add_sparse")
        sparse = check_sparse("sparse_embeddings", sparse_embeddings)
        self._insert(ids, {"sparse_vector": sparse}, len(sparse), document_id, docs, metadatas)

    def add_dense_and_sparse(
        self,
        ids: Sequence[int],
        dense_embeddings: Any,
        sparse_embeddings: Any,
        document_id: int | Sequence[int] = 0,
        docs: Texts = None,
        metadatas: Metas = None,
    ) -> None:
        """Insert rows holding both a dense and a sparse vector (HYBRID mode)."""
        self._require((SearchMode.HYBRID,), "add_dense_and_sparse")
        vectors = as_matrix("dense_embeddings", dense_embeddings, self._dimension())
        sparse = check_sparse("sparse_embeddings", sparse_embeddings, rows=len(vectors))
        self._insert(
            ids, {"vector": list(vectors), "sparse_vector": sparse}, len(vectors), document_id, docs, metadatas
        )

    def delete(self, ids: Sequence[int]) -> int:
        """Delete rows by id; returns how many of them existed just before."""
        wanted = check_ids("ids", ids, allow_empty=True, unique=False)
        if len(wanted) == 0:
            return 0
        existing = sorted(self._existing(wanted))
        if existing:
            with self._call("delete", write=True):
                for start in range(0, len(existing), ID_BATCH):
                    self._client.delete(self._collection, ids=existing[start : start + ID_BATCH])
            self._maybe_flush()
        return len(existing)

    def update(self, ids: Sequence[int], dense: Any = None, sparse: Any = None) -> None:
        """Replace the dense and/or sparse vectors of existing ids; other fields are kept."""
        if dense is None and sparse is None:
            raise ParameterError("update needs dense and/or sparse vectors")
        targets = check_ids("ids", ids)
        fields: dict[str, list[Any]] = {}
        if dense is not None:
            self._require(DENSE_MODES, "a dense update")
            fields["vector"] = list(as_matrix("dense", dense, self._dimension()))
        if sparse is not None:
            self._require(SPARSE_MODES, "a sparse update")
            fields["sparse_vector"] = list(check_sparse("sparse", sparse))
        new_rows = schema_.replace_vectors(self._fetch(targets), targets.tolist(), fields, self._collection)
        with self._call("upsert", write=True):
            self._client.upsert(self._collection, new_rows)
        self._maybe_flush()

    def upsert(self, ids: Sequence[int], embeddings: Any, document_id: int | Sequence[int] = 0) -> None:
        """Insert dense vectors, or replace the rows that have these ids (DENSE mode, ``auto_id``
        off): writing the same rows twice leaves them once (scale-out ingestion's retries rely on it)."""
        self._require((SearchMode.DENSE,), "upsert")
        if self._auto_id:
            raise ParameterError("upsert needs the ids as primary keys: this store has auto_id=True")
        vectors = as_matrix("embeddings", embeddings, self._dimension())
        keys = check_ids("ids", ids, rows=len(vectors))
        rows = schema_.make_rows({"vector": list(vectors)}, len(vectors), check_document_ids(document_id, len(vectors)),
                                 keys, None, None)
        per_request = max(1, INSERT_BYTES // (4 * (self._dim or 256)))
        with self._call("upsert", write=True):
            for start in range(0, len(rows), per_request):
                self._client.upsert(self._collection, rows[start : start + per_request])
        self._maybe_flush()

    # -- reads -----------------------------------------------------------------------------------

    @overload
    def search(
        self,
        embeddings: Any,
        k: int = 3,
        filter_dict: dict[str, Any] | None = None,
        *,
        output_fields: None = None,
        search_params: dict[str, Any] | None = None,
    ) -> Rows: ...

    @overload
    def search(
        self,
        embeddings: Any,
        k: int = 3,
        filter_dict: dict[str, Any] | None = None,
        *,
        output_fields: list[str],
        search_params: dict[str, Any] | None = None,
    ) -> tuple[list[list[float]], list[list[int]], list[list[dict[str, Any]]]]: ...

    def search(
        self,
        embeddings: Any,
        k: int = 3,
        filter_dict: dict[str, Any] | None = None,
        *,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
    ) -> Any:
        """Top-``k`` (scores, ids) per query row, best first.

        Rows of ``{index: weight}`` dicts search ``sparse_vector``, others ``vector``. With
        ``output_fields`` a third list holds the requested fields of every hit.
        """
        k = check_k(k)
        docs = check_filter(filter_dict)
        fields = schema_.check_output_fields(output_fields)
        if isinstance(embeddings, (list, tuple)) and embeddings and all(isinstance(e, dict) for e in embeddings):
            self._require(SPARSE_MODES, "a sparse search")
            data: Any = check_sparse("embeddings", embeddings)
            field, metric = "sparse_vector", "IP"
        else:
            self._require(DENSE_MODES, "a dense search")
            data = as_matrix("embeddings", embeddings, self._dimension())
            field, metric = "vector", self._metric
        empty: list[list[Any]] = [[] for _ in range(len(data))]
        if docs == []:
            return (empty, empty, empty) if fields is not None else (empty, empty)
        knobs = schema_.search_knobs(self._index_type, field, search_params, k)
        with self._consistency_of(docs) as level:
            if docs is not None and post_filter_first(docs) and fields is None:
                found = self._post_filtered(data, field, metric, search_params, k, docs, level)
                if found is not None:
                    scale = SCORE_SCALE[metric]
                    return [[scale(d) for d, _ in row] for row in found], [[i for _, i in row] for row in found]
            expr, expr_params = self._in_expr("document_id", docs) if docs else ("", {})
            with self._call("search"):
                result = self._client.search(
                    self._collection,
                    data=list(data),
                    limit=k,
                    anns_field=field,
                    filter=expr,
                    filter_params=expr_params,
                    output_fields=fields or ["id"],
                    search_params={"metric_type": metric, "params": knobs},
                    consistency_level=level,
                )
        scale = SCORE_SCALE[metric]
        scores = [[scale(float(hit["distance"])) for hit in hits] for hits in result]
        ids = [[int(hit["id"]) for hit in hits] for hits in result]
        if fields is None:
            return scores, ids
        return scores, ids, [[{f: hit.get("entity", {}).get(f) for f in fields} for hit in hits] for hits in result]

    def _post_filtered(
        self, data: Any, field: str, metric: str, search_params: dict[str, Any] | None, k: int, docs: list[int],
        level: str,
    ) -> list[list[tuple[float, int]]] | None:
        """(distance, id) of the best ``k`` hits of ``docs`` per row, taken from an unfiltered search
        for ``post_filter_fetch(docs, k)``; None where a row kept fewer than ``k`` while more exist."""
        limit = post_filter_fetch(docs, k)
        params = {"metric_type": metric, "params": schema_.search_knobs(self._index_type, field, search_params, limit)}
        with self._call("search"):
            result = self._client.search(self._collection, data=list(data), limit=limit, anns_field=field,
                                         output_fields=["document_id"], search_params=params,
                                         consistency_level=level)
        rows = []
        for hits in result:
            kept = post_filter_keep(hits, docs, k, limit, schema_.hit_document)
            if kept is None:
                return None
            rows.append([(float(hit["distance"]), int(hit["id"])) for hit in kept])
        return rows

    def hybrid_search(
        self,
        dense_embeddings: Any,
        sparse_embeddings: Any,
        k: int = 3,
        filter_dict: dict[str, Any] | None = None,
        *,
        weights: tuple[float, float] | None = None,
        rrf_k: int = 60,
    ) -> Rows:
        """Dense and sparse search fused by Milvus (HYBRID mode): top-``k`` (scores, ids) per query.

        Row ``i`` of ``dense_embeddings`` and ``sparse_embeddings[i]`` (``{index: weight}``, such as
        BGE-M3's lexical weights) are one query. Each field's best ``k`` are fused by reciprocal
        rank (``rrf_k``) or, with ``weights=(dense, sparse)``, by a weighted sum of normalised scores;
        the fused score (higher is better) is returned.
        """
        self._require((SearchMode.HYBRID,), "hybrid_search")
        k = check_k(k)
        docs = check_filter(filter_dict)
        pymilvus = _pymilvus()
        fuse = hybrid_.ranker(pymilvus, weights, rrf_k)
        dense = as_matrix("dense_embeddings", dense_embeddings, self._dimension())
        sparse = check_sparse("sparse_embeddings", sparse_embeddings, rows=len(dense))
        if docs == []:
            return [[] for _ in sparse], [[] for _ in sparse]
        expr, params = self._in_expr("document_id", docs) if docs else ("", {})
        knobs = schema_.search_knobs(self._index_type, "vector", None, k)
        reqs = hybrid_.requests(pymilvus, [list(v) for v in dense], sparse, k=k, expr=expr, params=params,
                                metric=self._metric, knobs=knobs)
        with self._consistency_of(docs) as level, self._call("hybrid_search"):
            result = self._client.hybrid_search(self._collection, reqs, fuse, limit=k, output_fields=["id"],
                                                consistency_level=level)
        return [[float(hit["distance"]) for hit in hits] for hits in result], [
            [int(hit["id"]) for hit in hits] for hits in result
        ]

    @contextlib.contextmanager
    def _consistency_of(self, docs: Any) -> Iterator[str]:
        """The consistency level of one search: ``consistency_level``, except Strong for the first
        search with a ``DocumentIds`` this store has not searched with before (a knowledge base's
        scope is a new one after every change of the registry, by this process or another, whose
        vectors a search that is not strong might not see yet); once that search succeeded, later
        ones with the same scope use ``consistency_level`` again."""
        seen = self._strong_scopes.get(id(docs))
        if self._consistency == "Strong" or not isinstance(docs, DocumentIds) or (seen is not None and seen() is docs):
            yield self._consistency
            return
        yield "Strong"
        live = {key: ref for key, ref in self._strong_scopes.items() if ref() is not None}  # scopes replaced: gone
        self._strong_scopes = {**live, id(docs): weakref.ref(docs)}

    def get_all_ids(self) -> list[int]:
        """Every id, read page by page with a query iterator (never one unbounded query)."""
        out: list[int] = []
        with self._call("query_iterator"):
            iterator = self._client.query_iterator(
                self._collection, batch_size=ITERATOR_BATCH, filter="", output_fields=["id"]
            )
            try:
                while batch := iterator.next():
                    out.extend(int(row["id"]) for row in batch)
            finally:
                iterator.close()
        return sorted(out)

    def ids_from(self, first_id: int, limit: int = 2) -> list[int]:
        """Up to ``limit`` ids ``>= first_id``: one bounded query on the primary key."""
        first_id = check_int("first_id", first_id, -(2**63), 2**63 - 1)
        limit = check_int("limit", limit, 1, ITERATOR_BATCH)
        with self._call("query"):
            # first_id is a validated int, so inlining it cannot inject anything (milvus-lite has no
            # filter parameters)
            rows = self._client.query(self._collection, filter=f"id >= {first_id}", output_fields=["id"], limit=limit)
        return [int(row["id"]) for row in rows]

    def count(self) -> int:
        with self._call("count"):
            rows = self._client.query(self._collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    # -- internals -------------------------------------------------------------------------------

    def _open_existing(self) -> None:
        """Load the collection once it has an index per vector field (waiting up to INDEX_WAIT_S).

        Another process may have just created the collection and still be building its indexes
        (create, then index, then load are separate calls); loading before then fails with
        "index not found". A collection that never gets them is loaded anyway, so its error shows.
        """
        wanted = (self._mode in DENSE_MODES) + (self._mode in SPARSE_MODES)
        deadline = time.monotonic() + INDEX_WAIT_S
        while True:
            with self._call("list_indexes"):
                if len(self._client.list_indexes(self._collection)) >= wanted:
                    break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        self._index_type = self._built_index_type() or self._index_type
        with self._call("load_collection"):
            self._client.load_collection(self._collection)

    def _built_index_type(self) -> str | None:
        """The index type the collection's dense field was built with (searches take its knobs:
        a collection made FLAT stays FLAT when opened by a store that asks for HNSW)."""
        if self._mode not in DENSE_MODES:
            return None
        with self._call("describe_index"):
            for name in self._client.list_indexes(self._collection):
                info = self._client.describe_index(self._collection, index_name=name)
                if info.get("field_name") == "vector" and info.get("index_type") in INDEX_TYPES:
                    return str(info["index_type"])
        return None

    def _require(self, modes: tuple[SearchMode, ...], what: str) -> None:
        if self._mode not in modes:
            allowed = " or ".join(m.name for m in modes)
            raise ParameterError(f"{what} needs search_mode {allowed}, but this store is {self._mode.name}")

    def _dimension(self) -> int | None:
        if self._dim is None:
            with self._call("describe_collection"):
                info = self._client.describe_collection(self._collection)
            for spec in info.get("fields", []):
                if spec.get("name") == "vector":
                    self._dim = int(spec.get("params", {}).get("dim", 0)) or None
        return self._dim

    def _server_version(self) -> str:
        if self._server is None:
            with self._call("get_server_version"):
                self._server = str(self._client.get_server_version())
        return self._server

    def _in_expr(self, field: str, values: Sequence[int]) -> tuple[str, dict[str, Any]]:
        return schema_.in_expr(field, values, self._server_version())

    def _fetch(self, ids: np.ndarray, fields: list[str] | None = None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for start in range(0, len(ids), ID_BATCH):
            chunk = ids[start : start + ID_BATCH].tolist()
            expr, params = self._in_expr("id", chunk)
            with self._call("query"):
                rows.extend(
                    self._client.query(
                        self._collection,
                        filter=expr,
                        filter_params=params,
                        output_fields=fields or ["*"],
                        limit=len(chunk),
                    )
                )
        return rows

    def _existing(self, ids: np.ndarray) -> set[int]:
        return {int(row["id"]) for row in self._fetch(ids, ["id"])}

    def _insert(
        self,
        ids: Sequence[int],
        vectors: dict[str, list[Any]],
        count: int,
        document_id: int | Sequence[int],
        docs: Texts,
        metadatas: Metas,
    ) -> None:
        doc = check_document_ids(document_id, count)
        keys = None if self._auto_id else check_ids("ids", ids, rows=count)
        if keys is not None:
            present = sorted(self._existing(keys))
            if present:
                raise ParameterError(f"ids are already in collection {self._collection!r}: {present[:10]}")
        rows = schema_.make_rows(vectors, count, doc, keys, docs, metadatas)
        per_request = max(1, INSERT_BYTES // (4 * (self._dim or 256)))
        done = 0
        try:
            with self._call("insert", write=True):
                for start in range(0, len(rows), per_request):
                    self._client.insert(self._collection, rows[start : start + per_request])
                    done = start + per_request
        except StorageError:
            if keys is not None and done:  # undo the batches already written
                with contextlib.suppress(StorageError), self._call("delete", write=True):
                    self._client.delete(self._collection, ids=keys[:done].tolist())
            raise
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self._auto_flush:
            self.flush()
