# SPDX-License-Identifier: Apache-2.0
"""The stores of a data folder, wired from the settings: the one place that chooses them.

The registry (knowledge bases, documents; the server's keys and jobs) is ``[stores]
registry_url`` or the data folder's SQLite file; chunks are in ``[stores] postgres_url`` or that
SQLite file; vectors in ``[stores] milvus_url`` or the folder's FAISS index. The file names of a
plain folder are ``mx_rag.knowledge.local``'s (``LocalKnowledge`` opens the same layout).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mx_rag.app.settings import ServerSettings
from mx_rag.knowledge.local import FAISS_INDEX, SQL_DB
from mx_rag.knowledge.store import KnowledgeStore

__all__ = ["chunk_store", "has_registry", "open_registry", "vector_store"]


def _root(settings: ServerSettings) -> Path:
    root = settings.data_dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def has_registry(settings: ServerSettings) -> bool:
    """Whether the settings' registry may hold knowledge bases already (a URL, or the folder's file)."""
    return settings.stores.registry_url is not None or (settings.data_dir / SQL_DB).exists()


def open_registry(settings: ServerSettings) -> KnowledgeStore:
    """The registry of ``settings``: ``[stores] registry_url``, else the data folder's SQLite file.
    The server's API keys and upload jobs live in the same database."""
    url = settings.stores.registry_url
    if url is not None:
        return KnowledgeStore(url=url.get_secret_value())
    return KnowledgeStore(db_path=str(_root(settings) / SQL_DB))


def chunk_store(settings: ServerSettings) -> Any:
    """The chunk store: PostgreSQL at ``[stores] postgres_url``, else the data folder's SQLite file."""
    url = settings.stores.postgres_url
    if url is None:
        from mx_rag.storage.document_store import SQLiteDocstore

        return SQLiteDocstore(db_path=str(_root(settings) / SQL_DB))
    from mx_rag.storage.document_store import PostgresDocstore

    return PostgresDocstore(url.get_secret_value())


def vector_store(settings: ServerSettings, dimension: int) -> Any:
    """The vector store: Milvus at ``[stores] milvus_url``, else the data folder's FAISS index."""
    stores = settings.stores
    if stores.milvus_url is None:
        from mx_rag.storage.vectorstore import MindFAISS

        return MindFAISS(x_dim=dimension, load_local_index=str(_root(settings) / FAISS_INDEX))
    from pymilvus import MilvusClient

    from mx_rag.storage.vectorstore import MilvusDB

    token = "" if stores.milvus_token is None else stores.milvus_token.get_secret_value()
    client = MilvusClient(uri=stores.milvus_url, token=token)
    # no flush per write: a flush costs 1-2.5 s on a Milvus server, and new rows are searchable without one
    # HNSW for a new collection (an existing one keeps the index it was built with); "Session" searches:
    # a strong one waits for the server's next time tick, ~200 ms a question (docs/benchmarks.md)
    return MilvusDB.create(client=client, collection_name=stores.milvus_collection, x_dim=dimension,
                           metric_type="IP", auto_flush=False, index_type="HNSW", consistency_level="Session")
