# SPDX-License-Identifier: Apache-2.0
"""``MilvusDocstore``: chunks in a Milvus collection, full-text search by Milvus's BM25 function.

Milvus tokenises the text itself (jieba, then the ``cnalphanumonly`` filter: Milvus 2.5's
``chinese`` analyzer) and ranks with BM25, so full-text search needs Milvus 2.5 or later, or
milvus-lite (a local file, ``MilvusClient("./milvus.db")``). Without BM25 (``enable_bm25=False``)
Milvus 2.3 is enough. pymilvus is imported when a store is built, not when this module is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store import _milvus_docs as layout
from mx_rag.storage.document_store.base_storage import MAX_CHUNKS_NUM, MAX_PAGE_CONTENT, Docstore, MxDocument
from mx_rag.storage.document_store.chunk_rows import ChunkCodec, TextFn
from mx_rag.storage.validation import (
    check_filter,
    check_id,
    check_ids,
    check_top_k,
    post_filter_fetch,
    post_filter_first,
    post_filter_keep,
)
from mx_rag.storage.vectorstore import _milvus_schema as milvus_
from mx_rag.storage.vectorstore._milvus_collection import MilvusCollection
from mx_rag.utils.checks import check_bool, check_instance, check_number, check_str, fail
from mx_rag.utils.common import TEXT_MAX_LEN
from mx_rag.utils.lazy import extra_import

__all__ = ["MilvusDocstore"]

logger = logging.getLogger(__name__)

ID_BATCH = 4096  # ids per "id in [...]" expression
INSERT_BYTES = 8 * 1024 * 1024  # text bytes per insert request (gRPC messages are capped)
ITERATOR_BATCH = 1000
ALLOCATE_BATCH = 10_000  # ids taken from the allocator per insert request


class MilvusDocstore(Docstore, MilvusCollection):
    """Chunk store in a Milvus collection, with BM25 full-text search done by Milvus.

    Chunk ids are the collection's primary keys, assigned by Milvus (increasing): on milvus-lite
    by the collection (auto_id); on a server by Milvus's id allocator, through a helper
    collection ``<collection_name>_id_allocator``, and written by the store, so that ``update``
    keeps them (Milvus gives upserted rows of an auto_id collection new ids). Every write
    goes to the collection at once; with ``auto_flush`` (the default) it is flushed, so reads see it.
    One store may be shared by threads.

    Args:
        client: a ``pymilvus.MilvusClient`` (a Milvus server, or milvus-lite with a local file).
        collection_name: the collection (1 to 1024 characters), created if missing.
        enable_bm25: index chunk text for BM25 (needs Milvus 2.5+ or milvus-lite). False:
            ``full_text_search`` returns ``[]`` (and Milvus 2.3 is enough).
        bm25_k1: BM25 term-frequency saturation, in [1.2, 2.0].
        bm25_b: BM25 length normalisation, in [0, 1].
        auto_flush: flush after every write.
        encrypt_fn: ``str -> str`` applied to chunk text before it is written; only with
            ``enable_bm25=False`` (Milvus must read the plaintext to index it, so the two together
            are refused rather than storing plaintext silently, as the original does).
        decrypt_fn: ``str -> str`` applied to chunk text when it is read; needs ``encrypt_fn``.

    Raises:
        ParameterError: a bad argument, BM25 with encryption, or BM25 on a Milvus older than 2.5.
        StorageError: Milvus refused to create or load the collection.

    Example:
        >>> from pymilvus import MilvusClient
        >>> store = MilvusDocstore(MilvusClient("./milvus_demo.db"))
        >>> ids = store.add([MxDocument(page_content="示例文本", document_name="1.docx")], 1)
        >>> [doc.chunk_id for doc in store.full_text_search("文本")] == ids
        True
    """

    def __init__(self, client: Any, collection_name: str = "doc_store", enable_bm25: bool = True,
                 bm25_k1: float = 1.2, bm25_b: float = 0.75, auto_flush: bool = True,
                 encrypt_fn: TextFn | None = None, decrypt_fn: TextFn | None = None) -> None:
        with extra_import("milvus", "pymilvus"):
            import pymilvus
        self._client = check_instance("client", client, pymilvus.MilvusClient)
        self._error = pymilvus.MilvusException
        self._collection = check_str("collection_name", collection_name, 1, 1024)
        self._bm25 = check_bool("enable_bm25", enable_bm25)
        self._k1 = check_number("bm25_k1", bm25_k1, 1.2, 2.0)
        self._b = check_number("bm25_b", bm25_b, 0.0, 1.0)
        self._auto_flush = check_bool("auto_flush", auto_flush)
        if self._bm25 and (encrypt_fn is not None or decrypt_fn is not None):
            raise ParameterError(
                "encrypt_fn/decrypt_fn need enable_bm25=False: Milvus tokenises the stored text for BM25, "
                "so it would have to store the plaintext; pass enable_bm25=False to store encrypted chunks"
            )
        self._codec = ChunkCodec(encrypt_fn, decrypt_fn)
        self._server = ""
        with self._call("get_server_version"):
            self._server = str(self._client.get_server_version())
        if self._bm25 and milvus_.before(self._server, (2, 5)):
            raise ParameterError(f"enable_bm25 needs Milvus 2.5 or later (its BM25 function); the server is "
                                 f"{self._server}: upgrade it, or pass enable_bm25=False (Milvus 2.4 and later)")
        if milvus_.before(self._server, (2, 3)):
            raise ParameterError(f"MilvusDocstore needs Milvus 2.3 or later (upserts); the server is {self._server}")
        self._lite = milvus_.is_lite(self._server)
        self._manual_ids = False  # True: the store writes ids taken from the allocator (set by the collection)
        self._dense = False  # True: Milvus 2.3's dense placeholder vector
        self._create_collection(pymilvus)

    # -- properties and collection ----------------------------------------------------------------

    def _create_collection(self, pymilvus: Any) -> None:
        with self._call("has_collection"):
            exists = self._client.has_collection(self._collection)
        if not exists:
            self._manual_ids = not self._lite
            self._dense = milvus_.before(self._server, (2, 4))
            schema, indexes = layout.build_schema(self._client, pymilvus.DataType, pymilvus.Function,
                                                  pymilvus.FunctionType, bm25=self._bm25, k1=self._k1, b=self._b,
                                                  auto_id=not self._manual_ids, dense=self._dense)
            with self._call("create_collection"):
                self._client.create_collection(self._collection, schema=schema, index_params=indexes,
                                               consistency_level="Strong")
            self._ensure_allocator(pymilvus)
            return
        with self._call("describe_collection"):
            info = self._client.describe_collection(self._collection)
        self._manual_ids = not info.get("auto_id", True)
        self._dense = any(field.get("name") == layout.DENSE_FIELD for field in info.get("fields") or [])
        self._ensure_allocator(pymilvus)
        has_bm25 = any(function.get("type") == pymilvus.FunctionType.BM25 for function in info.get("functions") or [])
        if has_bm25 != self._bm25:
            raise ParameterError(f"enable_bm25 is {self._bm25}, but collection {self._collection!r} was made with "
                                 f"enable_bm25={has_bm25}: open it with that value, or use another collection_name")
        with self._call("load_collection"):
            self._client.load_collection(self._collection)

    def _ensure_allocator(self, pymilvus: Any) -> None:
        if not self._manual_ids:
            return
        with self._call("create the id allocator collection"):
            if not self._client.has_collection(self._allocator):
                self._client.create_collection(self._allocator, schema=layout.allocator_schema(
                    self._client, pymilvus.DataType))  # fmt: skip

    @property
    def _allocator(self) -> str:
        return self._collection + layout.ALLOCATOR_SUFFIX

    def _allocate(self, count: int) -> list[int]:
        """``count`` new chunk ids from Milvus's id allocator (unique on the server, increasing)."""
        ids: list[int] = []
        with self._call("allocate ids", write=True):
            for start in range(0, count, ALLOCATE_BATCH):
                rows = [{"v": layout.DENSE_PLACEHOLDER}] * min(ALLOCATE_BATCH, count - start)
                taken = [int(i) for i in self._client.insert(self._allocator, rows)["ids"]]
                self._client.delete(self._allocator, ids=taken)
                ids.extend(taken)
        return ids

    def drop_collection(self) -> None:
        """Delete the collection and every chunk in it (and its id allocator on a server)."""
        with self._call("drop_collection"):
            self._client.drop_collection(self._collection)
            if self._manual_ids:
                self._client.drop_collection(self._allocator)

    def flush(self) -> None:
        """Persist pending writes (``auto_flush`` does this after every write)."""
        with self._call("flush", write=True):
            self._client.flush(self._collection)

    # -- writes -----------------------------------------------------------------------------------

    def add(self, documents: Sequence[MxDocument], document_id: int) -> list[int]:
        """Insert chunks of one document; return their new ids in input order.

        Raises:
            ParameterError: a bad argument (a chunk over 65,535 UTF-8 bytes, say); nothing is written.
            StorageError: Milvus failed; the chunks already written by this call are deleted again.
        """
        document_id = check_id("document_id", document_id)
        if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
            raise fail("documents", documents, "a list of MxDocument")
        if not 1 <= len(documents) <= MAX_CHUNKS_NUM:
            raise ParameterError(f"documents must hold 1 to {MAX_CHUNKS_NUM} chunks, got {len(documents)}")
        rows = layout.make_rows(self._codec, documents, document_id, self._bm25, self._dense)
        ids: list[int] = []
        if self._manual_ids:
            for row, chunk_id in zip(rows, self._allocate(len(rows)), strict=True):
                row["id"] = chunk_id
        try:
            with self._call("insert", write=True):
                for batch in _batches(rows):
                    ids.extend(int(i) for i in self._client.insert(self._collection, batch)["ids"])
        except StorageError:
            if ids:
                with contextlib.suppress(StorageError):
                    self._delete_ids(ids)
            raise
        self._maybe_flush()
        return ids

    def delete(self, document_id: int) -> list[int]:
        """Delete every chunk of ``document_id``; return their ids, ascending."""
        document_id = check_id("document_id", document_id)
        ids = sorted(int(row["id"]) for row in self._iterate(f"document_id == {document_id}", ["id"]))
        if ids:
            self._delete_ids(ids)
            self._maybe_flush()
        return ids

    def update(self, chunk_ids: Sequence[int], texts: Sequence[str]) -> None:
        """Replace the text of existing chunks, keeping their ids (Milvus re-indexes them for BM25).

        Raises:
            ParameterError: lengths differ, an id repeats or does not exist, a text is too long.
            StorageError: the collection is an auto_id one on a Milvus server (made by the original
                SDK), where an upsert would give the chunks new ids (nothing changes).
        """
        ids = check_ids("chunk_ids", chunk_ids, allow_empty=True).tolist()
        values = layout.check_texts(texts, len(ids))
        if ids and not self._lite and not self._manual_ids:
            # A Milvus server gives upserted rows of an auto_id collection new ids (docs of 2.5 and 2.6),
            # which would cut chunks off their vectors: refuse before anything changes.
            raise StorageError(f"update is unavailable on collection {self._collection!r}: it has Milvus-assigned "
                               f"ids (auto_id), which a Milvus server ({self._server}) re-keys on upsert; delete "
                               "the document and add it again, or use a collection MilvusDocstore created")
        stored = []
        for i, text in enumerate(values):
            check_str(f"texts[{i}]", text, 0, MAX_PAGE_CONTENT)
            stored.append(layout.check_content(f"texts[{i}]", self._codec.encrypt(text)))
        if not ids:
            return
        rows = {int(row["id"]): row for row in self._fetch(ids, layout.FIELDS)}
        missing = [i for i in ids if i not in rows]
        if missing:
            raise ParameterError(f"chunk_ids holds ids that do not exist: {missing[:20]}")
        new_rows = []
        for chunk_id, text in zip(ids, stored, strict=True):
            row = {name: rows[chunk_id][name] for name in layout.FIELDS}
            row["page_content"] = text
            new_rows.append(row if self._bm25 else layout.add_placeholder(row, self._dense))
        with self._call("upsert", write=True):
            for batch in _batches(new_rows):
                self._client.upsert(self._collection, batch)
        self._maybe_flush()

    # -- reads ------------------------------------------------------------------------------------

    def search(self, chunk_id: int) -> MxDocument | None:
        """The chunk with id ``chunk_id``, or None."""
        chunk_id = check_id("chunk_id", chunk_id)
        return self.search_many([chunk_id]).get(chunk_id)

    def search_many(self, chunk_ids: Sequence[int]) -> dict[int, MxDocument]:
        """Chunks by id; ids not found are absent from the result."""
        ids = sorted(set(check_ids("chunk_ids", chunk_ids, allow_empty=True, unique=False).tolist()))
        return {int(row["id"]): self._document(row) for row in self._fetch(ids, layout.FIELDS)}

    def search_by_document_id(self, document_id: int) -> list[MxDocument]:
        """The chunks of ``document_id`` in insertion order."""
        document_id = check_id("document_id", document_id)
        rows = self._iterate(f"document_id == {document_id}", layout.FIELDS)
        return [self._document(row) for row in sorted(rows, key=lambda row: int(row["id"]))]

    def get_all_chunk_id(self) -> list[int]:
        """Every chunk id, ascending."""
        return sorted(int(row["id"]) for row in self._iterate("", ["id"]))

    def get_all_document_id(self) -> list[int]:
        """Every document id that has chunks, ascending."""
        return sorted({int(row["document_id"]) for row in self._iterate("", ["document_id"])})

    def count(self) -> int:
        with self._call("count"):
            rows = self._client.query(self._collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def full_text_search(  # type: ignore[override]  # the reference puts drop_ratio_search third
        self, query: str, top_k: int = 3, drop_ratio_search: float = 0.2, filter_dict: dict[str, Any] | None = None
    ) -> list[MxDocument]:
        """BM25 search over chunk text, best first; ``[]`` when the store has no BM25 index.

        Each result carries ``metadata["score"]`` (the BM25 score, higher is better) and
        ``metadata["retrieval_type"] = "sparse"``.

        Args:
            query: the search text (at most 1,000,000 characters).
            top_k: number of results, 1 to 10,000.
            drop_ratio_search: the share of the query's smallest term weights left out, in
                [0, 1). milvus-lite ranks exactly and is sent 0.
            filter_dict: ``{"document_id": [ids]}`` restricts the search to those documents.
        """
        check_str("query", query, 0, TEXT_MAX_LEN)
        top_k = check_top_k(top_k)
        drop = check_number("drop_ratio_search", drop_ratio_search, 0.0, 1.0)
        if drop >= 1.0:
            raise fail("drop_ratio_search", drop_ratio_search, "in [0, 1)")
        document_ids = check_filter(filter_dict)
        if not self._bm25 or not query.strip() or document_ids == []:
            return []
        knobs = {} if milvus_.is_lite(self._server) else {"drop_ratio_search": drop}
        hits = None
        if document_ids is not None and post_filter_first(document_ids):
            fetch = post_filter_fetch(document_ids, top_k)
            found = self._bm25_search(query, fetch, "", {}, knobs)
            hits = post_filter_keep(found, document_ids, top_k, fetch, milvus_.hit_document)
        if hits is None:
            expr, params = milvus_.in_expr("document_id", document_ids, self._server) if document_ids else ("", {})
            hits = self._bm25_search(query, top_k, expr, params, knobs)
        # Milvus reports the BM25 score; milvus-lite reports it negated. BM25 scores are never negative.
        return [self._document(hit["entity"] | {"id": hit["id"]}, score=abs(float(hit["distance"])),
                               retrieval_type="sparse") for hit in hits]

    # -- internals --------------------------------------------------------------------------------

    def _bm25_search(self, query: str, limit: int, expr: str, params: dict[str, Any], knobs: dict[str, Any]) -> Any:
        with self._call("full-text search"):
            return self._client.search(self._collection, data=[query], anns_field="sparse_vector", limit=limit,
                                       filter=expr, filter_params=params, output_fields=layout.FIELDS,
                                       search_params={"metric_type": "BM25", "params": knobs})[0]

    def _server_version(self) -> str:
        return self._server

    def _document(self, row: dict[str, Any], **extra: Any) -> MxDocument:
        return self._codec.to_document(layout.MilvusRow.of(row), **extra)

    def _fetch(self, ids: Sequence[int], fields: list[str]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for start in range(0, len(ids), ID_BATCH):
            chunk = list(ids[start : start + ID_BATCH])
            expr, params = milvus_.in_expr("id", chunk, self._server)
            with self._call("query"):
                rows.extend(self._client.query(self._collection, filter=expr, filter_params=params,
                                               output_fields=fields, limit=len(chunk)))
        return rows

    def _iterate(self, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """Every row matching ``expr``, page by page (a plain query is capped at 16,384 rows)."""
        rows: list[dict[str, Any]] = []
        with self._call("query_iterator"):
            iterator = self._client.query_iterator(self._collection, batch_size=ITERATOR_BATCH, filter=expr,
                                                   output_fields=fields)
            try:
                while batch := iterator.next():
                    rows.extend(batch)
            finally:
                iterator.close()
        return rows

    def _delete_ids(self, ids: Sequence[int]) -> None:
        with self._call("delete", write=True):
            for start in range(0, len(ids), ID_BATCH):
                self._client.delete(self._collection, ids=list(ids[start : start + ID_BATCH]))

    def _maybe_flush(self) -> None:
        if self._auto_flush:
            self.flush()


def _batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``rows`` cut into insert requests of about INSERT_BYTES of text each."""
    batch: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        length = len(row["page_content"]) * 3 + 1024
        if batch and size + length > INSERT_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += length
    if batch:
        yield batch
