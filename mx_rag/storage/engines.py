# SPDX-License-Identifier: Apache-2.0
"""The SQLAlchemy engines of the chunk store, the graph store and the knowledge registry.

PostgreSQL: one URL check, one driver default (psycopg 3), one message that never shows a password.
SQLite: one factory, so the chunk store and the knowledge registry opening the same ``sql.db`` set
the same pragmas (WAL, 30 s busy timeout, foreign keys, ``synchronous=FULL``) and file mode (0600).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Final

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from mx_rag.errors import ExtraNotInstalledError, ParameterError, StorageError
from mx_rag.utils.checks import fail

__all__ = ["BUSY_TIMEOUT_S", "URL_HINT", "WRITE", "postgres_engine", "sqlite_engine"]

URL_HINT = "a SQLAlchemy URL such as postgresql+psycopg://user:password@host:5432/dbname, or an Engine"
WRITE: Final = "mxrag_write"  # execution option: this connection writes (SQLite: BEGIN IMMEDIATE)
BUSY_TIMEOUT_S = 30
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",  # readers never wait for the writer
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}",  # a writer waits for another one instead of failing
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=FULL",  # with WAL: every commit survives a power loss, one fsync per commit
)
_json_dumps = functools.partial(json.dumps, ensure_ascii=False)


def postgres_engine(url_or_engine: Any, name: str = "url_or_engine") -> tuple[Engine, bool]:
    """The engine for ``url_or_engine`` (a PostgreSQL URL or ``Engine``; connections checked
    before use) and whether the caller owns it (made here) or not (given). ``name`` is the
    parameter named in errors."""
    if isinstance(url_or_engine, Engine):
        if url_or_engine.dialect.name != "postgresql":
            raise fail(name, url_or_engine, "an Engine on PostgreSQL")
        return url_or_engine, False
    if not isinstance(url_or_engine, (str, URL)):
        raise fail(name, url_or_engine, URL_HINT)
    try:
        url = make_url(url_or_engine)
    except (ArgumentError, ValueError):
        raise ParameterError(f"{name} must be {URL_HINT}") from None  # the text may hold a password
    if url.get_backend_name() != "postgresql":
        raise ParameterError(f"{name} must be {URL_HINT}; got the backend {url.get_backend_name()!r}")
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    try:
        engine = create_engine(url, pool_pre_ping=True, json_serializer=_json_dumps)
    except (ImportError, NoSuchModuleError) as exc:
        raise ExtraNotInstalledError(url.get_driver_name(), "postgres") from exc
    return engine, True


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


def _pragmas(explicit_begin: bool) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        if explicit_begin:  # SQLAlchemy emits BEGIN itself (see _on_begin); the sqlite3 module must not
            dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in _PRAGMAS:
                cursor.execute(pragma)
        finally:
            cursor.close()

    return on_connect


def _on_begin(conn: Connection) -> None:
    # A writer takes the write lock up front (BEGIN IMMEDIATE), so a transaction that reads and
    # then writes never fails with SQLITE_BUSY when another writer got there first: it waits.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")


def sqlite_engine(db_path: Path, *, explicit_begin: bool = True) -> Engine:
    """A pooled engine on the SQLite file ``db_path`` (created with mode 0600; an existing file of
    ours is tightened to 0600), usable from any thread, every connection with the pragmas above.

    ``explicit_begin`` (the chunk stores): every transaction begins at once, ``BEGIN IMMEDIATE``
    on a connection with the execution option ``mxrag_write=True`` and ``BEGIN`` otherwise, so
    the reads of one transaction see one snapshot. Without it (the knowledge registry, whose ORM
    sessions read and then write without saying which they will do), the sqlite3 module begins a
    transaction at its first write statement, which then waits for the write lock (busy timeout)
    instead of failing on a snapshot another writer made stale.
    """
    _create_private_file(db_path)
    engine = create_engine(
        URL.create("sqlite", database=str(db_path)),
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
        json_serializer=_json_dumps,
    )
    event.listen(engine, "connect", _pragmas(explicit_begin))
    if explicit_begin:
        event.listen(engine, "begin", _on_begin)
    return engine
