# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeDB``: one knowledge base over a registry, a chunk store and a vector store.

Adding a document is transactional across the three stores. The registry row is written first
with status ``pending``; then the chunks (one transaction), then the vectors (one atomic save),
then the row becomes ``ready``. Deleting marks the row ``deleting``, removes vectors, then chunks,
then the row. Replacing a document (``force=True`` uploads) stages the new version invisibly,
adds its chunks and vectors, then swaps the registry rows in one transaction and only then
removes the old version's chunks and vectors. A failure undoes what was written; after a crash
(kill -9, power loss), opening the knowledge base finishes or undoes whatever was left half done,
so a document is always its old version or its new one.

Several processes may share one knowledge-base folder: every write transaction holds the lock file
``<registry>.lock``, and the vector store reloads what another process saved before it searches.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mx_rag.errors import ParameterError, PermissionDenied, StorageError
from mx_rag.knowledge._prepared import (
    EmbedFunc,
    PreparedFile,
    _check_metadatas,
    _check_texts,
    check_embeddings,
    embed_texts,
    run_embedders,
)
from mx_rag.knowledge.models import DELETING, PENDING, READY, DocumentModel
from mx_rag.knowledge.retriever import KnowledgeRetriever
from mx_rag.knowledge.store import KnowledgeStore, check_user_id
from mx_rag.retrievers.retriever import Retriever
from mx_rag.storage.document_store.base_storage import Docstore, MxDocument
from mx_rag.storage.validation import DocumentIds
from mx_rag.storage.vectorstore.vectorstore import VectorStore
from mx_rag.utils.checks import check_bool, check_instance, check_int, check_str, fail
from mx_rag.utils.file_check import check_dir, check_inside, check_path
from mx_rag.utils.tracing import stage

# KnowledgeDB and KnowledgeStore, and the names other modules import from here (defined in _prepared)
__all__ = ["KnowledgeDB", "KnowledgeStore", "PreparedFile", "check_embeddings", "embed_texts", "run_embedders"]

logger = logging.getLogger(__name__)

MAX_FILE_COUNT = 8000
ID_BATCH = 10_000  # chunk ids read per query while reconciling the stores


@dataclass(frozen=True)
class ConsistencyReport:
    """What ``KnowledgeDB.check`` found; ``ok`` when the three stores agree."""

    documents: int
    chunks: int
    vectors: int
    unfinished_documents: list[int]
    documents_without_chunks: list[int]
    chunks_without_vectors: list[int]
    vectors_without_chunks: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.unfinished_documents
            or self.documents_without_chunks
            or self.chunks_without_vectors
            or self.vectors_without_chunks
        )


