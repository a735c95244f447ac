# SPDX-License-Identifier: Apache-2.0
"""A knowledge base in one local folder with the embedded defaults (SQLite, FAISS, multilingual-e5-small).

This is what ``mxrag ask`` and ``mxrag ingest`` use; it is also the shortest way to start in
Python::

    from mx_rag.knowledge.local import LocalKnowledge
    kb = LocalKnowledge.open(".mxrag", white_paths=["docs"])
    kb.sync(["docs/guide.md"])
    docs = kb.retriever().invoke("How do I install it?")  # dense + keyword, 5 chunks
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.knowledge.ingest import FileEvent, IngestReport, ingest_files, prune_documents
from mx_rag.knowledge.knowledge import KnowledgeDB
from mx_rag.knowledge.retriever import KnowledgeRetriever
from mx_rag.knowledge.store import KnowledgeStore, choose_embedding, recorded_int8

__all__ = ["FAISS_INDEX", "SQL_DB", "LocalKnowledge", "folder_stores"]

logger = logging.getLogger(__name__)

DEFAULT_USER = "Default"
SQL_DB = "sql.db"  # a data folder's registry and chunks (mx_rag.app.workspace wires the same layout)
FAISS_INDEX = "faiss.index"  # its vectors


def folder_stores(root: str | Path, dimension: int) -> tuple[Any, Any]:
    """The chunk store and the vector store of a plain data folder: ``(SQLiteDocstore, MindFAISS)``."""
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS

    root = Path(root)
    return (SQLiteDocstore(db_path=str(root / SQL_DB)),
            MindFAISS(x_dim=dimension, devs=[0], load_local_index=str(root / FAISS_INDEX)))


@dataclass
class LocalKnowledge:
    """A ``KnowledgeDB`` over a data folder's ``SQL_DB`` and ``FAISS_INDEX``, with its embedder."""

    knowledge: KnowledgeDB
    embedding: Any
    loader_mng: Any

    @classmethod
    def open(
        cls,
        workdir: str | Path,
        *,
        white_paths: Sequence[str | Path],
        knowledge_name: str = "default",
        embedding_model: str | None = None,
        chunk_size: int = 750,
        chunk_overlap: int = 150,
        drop_incomplete: bool = False,
        int8: bool | None = None,
    ) -> LocalKnowledge:
        """Open (or create) the knowledge base in ``workdir``; ``embedding_model`` is a path or
        a built-in name (default: the model the folder's knowledge bases were built with, else
        multilingual-e5-small: ``choose_embedding``). ``int8`` as in ``TextEmbedding``; default:
        the variant the folder's vectors of that model were built with, else the library's. A
        knowledge base opened with the other variant raises ``KnowledgeError`` (nothing is mixed).
        ``drop_incomplete`` as in ``KnowledgeDB``."""
        from mx_rag.document import LoaderMng
        from mx_rag.embedding.local import TextEmbedding

        root = Path(workdir)
        root.mkdir(parents=True, exist_ok=True)
        registry = KnowledgeStore(db_path=str(root / SQL_DB))
        recorded = registry.embedding_models()
        model = choose_embedding(embedding_model, recorded)
        embedding = TextEmbedding(model, int8=recorded_int8(model, recorded) if int8 is None else int8)
        registry.add_knowledge(knowledge_name, DEFAULT_USER, "admin")
        registry.check_embedding(knowledge_name, DEFAULT_USER, embedding.embedding_id, embedding.dimension)
        chunks, vectors = folder_stores(root, embedding.dimension)
        knowledge = KnowledgeDB(
            knowledge_store=registry,
            chunk_store=chunks,
            vector_store=vectors,
            knowledge_name=knowledge_name,
            white_paths=[str(p) for p in white_paths],
            user_id=DEFAULT_USER,
            drop_incomplete=drop_incomplete,
        )
        return cls(knowledge, embedding, LoaderMng.with_defaults(chunk_size=chunk_size, chunk_overlap=chunk_overlap))

    def sync(
        self,
        files: Sequence[str | Path],
        *,
        progress: Callable[[FileEvent], None] | None = None,
        stop: Any = None,
    ) -> IngestReport:
        """Add new files, replace changed ones (by content hash), skip unchanged ones.

        ``progress`` and ``stop`` as in ``ingest_files`` (a ``FileEvent`` per file; a
        ``threading.Event`` that ends the run between batches, keeping what was stored)."""
        return ingest_files(
            self.knowledge, [str(f) for f in files], self.loader_mng, self.embedding.embed_documents, force=True,
            progress=progress, stop=stop,
        )

    def prune(self, roots: Sequence[str | Path], keep: Sequence[str | Path]) -> list[str]:
        """Delete the documents under ``roots`` whose files are not in ``keep`` (see ``prune_documents``)."""
        return prune_documents(self.knowledge, roots, keep)

    def retriever(self, k: int = 5, score_threshold: float | None = None) -> KnowledgeRetriever:
        """The default retrieval, a ``HybridRetriever`` with its measured defaults, restricted to this
        knowledge base's documents (as they are at each call); ``score_threshold`` applies to its
        dense side."""
        from mx_rag.retrievers import HybridRetriever

        knowledge = self.knowledge
        hybrid = HybridRetriever(vector_store=knowledge.vector_store, document_store=knowledge.chunk_store,
                                 embed_func=self.embedding.embed_documents, k=k, score_threshold=score_threshold)
        return knowledge.scoped(hybrid, k=k)
