"""Scoped retrieval: the knowledge base's documents are read again only after the registry changed
(its generation row), in this process or another; the stores' shortcuts for a scope that covers
most of them (an unfiltered search filtered afterwards) return what the filtered search returns."""

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mx_rag.errors import ParameterError
from mx_rag.knowledge import KnowledgeStore
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.validation import DocumentIds, check_filter, post_filter_fetch, post_filter_first
from mx_rag.storage.vectorstore import MindFAISS
from tests.knowledge.conftest import USER, Stores, open_stores, write


def test_scoped_retriever_follows_writes_of_another_registry_connection(stores: Stores) -> None:
    kb = stores.open()
    for i in range(3):
        kb.add_file(write(stores.docs / f"a{i}.txt", "a"), [f"lockers note {i}"], stores.embed)
    scoped = kb.as_retriever(stores.embed, k=10)
    assert len(scoped.invoke("lockers note")) == 3
    other = open_stores(stores.root)  # a second set of connections to the same files, as another process has
    other_kb = other.open()
    late = other_kb.add_file(write(stores.docs / "late.txt", "late"), ["lockers note late"], other.embed)
    assert "lockers note late" in [d.page_content for d in scoped.invoke("lockers note")]
    other.knowledge_store.set_document_status(late, "deleting")  # a delete under way hides it at once
    assert "lockers note late" not in [d.page_content for d in scoped.invoke("lockers note")]
    generation = stores.knowledge_store.generation()
    scoped.invoke("lockers note")
    assert stores.knowledge_store.generation() == generation  # reads do not change it


def test_registry_of_an_earlier_version_opens_and_counts_generations(tmp_path: Path) -> None:
    old = open_stores(tmp_path)
    old.knowledge_store.add_knowledge("test", USER, "admin")
    kb = old.open()
    kb.add_file(write(old.docs / "a.txt", "a"), ["an old note about lockers"], old.embed)
    old.knowledge_store.engine.dispose()
    with sqlite3.connect(tmp_path / "sql.db") as conn:
        conn.execute("DROP TABLE registry_generation")
    store = KnowledgeStore(db_path=str(tmp_path / "sql.db"))
    assert store.generation() == 0
    reopened = open_stores(tmp_path).open()
    assert [d.page_content for d in reopened.as_retriever(old.embed, k=3).invoke("lockers")] == [
        "an old note about lockers"]
    reopened.delete_file("a.txt")
    assert store.generation() > 0
    assert reopened.as_retriever(old.embed, k=3).invoke("lockers") == []


def test_document_ids_are_checked_once_and_cannot_change() -> None:
    ids = DocumentIds([3, 1, 3])
    assert ids == [1, 3] and ids.members == {1, 3}
    assert check_filter({"document_id": ids}) is ids
    with pytest.raises(TypeError):
        ids.append(4)
    with pytest.raises(Exception, match="document_ids"):
        DocumentIds([-1])
    with pytest.raises(ParameterError, match="share"):
        DocumentIds([1], share=1.5)
    assert DocumentIds([1]).share is None and DocumentIds([1], share=1).share == 1.0
    assert not post_filter_first(DocumentIds(range(1000), share=0.49)) and not post_filter_first(list(range(1000)))
    assert post_filter_first(DocumentIds([1], share=0.5)) and post_filter_first(list(range(1001)))
    assert [post_filter_fetch(ids, 20) for ids in (DocumentIds([1], share=1), DocumentIds([1], share=0.5), [1])] == [
        36, 56, 80]


def test_a_knowledge_base_scope_knows_its_share_of_the_registry(stores: Stores) -> None:
    stores.knowledge_store.add_knowledge("other", USER, "admin")
    kb, other = stores.open(), stores.open("other")
    for i in range(3):
        kb.add_file(write(stores.docs / f"a{i}.txt", "a"), [f"lockers note {i}"], stores.embed)
    other.add_file(write(stores.docs / "b.txt", "b"), ["other lockers"], stores.embed)
    assert kb._scope_ids().share == 0.75 and other._scope_ids().share == 0.25
    assert [d.page_content for d in other.as_retriever(stores.embed, k=5).invoke("lockers")] == ["other lockers"]


@pytest.mark.parametrize("as_ids", [DocumentIds, list])
def test_faiss_filter_covering_most_vectors_equals_exact_filtered_search(as_ids: type) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3000, 16)).astype(np.float32)
    store = MindFAISS(x_dim=16, devs=[0], auto_save=False)
    store.add(list(range(3000)), vectors, document_id=[i // 10 for i in range(3000)])  # 300 documents
    queries = rng.standard_normal((8, 16)).astype(np.float32)
    unfiltered = store.search(queries, k=5)[1]
    # most documents, but not those of the best hits: the unfiltered top may not hold 5 of them
    dropped = {i // 10 for row in unfiltered for i in row[:2]}
    for keep in (range(300), [d for d in range(300) if d not in dropped]):
        docs = as_ids(keep)
        _, ids = store.search(queries, k=5, filter_dict={"document_id": docs})
        allowed = np.asarray([i for i in range(3000) if i // 10 in set(keep)])
        scores = queries @ vectors[allowed].T
        expected = [allowed[np.argsort(-row, kind="stable")[:5]].tolist() for row in scores]
        assert ids == expected


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_full_text_filter_on_many_documents_equals_filtering_every_match(
    tmp_path: Path, request: pytest.FixtureRequest, database: str
) -> None:
    if database == "sqlite":
        store: Any = SQLiteDocstore(db_path=str(tmp_path / "chunks.db"))
    else:
        from mx_rag.storage.document_store import PostgresDocstore

        table = f"scoping_{uuid.uuid4().hex[:12]}"
        store = PostgresDocstore(request.getfixturevalue("postgres_url"), table_name=table)

        def drop() -> None:
            with store.engine.begin() as conn:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
            store.close()

        request.addfinalizer(drop)
    rng = np.random.default_rng(1)
    words = [f"word{i}" for i in range(20)]
    for doc in range(60):
        store.add([MxDocument(" ".join(rng.choice(words, 6)), document_name=f"d{doc}") for _ in range(2)], doc)
    everything = store.full_text_search("word1 word2 word3", top_k=500)
    ranked_docs = list(dict.fromkeys(hit.document_id for hit in everything))
    padding = list(range(1000, 2100))  # ids of no document: the filter holds over 1,000 ids
    for keep in (list(range(60)), ranked_docs[2:], ranked_docs[15:], ranked_docs[40:]):
        expected = [h.chunk_id for h in everything if h.document_id in set(keep)][:5]
        # over 1,000 ids, or few ids said to hold at least half of the documents: both post-filter first
        for ids in (DocumentIds(keep + padding), keep + padding, DocumentIds(keep, share=0.5)):
            hits = store.full_text_search("word1 word2 word3", top_k=5, filter_dict={"document_id": ids})
            assert [h.chunk_id for h in hits] == expected


def test_call_settings_pass_document_ids_on_as_the_same_object() -> None:
    from mx_rag.retrievers.call_settings import CallSettings

    ids = DocumentIds(range(5000))
    settings = CallSettings(k=3, filter_dict={"document_id": ids})
    assert settings.search_filter == {"document_id": ids} and settings.search_filter["document_id"] is ids
    assert CallSettings(k=3, filter_dict={"document_id": [2, 1]}).search_filter == {"document_id": [1, 2]}
