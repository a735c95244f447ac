# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeDB``: one knowledge base over a registry, a chunk store and a vector store.

Adding a document is transactional across the three stores. The registry row is written first
with status ``pending``; then the chunks (one transaction), then the vectors (one atomic save),
then the row becomes ``ready``. Deleting marks the row ``deleting``, removes vectors, then chunks,
then the row. A failure undoes what was written; after a crash (kill -9), opening the knowledge
base finishes or undoes whatever was left ``pending`` or ``deleting``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.knowledge.models import DELETING, PENDING, READY, DocumentModel
from mx_rag.knowledge.store import KnowledgeStore, check_user_id
from mx_rag.storage.document_store.base_storage import Docstore, MxDocument
from mx_rag.storage.vectorstore.vectorstore import VectorStore, as_matrix
from mx_rag.utils.checks import check_instance, check_int, check_str, fail
from mx_rag.utils.file_check import check_dir, check_inside, check_path

__all__ = ["KnowledgeDB", "KnowledgeStore"]

logger = logging.getLogger(__name__)

MAX_FILE_COUNT = 8000
MAX_TEXTS = 1_000_000
EmbedFunc = Callable[[list[str]], Any]


@dataclass
class PreparedFile:
    """A parsed and embedded document, ready for ``KnowledgeDB.add_prepared``."""

    path: Path
    texts: list[str]
    metadatas: list[dict[str, Any]]
    dense: Any  # (n, dim) float32 matrix, or None
    sparse: list[dict[int, float]] | None
    content_hash: str | None = None


@dataclass(frozen=True)
class ConsistencyReport:
    """What ``KnowledgeDB.check`` found; ``ok`` when the three stores agree."""

    documents: int
    chunks: int
    vectors: int
    unfinished_documents: list[int]
    documents_without_chunks: list[int]
    chunks_without_vectors: list[int]

    @property
    def ok(self) -> bool:
        return not (self.unfinished_documents or self.documents_without_chunks or self.chunks_without_vectors)


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
        lock: optional lock (threading or multiprocessing) held around writes; one is created
            when None.

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
        self._lock: AbstractContextManager[Any] = lock if lock is not None else threading.RLock()
        self.knowledge_id = self.knowledge_store.get_knowledge_id(knowledge_name, user_id)
        self.repair()

    # -- paths -----------------------------------------------------------------------------------

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
        """Add one document's chunks; return its ``document_id``. All or nothing."""
        path = self.check_file_path(file)
        texts = _check_texts(texts)
        metadatas = _check_metadatas(metadatas, len(texts))
        dense, sparse = embed_texts(embed_func, texts)
        return self.add_prepared([PreparedFile(path, texts, list(metadatas), dense, sparse)])[0]

    def add_prepared(self, files: Sequence[PreparedFile]) -> list[int]:
        """Add several embedded documents at once; return their ids. All of them or none.

        Each document gets its registry row and its chunk transaction; the vectors of all of them
        go to the vector store in one call (one index save).
        """
        with self._lock:
            doc_ids: list[int] = []
            chunk_ids: dict[int, list[int]] = {}
            try:
                for item in files:
                    doc_id = self.knowledge_store.add_doc_info(
                        self.knowledge_name,
                        item.path.name,
                        str(item.path),
                        self.user_id,
                        status=PENDING,
                        content_hash=item.content_hash,
                    )
                    doc_ids.append(doc_id)
                    documents = [
                        MxDocument(t, dict(m), document_name=item.path.name)
                        for t, m in zip(item.texts, item.metadatas, strict=True)
                    ]
                    chunk_ids[doc_id] = self.chunk_store.add(documents, doc_id)
                self._add_vectors(files, doc_ids, chunk_ids)
                self.knowledge_store.set_document_status(doc_ids, READY)
            except BaseException:
                for doc_id in doc_ids:
                    self._undo_add(doc_id, chunk_ids.get(doc_id, []))
                raise
        return doc_ids

    def delete_file(self, doc_name: str) -> int | None:
        """Delete a document by full path (or file name when unambiguous); return its id."""
        with self._lock:
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
        return [row.document_id for row in self.get_all_documents()]

    # -- consistency -----------------------------------------------------------------------------

    def repair(self) -> list[int]:
        """Finish or undo adds and deletes that a crash interrupted; return the document ids."""
        with self._lock:
            rows = self.knowledge_store.unfinished_documents(self.knowledge_name, self.user_id)
            for row in rows:
                logger.warning("repairing document %d left %s by an interrupted run", row.document_id, row.status)
                self._finish_delete(row.document_id)
            return [row.document_id for row in rows]

    def check(self) -> ConsistencyReport:
        """Compare the three stores for this knowledge base (reads every chunk id: O(chunks))."""
        with self._lock:
            docs = [row.document_id for row in self.get_all_documents()]
            unfinished = [
                row.document_id for row in self.knowledge_store.unfinished_documents(self.knowledge_name, self.user_id)
            ]
            chunk_ids = {d: self._chunk_ids(d) for d in docs}
            vector_ids = set(self.vector_store.get_all_ids())
            all_chunks = sorted(i for ids in chunk_ids.values() for i in ids)
            return ConsistencyReport(
                documents=len(docs),
                chunks=len(all_chunks),
                vectors=len(vector_ids),
                unfinished_documents=unfinished,
                documents_without_chunks=[d for d, ids in chunk_ids.items() if not ids],
                chunks_without_vectors=[i for i in all_chunks if i not in vector_ids],
            )

    # -- internals -------------------------------------------------------------------------------

    def _require_admin(self) -> None:
        roles = self.knowledge_store.get_all_usr_role_by_knowledge(self.knowledge_name)
        if roles.get(self.user_id) != "admin":
            raise KnowledgeError(f"{self.user_id!r} is not an admin of knowledge base {self.knowledge_name!r}")

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
        ids = sorted(set(chunk_ids or []) | set(self._chunk_ids(doc_id)))
        if ids:
            self.vector_store.delete(ids)
        self.chunk_store.delete(doc_id)
        self.knowledge_store.remove_document(doc_id)


