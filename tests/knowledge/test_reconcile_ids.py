# SPDX-License-Identifier: Apache-2.0
"""Opening a knowledge base compares chunk ids with vector ids, also when the two stores hold as
many chunks as vectors. On Milvus, where listing every id scans the collection, equal counts are
checked by the highest chunk id first (one bounded query); a lost SQLite WAL whose lost commits
replaced a document with one of as many chunks must still be found there."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from mx_rag.errors import StorageError
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MilvusDB
from mx_rag.testing import HashEmbedding
from tests.knowledge.conftest import DIM, USER, write

pytest.importorskip("milvus_lite")


def _open(root: Path, vectors: MilvusDB, **kwargs: object) -> KnowledgeDB:
    db = str(root / "sql.db")
    return KnowledgeDB(knowledge_store=KnowledgeStore(db_path=db), chunk_store=SQLiteDocstore(db_path=db),
                       vector_store=vectors, knowledge_name="test", white_paths=[str(root / "docs")],
                       user_id=USER, **kwargs)  # type: ignore[arg-type]


def test_a_lost_wal_with_equal_counts_on_milvus_is_repaired(tmp_path: Path) -> None:
    from pymilvus import MilvusClient

    client = MilvusClient(str(tmp_path / "milvus.db"))
    vectors = MilvusDB.create(client=client, collection_name="kb", x_dim=DIM, metric_type="IP", index_type="FLAT")
    embed = HashEmbedding(DIM).embed_documents
    live = tmp_path / "live"
    (live / "docs").mkdir(parents=True)
    KnowledgeStore(db_path=str(live / "sql.db")).add_knowledge("test", USER)
    kb = _open(live, vectors)
    kb.add_file(write(live / "docs" / "a.txt", "a"), [f"a chunk {j}" for j in range(3)], embed)
    with sqlite3.connect(live / "sql.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a.txt on disk; what follows only in the WAL
    kb.delete_file(str(live / "docs" / "a.txt"))
    kb.add_file(write(live / "docs" / "b.txt", "b"), [f"b chunk {j}" for j in range(3)], embed)
    crashed = tmp_path / "crashed"  # the WAL lost: a.txt's chunks without vectors, b.txt's vectors alone
    shutil.copytree(live, crashed, ignore=shutil.ignore_patterns("*.lock", "sql.db-wal", "sql.db-shm"))
    assert vectors.count() == SQLiteDocstore(db_path=str(crashed / "sql.db")).count() == 3

    with pytest.raises(StorageError, match="drop_incomplete"):
        _open(crashed, vectors)
    assert vectors.count() == 0  # b.txt's vectors, whose chunks the WAL lost, are deleted
    reopened = _open(crashed, vectors, drop_incomplete=True)
    assert reopened.check().ok and reopened.get_all_documents() == []
    reopened.add_file(write(crashed / "docs" / "c.txt", "c"), [f"c chunk {j}" for j in range(3)], embed)
    assert reopened.check().ok and vectors.count() == 3
    client.close()
