"""Rerankers: a conformance suite over LocalReranker (a real cross-encoder built from the MiniLM
weights) and TEIReranker (both wire formats against the scripted server)."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from mx_rag.errors import ParameterError, RemoteResponseError
from mx_rag.reranker import Reranker
from mx_rag.reranker.local import LocalReranker
from mx_rag.reranker.service import TEIReranker
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

TEXTS = ["FAISS searches dense vectors.", "Bananas are yellow.", "apt installs Debian packages."]


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sequence-classification model whose encoder is MiniLM's (the head is new, seeded)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mx_rag.embedding.local.model_info import minilm_dir

    out = tmp_path_factory.mktemp("cross-encoder")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=1)
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def tei_reply(path: str, texts: list[str]) -> Reply:
    """Score = number of words shared with 'dense vectors search', shuffled order, as a server might."""
    scores = [len({"dense", "vectors", "searches"} & set(t.lower().strip(".").split())) for t in texts]
    if path.endswith("/v1/rerank"):
        return Reply.json(
            {"results": [{"index": i, "relevance_score": float(s)} for i, s in reversed(list(enumerate(scores)))]}
        )
    return Reply.json([{"index": i, "score": float(s)} for i, s in reversed(list(enumerate(scores)))])


@pytest.fixture(params=["local", "tei", "cohere"])
def reranker(request: pytest.FixtureRequest, cross_encoder_dir: Path, server: ScriptedServer) -> Reranker:
    server.reset()
    if request.param == "local":
        return LocalReranker(str(cross_encoder_dir), dev_id=0, k=2)
    path = "/rerank" if request.param == "tei" else "/v1/rerank"
    for start in range(0, len(TEXTS), 2):
        server.enqueue(tei_reply(path, TEXTS[start : start + 2]))
    return TEIReranker(url=server.url(path), k=2, client_param=ClientParam(use_http=True, retries=0))


def test_one_finite_score_per_text_in_order(reranker: Reranker) -> None:
    scores = reranker.rerank("dense vector search", TEXTS, batch_size=2)
    assert isinstance(scores, np.ndarray) and scores.shape == (3,) and np.isfinite(scores).all()
    if not isinstance(reranker, LocalReranker):
        assert list(scores) == [3.0, 0.0, 0.0]  # the first text shares 3 words with the query


def test_rerank_top_k_keeps_k_best_documents_with_metadata(reranker: Reranker) -> None:
    docs = [Document(page_content=t, metadata={"i": i}) for i, t in enumerate(TEXTS)]
    scores = reranker.rerank("dense vector search", TEXTS, batch_size=2)
    top = reranker.rerank_top_k(docs, scores)
    assert len(top) == 2
    assert [d.metadata["rerank_score"] for d in top] == sorted(scores, reverse=True)[:2]
    assert docs[0].metadata == {"i": 0}  # inputs untouched


@pytest.mark.parametrize(
    ("query", "texts", "name"), [("", TEXTS, "query"), ("q", [], "texts"), ("q", ["ok", ""], "texts[1]")]
)
def test_limits(reranker: Reranker, query: str, texts: list[str], name: str) -> None:
    with pytest.raises(ParameterError, match=re.escape(name)):
        reranker.rerank(query, texts)


def test_rerank_top_k_checks_lengths() -> None:
    class Fixed(Reranker):
        def rerank(self, query, texts, batch_size=32):  # type: ignore[no-untyped-def]
            return np.ones(len(texts))

    r = Fixed(k=1)
    assert r.rerank_top_k(["a", "b"], [0.1, 0.9]) == ["b"]
    with pytest.raises(ParameterError, match="scores"):
        r.rerank_top_k(["a"], np.array([]))
    with pytest.raises(ParameterError, match="objs"):
        r.rerank_top_k(["a", "b"], [1.0])
    with pytest.raises(ParameterError, match="k"):
        Fixed(k=0)


def test_local_reranker_prefers_relevant_pairs_after_scoring(cross_encoder_dir: Path) -> None:
    scores = LocalReranker(str(cross_encoder_dir)).rerank("q", ["same text", "same text"])
    assert scores[0] == pytest.approx(scores[1])


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json([{"index": 0, "score": 1.0}]),
        Reply.json([{"index": 0, "score": 1.0}, {"index": 0, "score": 2.0}]),
        Reply.json([{"index": 0, "score": "high"}, {"index": 1, "score": 1}]),
        Reply.json({"error": "x"}),
    ],
    ids=["too-few", "repeated-index", "non-numeric", "not-a-list"],
)
def test_tei_broken_answers_raise(server: ScriptedServer, reply: Reply) -> None:
    server.reset()
    server.enqueue(reply)
    reranker = TEIReranker(url=server.url("/rerank"), client_param=ClientParam(use_http=True, retries=0))
    with pytest.raises(RemoteResponseError):
        reranker.rerank("q", ["a", "b"])


def test_tei_accepts_integer_scores(server: ScriptedServer) -> None:
    server.reset()
    server.enqueue(Reply.json([{"index": 1, "score": 0}, {"index": 0, "score": 3}]))
    reranker = TEIReranker(url=server.url("/rerank"), client_param=ClientParam(use_http=True))
    assert list(reranker.rerank("q", ["a", "b"])) == [3.0, 0.0]
    assert server.requests[0].json == {"query": "q", "texts": ["a", "b"], "truncate": True}


def test_tei_url_must_name_an_endpoint() -> None:
    with pytest.raises(ParameterError, match="rerank"):
        TEIReranker(url="http://127.0.0.1:1/embed", client_param=ClientParam(use_http=True))


def test_tei_refuses_more_than_a_million_texts_before_sending(server: ScriptedServer) -> None:
    server.reset()
    reranker = TEIReranker(url=server.url("/rerank"), client_param=ClientParam(use_http=True, retries=0))
    with pytest.raises(ParameterError, match=r"texts must hold 1 to 1000000 strings, got 1000002$"):
        reranker.rerank("q", ["a"] * 1_000_002)
    assert server.requests == []


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda r: r.rerank("q" * (1024 * 1024 + 1), ["a"]), r"query must have length in \[1, 1048576\]"),
        (lambda r: r.rerank("q", ["a", "t" * (1024 * 1024 + 1)]), r"texts\[1\] must have length in \[1, 1048576\]"),
        (lambda r: r.rerank("q", "a"), r"texts must be a list of 1 to 1000000 strings, got 'a'"),
        (lambda r: r.rerank("q", ["a"], batch_size=0), r"batch_size must be in \[1, 1024\], got 0"),
        (lambda r: r.rerank("q", ["a"], batch_size=1025), r"batch_size must be in \[1, 1024\], got 1025"),
    ],
    ids=["query-too-long", "text-too-long", "texts-not-a-list", "batch-size-0", "batch-size-1025"],
)
def test_tei_documented_limits_are_checked_before_sending(server: ScriptedServer, call: Any, match: str) -> None:
    server.reset()
    reranker = TEIReranker(url=server.url("/rerank"), client_param=ClientParam(use_http=True, retries=0))
    with pytest.raises(ParameterError, match=match):
        call(reranker)
    assert server.requests == []


@pytest.mark.parametrize("k", [0, 10_001, 1.5])
def test_tei_k_is_checked(k: Any) -> None:
    with pytest.raises(ParameterError, match=r"k must be .*\[1, 10000\]"):
        TEIReranker(url="http://127.0.0.1:1/rerank", k=k, client_param=ClientParam(use_http=True))


# -- RerankerFactory ----------------------------------------------------------------------------


def test_factory_builds_a_local_reranker(cross_encoder_dir: Path) -> None:
    from mx_rag.reranker import RerankerFactory

    built = RerankerFactory.create_reranker(similarity_type="local_reranker", model_path=str(cross_encoder_dir),
                                            dev_id=0)
    direct = LocalReranker(str(cross_encoder_dir))
    assert isinstance(built, LocalReranker)
    np.testing.assert_allclose(built.rerank("你好", ["我是小红", "我是小明"]),
                               direct.rerank("你好", ["我是小红", "我是小明"]), atol=1e-5)


def test_factory_builds_a_tei_reranker(server: ScriptedServer) -> None:
    from mx_rag.reranker.reranker_factory import RerankerFactory

    server.reset()
    server.enqueue(tei_reply("/rerank", TEXTS))
    built = RerankerFactory.create_reranker(similarity_type="tei_reranker", url=server.url("/rerank"),
                                            client_param=ClientParam(use_http=True))
    assert isinstance(built, TEIReranker)
    assert list(built.rerank("dense vectors", TEXTS)) == [3.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({}, "similarity_type is required"), ({"similarity_type": "bm25"}, "similarity_type must be one of"),
     ({"similarity_type": "local_reranker"}, "needs the parameter 'model_path'")],
)
def test_factory_names_the_bad_parameter(kwargs: dict, message: str) -> None:
    from mx_rag.reranker import RerankerFactory

    with pytest.raises(ParameterError, match=message):
        RerankerFactory.create_reranker(**kwargs)
