# SPDX-License-Identifier: Apache-2.0
"""A knowledge registry in PostgreSQL (``KnowledgeStore(url=...)``), shared by processes on any
machine, and the advisory lock its writers take turns through. Real PostgreSQL (``make test``
starts one), each test in a fresh schema."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError, StorageError
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore, upload_files
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding
from mx_rag.utils.process_lock import AdvisoryLock
from tests.knowledge.conftest import DIM, USER, write

ROOT = Path(__file__).resolve().parents[2]
HOLD_SCRIPT = """
import sys, time
from sqlalchemy import create_engine
from mx_rag.utils.process_lock import AdvisoryLock
lock = AdvisoryLock(create_engine(sys.argv[1]), sys.argv[2])
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_the_registry_needs_exactly_one_place() -> None:
    with pytest.raises(ParameterError, match="one of db_path"):
        KnowledgeStore()
    with pytest.raises(ParameterError, match="one of db_path"):
        KnowledgeStore(db_path="x.db", url="postgresql://u@h/d")
    with pytest.raises(ParameterError, match=r"url must be a SQLAlchemy URL.*got the backend 'mysql'") as refused:
        KnowledgeStore(url="mysql://u:secret@h/d")
    assert "secret" not in str(refused.value)
    with pytest.raises(ParameterError, match="url must be a SQLAlchemy URL"):
        KnowledgeStore(url="not a url")


def test_knowledge_db_over_a_postgres_registry(postgres_schema_url: str, tmp_path: Path) -> None:
    registry = KnowledgeStore(url=postgres_schema_url)
    assert "postgres" in repr(registry.location) and "mxrag:mxrag@" not in registry.location  # no password shown
    assert registry.add_knowledge("manuals", USER, "admin") == 1
    assert registry.add_knowledge("manuals", USER, "admin") == 1  # again: the same knowledge base
    assert KnowledgeStore(url=postgres_schema_url).add_knowledge("other", USER, "admin") == 2  # a second process
    docs = tmp_path / "docs"
    docs.mkdir()
    chunks = SQLiteDocstore(db_path=str(tmp_path / "chunks.db"))
    vectors = MindFAISS(x_dim=DIM, devs=[0], load_local_index=str(tmp_path / "faiss.index"))
    kb = KnowledgeDB(knowledge_store=registry, chunk_store=chunks, vector_store=vectors, knowledge_name="manuals",
                     white_paths=[str(docs)], user_id=USER)
    embed = HashEmbedding(DIM).embed_documents
    doc = write(docs / "a.txt", "The blue valve opens the cooling loop.")
    assert upload_files(kb, [str(doc)], LoaderMng.with_defaults(), embed) == []
    assert [d.document_name for d in kb.get_all_documents()] == ["a.txt"]
    found = Retriever(vector_store=vectors, document_store=chunks, embed_func=embed, k=1).invoke(
        "The blue valve opens the cooling loop.")
    assert "blue valve" in found[0].page_content
    report = kb.check()
    assert report.ok and report.documents == 1 and report.chunks == report.vectors >= 1
    kb.delete_file(str(docs / "a.txt"))
    assert kb.get_all_documents() == [] and vectors.count() == 0


def test_concurrent_creates_get_distinct_ids(postgres_schema_url: str) -> None:
    stores = [KnowledgeStore(url=postgres_schema_url) for _ in range(4)]
    ids: list[int] = []
    threads = [threading.Thread(target=lambda s=s, n=n: ids.append(s.add_knowledge(f"kb{n}", USER, "admin")))
               for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(ids) == [1, 2, 3, 4]


def test_advisory_lock_excludes_is_reentrant_and_dies_with_its_holder(postgres_schema_url: str) -> None:
    engine = create_engine(postgres_schema_url)
    first, second = AdvisoryLock(engine, "registry"), AdvisoryLock(engine, "registry", timeout=0.5)
    with first, first:  # re-entrant
        started = time.monotonic()
        with pytest.raises(StorageError, match="held the lock 'registry'"):
            second.acquire()  # another session waits, here up to its timeout
        assert time.monotonic() - started >= 0.4
    with second:  # free again once the holder gave it back
        pass
    holder = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, postgres_schema_url, "registry"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StorageError):
            second.acquire()
        holder.kill()  # kill -9: PostgreSQL ends its session and gives the lock back
        holder.wait(30)
        waiting = AdvisoryLock(engine, "registry", timeout=30)
        with waiting:
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
        engine.dispose()
