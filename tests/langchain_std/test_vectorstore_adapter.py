"""``LangChainVectorStore`` beyond LangChain's suite: shared stores, reopening, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.storage.vectorstore.langchain import LangChainVectorStore, document_id_of
from mx_rag.testing import HashEmbedding

TEXTS = ["Debian keeps the hostname in /etc/hostname.", "Mount points are listed in /etc/fstab.",
         "APT installs packages and their dependencies."]


def open_store(root: Path) -> LangChainVectorStore:
    return LangChainVectorStore(MindFAISS(x_dim=64, devs=[0], load_local_index=str(root / "faiss.index")),
                                SQLiteDocstore(db_path=str(root / "sql.db")), HashEmbedding(64))


def test_documents_survive_reopening_and_serve_a_retriever(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ids = store.add_texts(TEXTS, [{"n": n} for n in range(3)], ids=["host", "fstab", "apt"])
    assert ids == ["host", "fstab", "apt"]
    store.vector_store.save_local()  # type: ignore[attr-defined]
    again = open_store(tmp_path)
    assert [d.id for d in again.get_by_ids(["apt", "missing", "host"])] == ["apt", "host"]
    found = again.as_retriever(search_kwargs={"k": 1}).invoke("Which file holds the hostname?")
    assert found == [Document(TEXTS[0], metadata={"n": 0}, id="host")]
    scored = again.similarity_search_with_relevance_scores("hostname file", k=3)
    assert scored[0][0].id == "host" and all(s <= 1.0 for _, s in scored)


def test_a_shared_docstore_keeps_other_documents(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.document_store.add([MxDocument("a chunk of document 7")], 7)
    store.add_texts(["mine"], ids=["x"])
    store.delete(["x", "never-added"])
    assert store.document_store.search_by_document_id(7)[0].page_content == "a chunk of document 7"
    assert store.document_store.search_by_document_id(document_id_of("x")) == []
    assert store.vector_store.count() == 0


def test_refusals(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    with pytest.raises(ParameterError, match="needs the ids"):
        store.delete()
    with pytest.raises(ParameterError, match="filter"):
        store.similarity_search("q", filter={"n": 1})
    with pytest.raises(ParameterError, match="repeat"):
        store.add_texts(["a", "b"], ids=["same", "same"])
    with pytest.raises(ParameterError, match="one entry per text"):
        store.add_texts(["a", "b"], [{}])
    with pytest.raises(ParameterError, match="vector_store= and document_store="):
        LangChainVectorStore.from_texts(["a"], HashEmbedding(64))
    assert store.add_texts([]) == [] and store.vector_store.count() == 0
