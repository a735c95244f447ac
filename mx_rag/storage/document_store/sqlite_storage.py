# SPDX-License-Identifier: Apache-2.0
"""``SQLiteDocstore``: chunks in a SQLite file, full-text search with FTS5."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from mx_rag.errors import StorageError
from mx_rag.storage.document_store.chunk_rows import TextFn
from mx_rag.storage.document_store.full_text import Fts5Index
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from mx_rag.storage.engines import sqlite_engine
from mx_rag.utils.common import GB, MB
from mx_rag.utils.file_check import check_writable_parent

__all__ = ["SQLiteDocstore"]

logger = logging.getLogger(__name__)

TABLE_NAME = "chunks_table"
MIN_FREE_DISK = 200 * MB
MAX_DB_SIZE = 100 * GB


class SQLiteDocstore(_SqlDocstore):
    """Chunk store in a SQLite file (table ``chunks_table``), with FTS5 full-text search.

    The file is created with mode 0600 and opened in WAL mode; other tables (the knowledge
    registry, say) may live in the same file. One object can be shared by threads, and several
    processes may open the same file: writers take turns, readers never wait.

    Args:
        db_path: the database file; its directory must exist (a bare name such as ``"sql.db"``
            means the current directory).
        encrypt_fn: ``str -> str`` applied to chunk text before it is written. With it, no
            full-text index is kept (it would hold the plaintext).
        decrypt_fn: ``str -> str`` applied to chunk text when it is read; needs ``encrypt_fn``.
            ``encrypt_fn`` alone is allowed (with a warning): chunks then read back encrypted.

    Example:
        >>> from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
        >>> store = SQLiteDocstore(db_path="sql.db")
        >>> store.add([MxDocument(page_content="APT installs packages", document_name="apt.md")], 1)
        [1]
        >>> store.full_text_search("install packages", top_k=1)[0].page_content
        'APT installs packages'
    """

    def __init__(self, db_path: str | os.PathLike[str], encrypt_fn: TextFn | None = None,
                 decrypt_fn: TextFn | None = None) -> None:
        self._db_path = check_writable_parent("db_path", db_path)
        super().__init__(sqlite_engine(self._db_path), Fts5Index(TABLE_NAME), table_name=TABLE_NAME,
                         encrypt_fn=encrypt_fn, decrypt_fn=decrypt_fn)

    @property
    def db_path(self) -> Path:
        """The resolved path of the database file."""
        return self._db_path

    def _before_write(self, count: int) -> None:
        """Refuse to write with under 200 MiB of free disk or a database over 100 GiB."""
        free = shutil.disk_usage(self._db_path.parent).free
        if free < MIN_FREE_DISK:
            raise StorageError(
                f"only {free // MB} MiB free in {str(self._db_path.parent)!r}; {MIN_FREE_DISK // MB} MiB are needed"
            )
        size = sum(p.stat().st_size for p in (self._db_path, Path(f"{self._db_path}-wal")) if p.exists())
        if size > MAX_DB_SIZE:
            raise StorageError(f"the database {str(self._db_path)!r} is over {MAX_DB_SIZE // GB} GiB")