def _check_texts(texts: Any) -> list[str]:
    if not isinstance(texts, (list, tuple)) or not 1 <= len(texts) <= MAX_TEXTS:
        raise fail("texts", texts, f"a list of 1 to {MAX_TEXTS} strings")
    for i, text in enumerate(texts):
        check_str(f"texts[{i}]", text, 1, 128 * 1024 * 1024)
    return list(texts)


def _check_metadatas(metadatas: Any, count: int) -> list[dict[str, Any]]:
    if metadatas is None:
        return [{} for _ in range(count)]
    if not isinstance(metadatas, (list, tuple)) or len(metadatas) != count:
        raise fail("metadatas", metadatas, f"None or a list of {count} dicts (one per text)")
    if not all(isinstance(m, dict) for m in metadatas):
        raise fail("metadatas", metadatas, "a list of dicts")
    return list(metadatas)


def embed_texts(embed_func: Any, texts: list[str]) -> tuple[Any, Any]:
    """Dense and sparse embeddings of ``texts`` (each None when that embedder is not given)."""
    funcs = embed_func if isinstance(embed_func, dict) else {"dense": embed_func, "sparse": None}
    if set(funcs) - {"dense", "sparse"} or not any(funcs.values()):
        raise fail("embed_func", embed_func, "a callable or a dict {'dense': f, 'sparse': g} with at least one set")
    dense = sparse = None
    if funcs.get("dense") is not None:
        if not callable(funcs["dense"]):
            raise fail("embed_func['dense']", funcs["dense"], "a callable")
        dense = as_matrix("dense embeddings", funcs["dense"](texts))
        if dense.shape[0] != len(texts):
            raise ParameterError(f"embed_func returned {dense.shape[0]} vectors for {len(texts)} texts")
    if funcs.get("sparse") is not None:
        if not callable(funcs["sparse"]):
            raise fail("embed_func['sparse']", funcs["sparse"], "a callable")
        sparse = list(funcs["sparse"](texts))
        if len(sparse) != len(texts) or not all(isinstance(s, dict) for s in sparse):
            raise ParameterError(f"sparse embed_func must return {len(texts)} dicts, one per text")
    return dense, sparse
