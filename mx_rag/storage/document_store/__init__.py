# SPDX-License-Identifier: Apache-2.0
"""Chunk stores: the ``Docstore`` interface, ``MxDocument``, and its SQLite and PostgreSQL stores.

>>> from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
>>> store = SQLiteDocstore(db_path="sql.db")

Names are imported on first use, so importing this package loads neither the database driver
nor jieba.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mx_rag.storage.document_store.base_storage import Docstore, MxDocument
    from mx_rag.storage.document_store.postgres_storage import PostgresDocstore
    from mx_rag.storage.document_store.sqlite_storage import SQLiteDocstore

__all__ = ["Docstore", "MxDocument", "PostgresDocstore", "SQLiteDocstore"]

_MODULES = {
    "Docstore": "base_storage",
    "MxDocument": "base_storage",
    "PostgresDocstore": "postgres_storage",
    "SQLiteDocstore": "sqlite_storage",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
