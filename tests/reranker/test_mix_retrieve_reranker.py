"""MixRetrieveReranker: the reference example, the weight formula, fusion of real dense (MiniLM)
and sparse (BM25) results, and the argument checks."""

import math

import numpy as np
import pytest
from langchain_core.documents import Document

from mx_rag.errors import ParameterError
from mx_rag.reranker import Reranker
from mx_rag.reranker.local import MixRetrieveReranker


def doc(text: str, score: float, kind: str) -> Document:
    return Document(page_content=text, metadata={"score": score, "retrieval_type": kind})


def test_reference_example() -> None:
    docs = [doc("document1", 1.0, "dense"), doc("document2", 2.0, "sparse")]
    reranker = MixRetrieveReranker(k=100, baseline=0.4, amplitude=0.3, slope=1, midpoint=6)
    res = reranker.rerank("这是一个问题", docs)
    assert isinstance(reranker, Reranker)
    assert [d.page_content for d in res] == ["document1", "document2"]
    assert res[0].metadata["mix_score"] == pytest.approx(0.55)
    assert docs[0].metadata == {"score": 1.0, "retrieval_type": "dense"}  # inputs untouched


def test_weight_follows_the_logistic_curve() -> None:
    r = MixRetrieveReranker(baseline=0.2, amplitude=0.6, slope=0.5, midpoint=10)
    for length in (1, 10, 30):
        expected = 0.2 + 0.6 / (1 + math.exp(-0.5 * (length - 10)))
        assert r.dense_weight("x" * length) == pytest.approx(expected)
    assert 0.2 <= r.dense_weight("x" * 10_000) <= 0.8


def test_fusion_of_both_searches_and_k() -> None:
    docs = [doc("a", 0.9, "dense"), doc("b", 0.5, "dense"), doc("c", 0.1, "dense"),
            doc("b", 12.0, "sparse"), doc("d", 3.0, "sparse"), doc("e", 7.5, "sparse")]
    res = MixRetrieveReranker(k=3).rerank("q" * 6, docs)  # dense weight 0.55
    scores = {d.page_content: d.metadata["mix_score"] for d in res}
    assert [d.page_content for d in res] == ["b", "a", "e"]
    assert scores["b"] == pytest.approx(0.55 * 0.5 + 0.45 * 1.0)
    assert res[0].metadata["retrieval_type"] == "both" and res[1].metadata["retrieval_type"] == "dense"


def test_real_dense_and_bm25_results() -> None:
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.retrievers.bm25 import BM25Index

    corpus = ["FAISS is a library for efficient similarity search of dense vectors.",
              "Error code E1234 means the license file is missing.",
              "Bananas are rich in potassium.",
              "Vector databases index embeddings for nearest neighbour search."]
    emb = TextEmbedding("all-MiniLM-L6-v2")
    vectors = np.asarray(emb.embed_documents(corpus))
    bm25 = BM25Index(corpus)

    def retrieve(query: str) -> list[Document]:
        dense = vectors @ np.asarray(emb.embed_query(query))
        sparse = bm25.query(query)
        return ([doc(corpus[i], float(dense[i]), "dense") for i in np.argsort(-dense)[:3]]
                + [doc(corpus[i], sparse[i], "sparse") for i in np.argsort(sparse)[::-1][:3] if sparse[i] > 0])

    short = MixRetrieveReranker(k=1).rerank("E1234", retrieve("E1234"))  # exact code: BM25 decides
    assert short[0].page_content == corpus[1]
    long_query = "which software finds the most similar embedding vectors quickly"
    long = MixRetrieveReranker(k=2).rerank(long_query, retrieve(long_query))
    assert {d.page_content for d in long} == {corpus[0], corpus[3]}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"k": 0}, "k must be"), ({"baseline": 1.5}, "baseline must be"), ({"amplitude": -0.1}, "amplitude must be"),
     ({"slope": 0}, "slope must be"), ({"midpoint": -1}, "midpoint must be"),
     ({"baseline": 0.8, "amplitude": 0.3}, "baseline \\+ amplitude must be at most 1")],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        MixRetrieveReranker(**kwargs)


@pytest.mark.parametrize(
    ("query", "texts", "message"),
    [("", [doc("a", 1, "dense")], "query"), ("q", [], "texts must be"), ("q", ["a"], r"texts\[0\] must be"),
     ("q", [doc("a", 1, "hybrid")], r"retrieval_type'\] must be one of"),
     ("q", [doc("a", "high", "dense")], r"score'\] must be a number")],  # type: ignore[arg-type]
)
def test_bad_rerank_input(query: str, texts: list, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        MixRetrieveReranker().rerank(query, texts)