class KnowledgeDB:
    """Documents of one knowledge base, as chunks in ``chunk_store`` and vectors in ``vector_store``.

    Args:
        knowledge_store: the registry (``KnowledgeStore``).
        chunk_store: any ``Docstore`` (``SQLiteDocstore``, ``PostgresDocstore``).
        vector_store: any ``VectorStore`` (``MindFAISS``, ``MilvusDB``).
        knowledge_name: an existing knowledge base in which ``user_id`` has a role.
        white_paths: directories files may be uploaded from (a file must resolve inside one).
        user_id: 6 to 64 characters from ``[a-zA-Z0-9_-]``.
        max_file_count: most files per upload call, in [1, 8000].
        lock: optional extra lock (threading or multiprocessing) held around writes. Writes always
            hold the lock file ``<registry db>.lock`` too, which keeps other processes out.
        drop_incomplete: on open, remove the documents of this knowledge base whose chunks lost
            their vectors (e.g. the index file was lost), so they can be uploaded again. Without
            it such a knowledge base refuses to open with a ``StorageError`` saying so.
        strict_paths: make ``add_file`` require its file to lie inside ``white_paths`` too.
            Default False, as the original: ``add_file`` stores texts the caller parsed, from any
            path without ``..`` (``upload_files`` and ``upload_dir`` always check ``white_paths``).

    Opening repairs what a crash left: interrupted adds are undone, deletes and replaces
    finished, vectors whose chunks are gone deleted.

    Example:
        >>> kb = KnowledgeDB(knowledge_store=store, chunk_store=chunks, vector_store=vectors,
        ...                  knowledge_name="test", white_paths=["/data/"], user_id="Default")  # doctest: +SKIP
    """

    def __init__(
        self,
        knowledge_store: KnowledgeStore,
        chunk_store: Docstore,
        vector_store: VectorStore,
        knowledge_name: str,
        white_paths: Sequence[str],
        user_id: str,
        max_file_count: int = 1000,
        lock: Any = None,
        drop_incomplete: bool = False,
        *,
        strict_paths: bool = False,
    ) -> None:
        self.knowledge_store = check_instance("knowledge_store", knowledge_store, KnowledgeStore)
        self.chunk_store = check_instance("chunk_store", chunk_store, Docstore)
        self.vector_store = check_instance("vector_store", vector_store, VectorStore)
        self.knowledge_name = check_str("knowledge_name", knowledge_name, 1, 1024)
        self.user_id = check_user_id(user_id)
        self.max_file_count = check_int("max_file_count", max_file_count, 1, MAX_FILE_COUNT)
        if not isinstance(white_paths, (list, tuple)) or not 1 <= len(white_paths) <= 1024:
            raise fail("white_paths", white_paths, "a list of 1 to 1024 directories")
        self.white_paths = [check_dir(f"white_paths[{i}]", p) for i, p in enumerate(white_paths)]
        check_bool("drop_incomplete", drop_incomplete)
        self.strict_paths = check_bool("strict_paths", strict_paths)
        self._lock: AbstractContextManager[Any] = self.knowledge_store.write_lock(outer=lock)
        self.knowledge_id = self.knowledge_store.get_knowledge_id(knowledge_name, user_id)
        self._new_ids: set[int] = set()  # rows add_prepared registered as new (not replacements)
        self._replaced: dict[int, int] = {}  # staged new version -> the document it replaces
        self._scope: tuple[int, DocumentIds] | None = None  # (registry generation, its ready documents)
        self.repaired_on_open = self.repair(drop_incomplete=drop_incomplete)  # document ids repaired

    # -- paths -----------------------------------------------------------------------------------

    def allowing(self, white_paths: Sequence[str], max_file_count: int | None = None) -> KnowledgeDB:
        """This knowledge base (same stores and lock, not opened or repaired again) accepting files
        from ``white_paths`` instead, ``max_file_count`` at a time."""
        view = copy.copy(self)
        if not isinstance(white_paths, (list, tuple)) or not 1 <= len(white_paths) <= 1024:
            raise fail("white_paths", white_paths, "a list of 1 to 1024 directories")
        view.white_paths = [check_dir(f"white_paths[{i}]", p) for i, p in enumerate(white_paths)]
        if max_file_count is not None:
            view.max_file_count = check_int("max_file_count", max_file_count, 1, MAX_FILE_COUNT)
        return view

    def check_file_path(self, file: Any) -> Path:
        """The resolved path of ``file``, which must lie inside ``white_paths``."""
        return check_inside("file", check_path("file", file), self.white_paths)

    # -- add / delete ----------------------------------------------------------------------------

    def add_file(
        self,
        file: Path | str,
        texts: Sequence[str],
        embed_func: EmbedFunc | dict[str, EmbedFunc | None],
        metadatas: Sequence[dict[str, Any]] | None = None,
    ) -> int:
        """Add one document's chunks; return its ``document_id``. All or nothing.

        ``file`` names the document (its path, without ``..``); it must lie inside ``white_paths``
        only with ``strict_paths=True``.
        """
        path = self.check_file_path(file) if self.strict_paths else check_path("file", file)
        texts = _check_texts(texts)
        metadatas = _check_metadatas(metadatas, len(texts))
        dense, sparse = embed_texts(embed_func, texts)
        return self.add_prepared([PreparedFile(path, texts, list(metadatas), dense, sparse)])[0]

    def add_prepared(self, files: Sequence[PreparedFile]) -> list[int]:
        """Add several embedded documents at once; return their ids. All of them or none.

        Each document gets its registry row and its chunk transaction; the vectors of all of them
        go to the vector store in one call (one index save). A file with ``replace=True`` whose
        path is already a document replaces it: until one registry transaction swaps them, the
        old version stays in place, so a failure or a crash leaves the old version.
        """
        with stage("write", documents=len(files)), self._lock:
            self._finish_interrupted()
            doc_ids: list[int] = []
            chunk_ids: dict[int, list[int]] = {}
            promoted: list[int] = []
            try:
                for item in files:
                    doc_id = self._register(item)
                    doc_ids.append(doc_id)
                    if item.replace and doc_id not in self._new_ids:
                        promoted.append(doc_id)
                    documents = [
                        MxDocument(t, dict(m), document_name=item.path.name)
                        for t, m in zip(item.texts, item.metadatas, strict=True)
                    ]
                    chunk_ids[doc_id] = self.chunk_store.add(documents, doc_id)
                self._add_vectors(files, doc_ids, chunk_ids)
                self.knowledge_store.commit_documents([d for d in doc_ids if d not in promoted], promoted)
            except BaseException:
                for doc_id in doc_ids:
                    self._undo_add(doc_id, chunk_ids.get(doc_id, []))
                raise
            finally:
                self._new_ids.clear()
                replaced, self._replaced = self._replaced, {}
            self._remove_replaced({d: replaced[d] for d in promoted})
        return doc_ids

    def _register(self, item: PreparedFile) -> int:
        """The registry row of a file: a staged new version when it replaces a document."""
        path = str(item.path)
        if item.replace:
            current = self.knowledge_store.find_document(self.knowledge_name, path, self.user_id)
            if current is not None:
                staged = self.knowledge_store.stage_document(
                    self.knowledge_name, path, self.user_id, current.document_id, item.content_hash
                )
                self._replaced[staged] = current.document_id
                return staged
        doc_id = self.knowledge_store.add_doc_info(
            self.knowledge_name, item.path.name, path, self.user_id, status=PENDING, content_hash=item.content_hash
        )
        self._new_ids.add(doc_id)
        return doc_id

    def delete_file(self, doc_name: str) -> int | None:
        """Delete a document by full path (or file name when unambiguous); return its id."""
        with self._lock:
            self._finish_interrupted()
            row = self.knowledge_store.find_document(self.knowledge_name, doc_name, self.user_id)
            if row is None:
                logger.warning("delete_file: no such document in knowledge base %s", self.knowledge_name)
                return None
            self._require_admin()
            self._finish_delete(row.document_id)
            return row.document_id

    def delete_all(self) -> None:
        """Delete every document, then the knowledge base itself (all its members)."""
        with self._lock:
            for row in self.get_all_documents():
                self._finish_delete(row.document_id)
            for user_id, role in self.knowledge_store.get_all_usr_role_by_knowledge(self.knowledge_name).items():
                self.knowledge_store.delete_usr_id_from_knowledge(self.knowledge_name, user_id, role, force=True)

    def check_document_exist(self, doc_name: str) -> bool:
        return self.knowledge_store.check_document_exist(self.knowledge_name, doc_name, self.user_id)

    def get_all_documents(self) -> list[DocumentModel]:
        return self.knowledge_store.get_all_documents(self.knowledge_name, self.user_id)

    def document_ids(self) -> list[int]:
        """Ids of the ready documents; use them as a retrieval filter for this knowledge base."""
        return self.knowledge_store.ready_document_ids(self.knowledge_name, self.user_id)

    def as_retriever(
        self,
        embed_func: EmbedFunc,
        k: int = 1,
        score_threshold: float | None = None,
        filter_dict: dict[str, Any] | None = None,
    ) -> KnowledgeRetriever:
        """A dense retriever that only returns this knowledge base's chunks, whatever else the
        vector and chunk stores hold (each call reads the current documents).

        Args:
            embed_func: ``texts -> vectors``, the embedder the documents were stored with.
            k, score_threshold, filter_dict: as ``Retriever``'s; ``filter_dict`` can only narrow.
        """
        dense = Retriever(
            vector_store=self.vector_store,
            document_store=self.chunk_store,
            embed_func=embed_func,
            k=k,
            score_threshold=score_threshold,
            filter_dict=filter_dict or {},
        )
        return self.scoped(dense, k=k)

    def scoped(self, retriever: Any, k: int | None = None) -> KnowledgeRetriever:
        """``retriever`` (any mx_rag retriever taking a per-call ``filter_dict``) limited to this
        knowledge base's current documents; ``k``, when given, is asked of it on every call."""
        return KnowledgeRetriever(retriever=retriever, document_ids=self._scope_ids, k=k)

    def _scope_ids(self) -> DocumentIds:
        """The ready documents as one ``DocumentIds`` (with their share of the registry's documents),
        read again only when the registry's generation changed, and shared by every retriever of this
        object (stores keep their arrays per object)."""
        generation = self.knowledge_store.generation()  # read first: a later change makes the next call read
        scope = self._scope
        if scope is None or scope[0] != generation:
            ids = self.document_ids()
            share = min(1.0, len(ids) / max(1, self.knowledge_store.document_count()))
            scope = self._scope = (generation, DocumentIds(ids, share=share))
        return scope[1]

    # -- consistency -----------------------------------------------------------------------------

    def repair(self, drop_incomplete: bool = False, *, compare_stores: bool = True) -> list[int]:
        """Finish or undo what a crash interrupted and reconcile the chunk and vector stores.

        Returns the ids of the documents repaired (their add undone, their delete or replace
        finished, or, with ``drop_incomplete``, removed because their chunks have no vectors).
        ``compare_stores=False`` skips the comparison of the two stores (a count, the highest id
        and a lookup in each; strong reads on Milvus): for a writer that knows every write it
        made succeeded in both stores.

        Raises:
            StorageError: chunks of this knowledge base have no vectors and ``drop_incomplete``
                is False (nothing is changed for those documents).
        """
        check_bool("drop_incomplete", drop_incomplete)
        check_bool("compare_stores", compare_stores)
        with self._lock:
            repaired = self._finish_interrupted()
            differing = self._differing_ids() if compare_stores else None
            incomplete: list[int] = []
            if differing is not None:
                self._delete_orphan_vectors(*differing)
                incomplete = self._incomplete_documents(*differing)
            if incomplete and not drop_incomplete:
                where = getattr(self.vector_store, "get_save_file", lambda: "")() or type(self.vector_store).__name__
                raise StorageError(
                    f"knowledge base {self.knowledge_name!r}: {len(incomplete)} document(s) have chunks without "
                    f"vectors in {where} (the index lost writes or is missing: ids {incomplete[:10]}); open it with "
                    "KnowledgeDB(..., drop_incomplete=True) or run `mxrag kb repair` to remove them, then upload "
                    "them again"
                )
            for doc_id in incomplete:
                logger.warning("removing document %d: its chunks have no vectors", doc_id)
                self._finish_delete(doc_id)
            return repaired + incomplete

    def check(self) -> ConsistencyReport:
        """Compare the three stores for this knowledge base (reads every chunk id: O(chunks))."""
        with self._lock:
            docs = [row.document_id for row in self.get_all_documents()]
            unfinished = [
                row.document_id
                for row in self.knowledge_store.interrupted_documents(self.knowledge_id)
                if row.knowledge_id != self.knowledge_id or row.status != READY or row.replaces is not None
            ]
            chunk_ids = {d: self._chunk_ids(d) for d in docs}
            vector_ids = set(self.vector_store.get_all_ids())
            all_chunks = sorted(i for ids in chunk_ids.values() for i in ids)
            return ConsistencyReport(
                documents=len(docs),
                chunks=len(all_chunks),
                vectors=len(vector_ids),
                unfinished_documents=sorted(unfinished),
                documents_without_chunks=[d for d, ids in chunk_ids.items() if not ids],
                chunks_without_vectors=[i for i in all_chunks if i not in vector_ids],
                vectors_without_chunks=sorted(vector_ids - set(self.chunk_store.get_all_chunk_id())),
            )

    def _finish_interrupted(self) -> list[int]:
        """Undo staged replacements and adds left ``pending``, finish deletes left ``deleting`` and
        the removal of replaced versions (the caller holds the lock, so no writer is midway)."""
        rows = self.knowledge_store.interrupted_documents(self.knowledge_id)
        broken = [row for row in rows if row.knowledge_id != self.knowledge_id or row.status != READY]
        for row in broken:
            logger.warning("repairing document %d left %s by an interrupted run", row.document_id, row.status)
            self._finish_delete(row.document_id)
        self._remove_replaced({row.document_id: row.replaces for row in rows if row not in broken and row.replaces})
        return [row.document_id for row in broken]

    def _remove_replaced(self, replaced: dict[int, int]) -> None:
        """Remove the chunks and vectors of versions that a committed replace superseded."""
        for old in replaced.values():
            self._remove_content(old)
        if replaced:
            self.knowledge_store.clear_replaces(list(replaced))

    def _differing_ids(self) -> tuple[set[int], set[int]] | None:
        """The chunk ids and the vector ids when the two stores disagree; ``None`` when they agree.

        Equal counts and the same highest id are taken as agreement without reading every id
        (one count each, a MAX and a bounded query: a listing of all ids scans a Milvus
        collection). Chunk ids are never reused, and a store that lost its last writes (a lost or
        torn WAL, an old index, or both) misses the newest ids or keeps ids the other deleted,
        which changes the count or the highest id; a replace with as many chunks changes the
        highest id. Only then are all the ids read and compared.
        """
        vectors, chunks = self.vector_store, self.chunk_store
        if vectors.count() == chunks.count():
            top = chunks.max_chunk_id()
            if top is None or vectors.ids_from(top, limit=2) == [top]:
                return None
        chunk_ids, vector_ids = set(chunks.get_all_chunk_id()), set(vectors.get_all_ids())
        return None if chunk_ids == vector_ids else (chunk_ids, vector_ids)

    def _delete_orphan_vectors(self, chunk_ids: set[int], vector_ids: set[int]) -> None:
        """Vectors whose chunks no longer exist (the chunk store lost its last commits) can never be
        returned and hold ids the chunk store may hand out again: delete them."""
        orphans = sorted(vector_ids - chunk_ids)
        if orphans:
            logger.warning("deleting %d vectors whose chunks are gone (lost writes?): %s", len(orphans), orphans[:10])
            self.vector_store.delete(orphans)

    def _incomplete_documents(self, chunk_ids: set[int], vector_ids: set[int]) -> list[int]:
        """Documents of this knowledge base with chunks that have no vector."""
        mine = set(self.document_ids())
        broken: set[int] = set()
        missing = sorted(chunk_ids - vector_ids)
        for start in range(0, len(missing), ID_BATCH):
            for chunk in self.chunk_store.search_many(missing[start : start + ID_BATCH]).values():
                if chunk.document_id in mine:
                    broken.add(chunk.document_id)
        return sorted(broken)

    # -- internals -------------------------------------------------------------------------------

    def _require_admin(self) -> None:
        roles = self.knowledge_store.get_all_usr_role_by_knowledge(self.knowledge_name)
        if roles.get(self.user_id) != "admin":
            raise PermissionDenied(f"{self.user_id!r} is not an admin of knowledge base {self.knowledge_name!r}")

    def _chunk_ids(self, document_id: int) -> list[int]:
        return [d.chunk_id for d in self.chunk_store.search_by_document_id(document_id) if d.chunk_id is not None]

    def _add_vectors(self, files: Sequence[PreparedFile], doc_ids: list[int], chunk_ids: dict[int, list[int]]) -> None:
        ids = [i for d in doc_ids for i in chunk_ids[d]]
        owners = [d for d in doc_ids for _ in chunk_ids[d]]
        dense = [f.dense for f in files if f.dense is not None]
        sparse = [s for f in files if f.sparse is not None for s in f.sparse]
        if (dense and len(dense) != len(files)) or (sparse and len(sparse) != len(ids)):
            raise ParameterError("every document of one add must have the same kinds of embeddings")
        matrix = np.concatenate(dense) if dense else None
        if matrix is not None and sparse:
            self.vector_store.add_dense_and_sparse(ids, matrix, sparse, document_id=owners)
        elif matrix is not None:
            self.vector_store.add(ids, matrix, document_id=owners)
        else:
            self.vector_store.add_sparse(ids, sparse, document_id=owners)

    def _undo_add(self, doc_id: int, chunk_ids: list[int]) -> None:
        try:
            self._finish_delete(doc_id, chunk_ids)
        except Exception:  # the original error matters more; repair() retries on next open
            logger.exception("could not undo the failed add of document %d", doc_id)

    def _finish_delete(self, doc_id: int, chunk_ids: list[int] | None = None) -> None:
        self.knowledge_store.set_document_status(doc_id, DELETING)
        self._remove_content(doc_id, chunk_ids)
        self.knowledge_store.remove_document(doc_id)

    def _remove_content(self, doc_id: int, chunk_ids: list[int] | None = None) -> None:
        """Delete a document's vectors, then its chunks (so no vector ever lacks its chunk)."""
        ids = sorted(set(chunk_ids or []) | set(self._chunk_ids(doc_id)))
        if ids:
            self.vector_store.delete(ids)
        self.chunk_store.delete(doc_id)
