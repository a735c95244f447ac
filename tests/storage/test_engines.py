# SPDX-License-Identifier: Apache-2.0
"""The one SQLite engine factory (mx_rag.storage.engines.sqlite_engine): the chunk store and the
knowledge registry opening the same sql.db agree on its pragmas and its mode."""

from __future__ import annotations

import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from mx_rag.knowledge.store import KnowledgeStore
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.engines import BUSY_TIMEOUT_S, WRITE, sqlite_engine

PRAGMAS = {"journal_mode": "wal", "busy_timeout": BUSY_TIMEOUT_S * 1000, "foreign_keys": 1, "synchronous": 2}


def _pragmas(engine: Engine) -> dict[str, object]:
    with engine.connect() as conn:
        return {name: conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in PRAGMAS}


def test_the_chunk_store_and_the_registry_set_the_same_pragmas_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "sql.db"
    docstore = SQLiteDocstore(db_path=db)
    registry = KnowledgeStore(db_path=str(db))
    try:
        assert _pragmas(docstore.engine) == PRAGMAS
        assert _pragmas(registry.engine) == PRAGMAS
    finally:
        docstore.close()
        registry.engine.dispose()


@pytest.mark.parametrize("explicit_begin", [True, False])
def test_the_file_is_created_private_and_an_existing_one_tightened(tmp_path: Path, explicit_begin: bool) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    old.touch(mode=0o644)
    old.chmod(0o644)
    for path in (new, old):
        engine = sqlite_engine(path, explicit_begin=explicit_begin)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        engine.dispose()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("explicit_begin", [True, False])
def test_connections_work_from_other_threads(tmp_path: Path, explicit_begin: bool) -> None:
    engine = sqlite_engine(tmp_path / "sql.db", explicit_begin=explicit_begin)
    conn = engine.connect()
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(conn.execute(text("SELECT 41 + 1")).scalar()))
    thread.start()
    thread.join()
    conn.close()
    engine.dispose()
    assert results == [42]


def _read_then_write_after_another_commit(reader: Engine, writer: Engine) -> list[int]:
    with reader.connect() as conn:
        transaction = conn.begin()
        assert conn.execute(text("SELECT count(*) FROM t")).scalar() == 0
        with writer.connect().execution_options(**{WRITE: True}) as other, other.begin():
            other.execute(text("INSERT INTO t VALUES (1)"))
        conn.execute(text("INSERT INTO t VALUES (2)"))
        transaction.commit()
    with writer.connect() as conn:
        return list(conn.execute(text("SELECT x FROM t ORDER BY x")).scalars())


def test_explicit_begin_gives_reads_a_snapshot_and_lazy_begin_never_writes_on_a_stale_one(tmp_path: Path) -> None:
    """A chunk store reads in one snapshot (so it must say when it writes: ``mxrag_write``); the
    registry's ORM sessions read and then write, so their transaction begins at the first write."""
    db = tmp_path / "sql.db"
    explicit, lazy = sqlite_engine(db), sqlite_engine(db, explicit_begin=False)
    try:
        with explicit.begin() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        assert _read_then_write_after_another_commit(lazy, explicit) == [1, 2]
        with explicit.begin() as conn:
            conn.execute(text("DELETE FROM t"))
        with pytest.raises(OperationalError, match="locked"):  # SQLITE_BUSY_SNAPSHOT: no waiting helps
            _read_then_write_after_another_commit(explicit, lazy)
    finally:
        explicit.dispose()
        lazy.dispose()


@pytest.mark.parametrize("write", [True, False])
def test_a_write_connection_takes_the_write_lock_at_begin(tmp_path: Path, write: bool) -> None:
    db = tmp_path / "sql.db"
    engine = sqlite_engine(db)
    other = sqlite3.connect(db, timeout=0.05, isolation_level=None)
    try:
        with engine.connect().execution_options(**{WRITE: write}) as conn, conn.begin():
            conn.execute(text("SELECT 1"))
            if write:  # BEGIN IMMEDIATE: nobody else may start writing
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
            else:  # BEGIN: a reader holds no lock
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
    finally:
        other.close()
        engine.dispose()
