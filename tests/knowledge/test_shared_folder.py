"""Several processes on one knowledge-base folder, power loss, and replaces that fail midway."""

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import StorageError
from mx_rag.knowledge import KnowledgeDB, upload_files
from mx_rag.retrievers import Retriever
from tests.knowledge.conftest import DIM, USER, Stores, open_stores, write
from tests.knowledge.shared_writer import chunk_texts

ROOT = Path(__file__).resolve().parents[2]


def start_writer(root: Path, tag: str, count: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.knowledge.shared_writer", str(root), tag, str(count)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def run_writers(root: Path, tags: list[str], count: int) -> None:
    procs = [start_writer(root, tag, count) for tag in tags]
    for proc in procs:  # both start writing at the same moment
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "done"


@pytest.mark.slow
def test_two_writer_processes_lose_nothing_and_a_reader_process_sees_them(stores: Stores) -> None:
    reader = Retriever(vector_store=stores.vector_store, document_store=stores.chunk_store,
                       embed_func=stores.embed, k=1)  # opened before the writers, kept open
    run_writers(stores.root, ["alpha", "beta"], 6)

    kb = open_stores(stores.root).open()
    report = kb.check()
    assert report.ok, report
    assert (report.documents, report.chunks, report.vectors) == (12, 216, 216)
    for tag in ("alpha", "beta"):
        for i in range(6):
            text = chunk_texts(tag, i)[3]
            assert reader.invoke(text)[0].page_content == text, (tag, i)  # the old reader reloaded


def test_reader_reloads_only_when_the_index_file_changed(stores: Stores) -> None:
    kb = stores.open()
    other = open_stores(stores.root)  # a second process's view of the same folder
    assert other.vector_store.count() == 0
    kb.add_file(write(stores.docs / "a.txt", "a"), ["first text"], stores.embed)
    seen = other.vector_store._seen
    assert other.vector_store.count() == 1 and other.vector_store._seen != seen
    seen = other.vector_store._seen
    other.vector_store.search(np.ones((1, DIM), dtype=np.float32), k=1)
    assert other.vector_store._seen == seen  # unchanged file: no reload


def test_missing_index_file_refuses_to_open_then_drop_incomplete_repairs(stores: Stores) -> None:
    kb = stores.open()
    for i in range(3):
        kb.add_file(write(stores.docs / f"d{i}.txt", str(i)), [f"text {i} a", f"text {i} b"], stores.embed)
    for name in ("faiss.index", "faiss.index.meta.npz"):  # power loss took the index file
        (stores.root / name).unlink()

    fresh = open_stores(stores.root)
    with pytest.raises(StorageError, match=r"3 document\(s\) have chunks without vectors.*drop_incomplete=True"):
        fresh.open()
    repaired = open_stores(stores.root).open(drop_incomplete=True)
    assert repaired.get_all_documents() == [] and repaired.check().ok
    repaired.add_file(write(stores.docs / "d0.txt", "0"), ["text 0 again"], stores.embed)  # can be uploaded again
    assert repaired.check().ok and len(repaired.get_all_documents()) == 1


def _checkpoint(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.mark.parametrize("damage", ["lost", "torn"])
def test_lost_or_torn_wal_opens_consistent_and_never_reuses_ids(tmp_path: Path, damage: str) -> None:
    live = open_stores(tmp_path / "live")
    live.knowledge_store.add_knowledge("test", USER)
    kb = live.open()
    kb.add_file(write(live.docs / "a.txt", "a"), [f"kept chunk {j}" for j in range(5)], live.embed)
    _checkpoint(live.root / "sql.db")  # a.txt is in the main file; what follows only in the WAL
    for name in ("b", "c"):
        kb.add_file(write(live.docs / f"{name}.txt", name), [f"{name} chunk {j}" for j in range(7)], live.embed)
    crashed = tmp_path / "crashed"  # the folder as the power cut left it: index saved, WAL not
    shutil.copytree(live.root, crashed, ignore=shutil.ignore_patterns("*.lock"))
    wal = crashed / "sql.db-wal"
    if damage == "lost":
        wal.unlink()
    else:
        data = bytearray(wal.read_bytes())
        data[len(data) // 3:] = b"\xff" * (len(data) - len(data) // 3)  # frames after a third are torn
        wal.write_bytes(bytes(data))
    (crashed / "sql.db-shm").unlink(missing_ok=True)

    stores = open_stores(crashed)
    reopened = stores.open()  # deletes the vectors whose chunks the WAL lost
    report = reopened.check()
    assert report.ok, report
    names = {d.document_name for d in reopened.get_all_documents()}
    assert "a.txt" in names
    assert stores.vector_store.count() == stores.chunk_store.count()
    reopened.add_file(write(stores.docs / "d.txt", "d"), [f"new chunk {j}" for j in range(9)], stores.embed)
    assert reopened.check().ok and "d.txt" in {d.document_name for d in reopened.get_all_documents()}


def test_failed_forced_reupload_keeps_the_old_version(kb: KnowledgeDB, stores: Stores) -> None:
    mng = LoaderMng.with_defaults(chunk_size=200, chunk_overlap=0)
    doc = write(stores.docs / "handbook.txt", "The old handbook says the vectors live in faiss.index.")
    assert upload_files(kb, [str(doc)], mng, stores.embed) == []
    doc.write_text("The new handbook has different words entirely.", encoding="utf-8")

    def wrong_dimension(texts: list[str]) -> list[list[float]]:  # the vector store refuses these
        return [[1.0] * (DIM + 1) for _ in texts]

    assert upload_files(kb, [str(doc)], mng, wrong_dimension, force=True) == [str(doc)]
    [row] = kb.get_all_documents()
    chunks = stores.chunk_store.search_by_document_id(row.document_id)
    assert [c.page_content for c in chunks] == ["The old handbook says the vectors live in faiss.index."]
    assert kb.check().ok

    assert upload_files(kb, [str(doc)], mng, stores.embed, force=True) == []
    [new] = kb.get_all_documents()
    assert new.document_id != row.document_id
    assert [c.page_content for c in stores.chunk_store.search_by_document_id(new.document_id)] == [
        "The new handbook has different words entirely."]
    assert stores.chunk_store.search_by_document_id(row.document_id) == []
    assert kb.check().ok


def test_knowledge_retriever_never_crosses_into_another_knowledge_base(stores: Stores) -> None:
    stores.knowledge_store.add_knowledge("other", "user_two")
    mine, theirs = stores.open(), stores.open("other", "user_two")
    for kb, who in ((mine, "mine"), (theirs, "theirs")):
        for i in range(5):
            kb.add_file(write(stores.docs / f"{who}{i}.txt", who), [f"shared words about storage {i} {who}"] * 2,
                        stores.embed)
    unscoped = Retriever(vector_store=stores.vector_store, document_store=stores.chunk_store,
                         embed_func=stores.embed, k=20)
    assert any(d.page_content.endswith("theirs") for d in unscoped.invoke("shared words about storage"))
    scoped = mine.as_retriever(stores.embed, k=20)
    hits = scoped.invoke("shared words about storage")
    assert len(hits) == 10 and all(d.page_content.endswith("mine") for d in hits)
    assert scoped.invoke("shared words", k=3, filter_dict={"document_id": theirs.document_ids()}) == []
    mine.add_file(write(stores.docs / "late.txt", "late"), ["a late document about storage"], stores.embed)
    assert scoped.invoke("a late document about storage", k=1)[0].page_content == "a late document about storage"
    mine.delete_file("late.txt")
    assert all(d.page_content.endswith("mine") for d in scoped.invoke("a late document about storage", k=3))


def test_knowledge_retriever_takes_per_call_settings_sync_and_async(kb: KnowledgeDB, stores: Stores) -> None:
    import asyncio

    for i in range(3):
        kb.add_file(write(stores.docs / f"n{i}.txt", str(i)), [f"note {i} about lockers"], stores.embed)
    scoped = kb.as_retriever(stores.embed, k=3)
    assert len(scoped.invoke("note about lockers")) == 3
    assert len(scoped.invoke("note about lockers", k=1)) == 1
    assert len(asyncio.run(scoped.ainvoke("note about lockers", k=2))) == 2
