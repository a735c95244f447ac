# SPDX-License-Identifier: Apache-2.0
"""``SQLiteDocstore``: chunks in a SQLite file, full-text search with FTS5."""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event

from mx_rag.errors import StorageError
from mx_rag.storage.document_store.chunk_rows import TextFn
from mx_rag.storage.document_store.full_text import Fts5Index
from mx_rag.storage.document_store.sql_storage import WRITE, _SqlDocstore
from mx_rag.utils.common import GB, MB
from mx_rag.utils.file_check import check_writable_parent

__all__ = ["SQLiteDocstore", "create_sqlite_engine"]

logger = logging.getLogger(__name__)

TABLE_NAME = "chunks_table"
BUSY_TIMEOUT_S = 30
MIN_FREE_DISK = 200 * MB
MAX_DB_SIZE = 100 * GB


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # SQLAlchemy emits BEGIN itself (see _on_begin); the sqlite3 module must not.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable across process crashes
    finally:
        cursor.close()


def _on_begin(conn: Connection) -> None:
    # A writer takes the write lock up front (BEGIN IMMEDIATE), so a transaction that reads and
    # then writes never fails with SQLITE_BUSY when another writer got there first: it waits.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")


def create_sqlite_engine(db_path: Path) -> Engine:
    """A pooled engine on a SQLite file: WAL journal, busy timeout, foreign keys, usable from any thread.

    Connections used with the execution option ``mxrag_write=True`` begin with
    ``BEGIN IMMEDIATE``; others with a plain ``BEGIN``.
    """
    engine = create_engine(
        URL.create("sqlite", database=str(db_path)),
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
        json_serializer=functools.partial(json.dumps, ensure_ascii=False),
    )
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    return engine


def _create_private_file(path: Path) -> None:
    """Create ``path`` with mode 0600 if missing; tighten an existing file we own to 0600."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return
    except FileExistsError:
        pass
    except OSError as exc:
        raise StorageError(f"cannot create the database file {str(path)!r}: {exc}") from exc
    stat = path.stat()
    if stat.st_uid == os.getuid() and stat.st_mode & 0o077:
        path.chmod(0o600)


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
        _create_private_file(self._db_path)
        engine = create_sqlite_engine(self._db_path)
        try:
            super().__init__(engine, Fts5Index(TABLE_NAME), table_name=TABLE_NAME, encrypt_fn=encrypt_fn,
                             decrypt_fn=decrypt_fn)
        except BaseException:
            engine.dispose()
            raise

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
