"""Retriever over real FAISS, SQLite and the real MiniLM model on HotpotQA paragraphs."""

import copy

import pytest

from mx_rag.errors import ParameterError
from mx_rag.retrievers import Retriever
from tests.storage.document_store.helpers import recorded_selects


def retriever(corpus, emb, **kwargs):  # type: ignore[no-untyped-def]
    _, docstore, vectors = corpus
    settings = {"vector_store": vectors, "document_store": docstore, "embed_func": emb.embed_documents, **kwargs}
    return Retriever(**settings)


def test_supporting_paragraphs_are_found(corpus, emb) -> None:  # type: ignore[no-untyped-def]
    items, _, _ = corpus
    r = retriever(corpus, emb, k=5)
    found = 0
    total = 0
    for item in items:
        titles = {d.metadata["title"] for d in r.invoke(item["question"])}
        gold = {title for title, _ in item["supporting_facts"]}
        found += len(gold & titles)
        total += len(gold)
    assert found / total >= 0.6  # MiniLM measured ~0.79 recall@5 on HotpotQA-100


def test_documents_carry_score_and_k_and_order(corpus, emb) -> None:  # type: ignore[no-untyped-def]
    docs = retriever(corpus, emb, k=4).invoke("If Gallu is a demon Lilu is what?")
    assert len(docs) == 4
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    assert all(d.metadata["retrieval_type"] == "dense" for d in docs)


def test_threshold_keeps_only_close_hits(corpus, emb) -> None:  # type: ignore[no-untyped-def]
    all_docs = retriever(corpus, emb, k=10).invoke("demon in Mesopotamian mythology")
    cut = all_docs[2].metadata["score"]
    kept = retriever(corpus, emb, k=10, score_threshold=cut).invoke("demon in Mesopotamian mythology")
    assert len(kept) >= 3 and all(d.metadata["score"] >= cut for d in kept)
    assert retriever(corpus, emb, k=10, score_threshold=1.0).invoke("demon in Mesopotamian mythology") == []


def test_filter_by_document(corpus, emb) -> None:  # type: ignore[no-untyped-def]
    items, docstore, _ = corpus
    r = retriever(corpus, emb, k=5, filter_dict={"document_id": [3]})
    docs = r.invoke(items[0]["question"])
    names = {d.document_name for d in docstore.search_by_document_id(3)}
    assert docs and all(d.metadata["title"] in {c.metadata["title"] for c in docstore.search_by_document_id(3)}
                        for d in docs)
    assert names == {items[2]["_id"]}
    r.set_filter({"document_id": [1]})
    assert all(d.metadata["title"] in {t for t, _ in items[0]["context"]} for d in r.invoke("anything"))


def test_stored_metadata_is_never_mutated(corpus, emb) -> None:  # type: ignore[no-untyped-def]
    _, docstore, _ = corpus
    r = retriever(corpus, emb, k=3)
    first = r.invoke("Lilu")
    chunk = docstore.search_by_document_id(1)[0]
    before = copy.deepcopy(chunk.metadata)
    first[0].metadata["title"] = "changed by the caller"
    r.invoke("Lilu")
    assert docstore.search_by_document_id(1)[0].metadata == before
    assert "score" not in before


def test_one_docstore_query_per_search(corpus, emb, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _, docstore, _ = corpus
    with recorded_selects(docstore, monkeypatch) as selects:  # counted at the real driver's cursor
        retriever(corpus, emb, k=10).invoke("Which company was founded first?")
    assert len(selects) == 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"k": 0}, "k"), ({"k": 10_001}, "k"), ({"score_threshold": 1.5}, "score_threshold"),
     ({"embed_func": "not callable"}, "embed_func"), ({"filter_dict": {"source": "x"}}, "filter_dict"),
     ({"filter_dict": {"document_id": "1"}}, "filter_dict")],
)
def test_limits(corpus, emb, kwargs: dict, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=name):
        retriever(corpus, emb, **kwargs)


def test_query_limits(corpus, emb) -> None:  # type: ignore[no-untyped-def]
    r = retriever(corpus, emb)
    for query in ("", "x" * 1_000_001):
        with pytest.raises(ParameterError, match="query"):
            r.invoke(query)
