# SPDX-License-Identifier: Apache-2.0
"""What only SQLiteDocstore does: the file, its permissions, sharing it, surviving kill -9."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, select, text

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from tests.storage.document_store.helpers import indexed_rows

ROOT = Path(__file__).resolve().parents[3]
WRITER = Path(__file__).with_name("sqlite_writer.py")


def test_a_bare_file_name_means_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteDocstore(db_path="sql.db")
    try:
        assert store.add([MxDocument("hello")], document_id=1) == [1]
        assert store.db_path == tmp_path / "sql.db" and (tmp_path / "sql.db").is_file()
    finally:
        store.close()


def test_the_files_are_private(tmp_path: Path) -> None:
    store = SQLiteDocstore(db_path=tmp_path / "sql.db")
    try:
        store.add([MxDocument("secret")], document_id=1)
        for name in ("sql.db", "sql.db-wal", "sql.db-shm"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    finally:
        store.close()
    loose = tmp_path / "loose.db"
    loose.touch(mode=0o644)
    loose.chmod(0o644)
    SQLiteDocstore(db_path=loose).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600


def test_wal_mode_and_pragmas(tmp_path: Path) -> None:
    store = SQLiteDocstore(db_path=tmp_path / "sql.db")
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    finally:
        store.close()


@pytest.mark.parametrize(
    ("path", "match"),
    [("", "db_path"), ("missing/dir/sql.db", "parent directory"), (".", "names a directory"), (3, "db_path")],
)
def test_bad_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: object, match: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParameterError, match=match):
        SQLiteDocstore(db_path=path)  # type: ignore[arg-type]


def test_the_file_is_shared_with_other_tables_and_stores(tmp_path: Path) -> None:
    db = tmp_path / "sql.db"
    first = SQLiteDocstore(db_path=db)
    registry = Table("knowledge_table", MetaData(), Column("id", Integer, primary_key=True), Column("name", String))
    engine = create_engine(f"sqlite:///{db}")
    registry.metadata.create_all(engine)
    second = SQLiteDocstore(db_path=db)
    try:
        with engine.begin() as conn:
            conn.execute(insert(registry), [{"name": "kb"}])
        a = first.add([MxDocument("from the first store")], document_id=1)
        b = second.add([MxDocument("from the second store")], document_id=2)
        assert a != b and first.count() == second.count() == 2
        assert second.search(a[0]).page_content == "from the first store"  # type: ignore[union-attr]
        assert [d.chunk_id for d in first.full_text_search("second")] == b
        with engine.connect() as conn:
            assert conn.execute(select(registry.c.name)).scalars().all() == ["kb"]
            tables = conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'")).scalars().all()
        assert {"chunks_table", "chunks_table_fts", "knowledge_table"} <= set(tables)
    finally:
        first.close()
        second.close()
        engine.dispose()


def test_chunks_written_without_an_index_are_indexed_on_open(tmp_path: Path) -> None:
    """A database from an older writer (no FTS table) gets its chunks indexed once, on open."""
    db = tmp_path / "sql.db"
    store = SQLiteDocstore(db_path=db)
    ids = store.add([MxDocument("virtual consoles"), MxDocument("控制台切换")], document_id=1)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE chunks_table_fts")
    store.close()
    reopened = SQLiteDocstore(db_path=db)
    try:
        assert indexed_rows(reopened) == 2
        assert [d.chunk_id for d in reopened.full_text_search("控制台")] == [ids[1]]
    finally:
        reopened.close()


def test_full_text_search_unavailable_without_index_is_an_error(tmp_path: Path) -> None:
    store = SQLiteDocstore(db_path=tmp_path / "sql.db")
    try:
        store._full_text.available = False  # as on a SQLite built without FTS5
        store.add([MxDocument("words")], document_id=1)
        with pytest.raises(StorageError, match="FTS5"):
            store.full_text_search("words")
    finally:
        store.close()


@pytest.mark.parametrize(("mode", "expected"), [("mid", 1), ("done", 3001)])
def test_kill_9_leaves_the_state_before_or_after_an_add(tmp_path: Path, mode: str, expected: int) -> None:
    db = tmp_path / "sql.db"
    store = SQLiteDocstore(db_path=db)
    store.add([MxDocument("before")], document_id=1)
    store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(db), mode], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == mode.upper()
        if mode == "mid":
            assert Path(f"{db}-wal").stat().st_size > 1_000_000  # uncommitted pages did reach the disk
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    with closing(sqlite3.connect(db)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    reopened = SQLiteDocstore(db_path=db)
    try:
        assert reopened.count() == expected == indexed_rows(reopened)
        assert reopened.get_all_document_id() == ([1] if expected == 1 else [1, 2])
        reopened.add([MxDocument("after")], document_id=3)
        assert reopened.count() == expected + 1
    finally:
        reopened.close()
