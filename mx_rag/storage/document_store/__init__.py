# SPDX-License-Identifier: Apache-2.0
"""Chunk stores: the ``Docstore`` interface, ``MxDocument``, and its SQLite, PostgreSQL, openGauss
and Milvus stores (``ChunkModel`` maps the SQL stores' table).

>>> from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
>>> store = SQLiteDocstore(db_path="sql.db")

Names are imported on first use, so importing this package loads neither the database driver
nor jieba, pymilvus or psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.storage.document_store.base_storage import Docstore, MxDocument
    from mx_rag.storage.document_store.milvus_storage import MilvusDocstore
    from mx_rag.storage.document_store.models import ChunkModel
    from mx_rag.storage.document_store.opengauss_storage import OpenGaussDocstore
    from mx_rag.storage.document_store.postgres_storage import PostgresDocstore
    from mx_rag.storage.document_store.sqlite_storage import SQLiteDocstore

__all__ = [
    "ChunkModel",
    "Docstore",
    "MilvusDocstore",
    "MxDocument",
    "OpenGaussDocstore",
    "PostgresDocstore",
    "SQLiteDocstore",
]

_LAZY = {
    "ChunkModel": "mx_rag.storage.document_store.models",
    "Docstore": "mx_rag.storage.document_store.base_storage",
    "MilvusDocstore": "mx_rag.storage.document_store.milvus_storage",
    "MxDocument": "mx_rag.storage.document_store.base_storage",
    "OpenGaussDocstore": "mx_rag.storage.document_store.opengauss_storage",
    "PostgresDocstore": "mx_rag.storage.document_store.postgres_storage",
    "SQLiteDocstore": "mx_rag.storage.document_store.sqlite_storage",
}

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
