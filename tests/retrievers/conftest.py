"""Retriever fixtures: the real MiniLM model, and HotpotQA paragraphs in real FAISS and SQLite.

``corpus`` is ``(items, docstore, vectors)``: item ``n`` (from 1) is document ``n``, one chunk per
context paragraph, with ``{"title": ...}`` metadata. Tests must not change it.
"""

import json
from pathlib import Path

import pytest

from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

DATA = Path(__file__).resolve().parents[1] / "data" / "multihop" / "hotpotqa_sample.json"


@pytest.fixture(scope="package")
def emb():  # type: ignore[no-untyped-def]
    from mx_rag.embedding.local import TextEmbedding

    return TextEmbedding("all-MiniLM-L6-v2")  # the embedded English default, all-MiniLM-L6-v2


@pytest.fixture(scope="package")
def corpus(tmp_path_factory: pytest.TempPathFactory, emb):  # type: ignore[no-untyped-def]
    items = json.loads(DATA.read_text())
    root = tmp_path_factory.mktemp("retriever")
    docstore = SQLiteDocstore(db_path=str(root / "sql.db"))
    vectors = MindFAISS(x_dim=384, devs=[0], load_local_index=str(root / "faiss.index"))
    for doc_id, item in enumerate(items, start=1):
        paragraphs = [(title, " ".join(sentences)) for title, sentences in item["context"]]
        ids = docstore.add([MxDocument(text, {"title": title}, document_name=item["_id"])
                            for title, text in paragraphs], doc_id)
        vectors.add(ids, emb.embed_documents([text for _, text in paragraphs]), document_id=doc_id)
    return items, docstore, vectors
