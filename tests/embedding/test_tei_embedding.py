# SPDX-License-Identifier: Apache-2.0
"""TEIEmbedding wire formats and failures, against the scripted server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from embedding_helpers import fake_vector, tei_answer

from mx_rag.embedding.service import TEIEmbedding
from mx_rag.errors import (
    ParameterError,
    RemoteConnectionError,
    RemoteResponseError,
    RemoteStatusError,
)
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

PARAM = ClientParam(use_http=True, retries=0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def client(server: ScriptedServer, path: str, **kwargs: Any) -> TEIEmbedding:
    return TEIEmbedding(server.url(path), client_param=kwargs.pop("client_param", PARAM), **kwargs)


def test_embed_wire_format_and_batching(server: ScriptedServer) -> None:
    texts = [f"text {i}" for i in range(70)]
    for start in range(0, 70, 32):
        server.enqueue(tei_answer("/embed", texts[start:start + 32]))
    with client(server, "/embed") as tei:
        vectors = tei.embed_documents(texts)
    assert vectors == [pytest.approx(fake_vector(t)) for t in texts]
    bodies = [r.json for r in server.requests]
    assert [len(b["inputs"]) for b in bodies] == [32, 32, 6]
    assert bodies[0] == {"inputs": texts[:32], "truncate": True}
    assert server.requests[0].path == "/embed" and server.requests[0].method == "POST"


def test_instance_batch_size_and_per_call_override(server: ScriptedServer) -> None:
    texts = ["a", "b", "c", "d", "e"]
    tei = client(server, "/v1/embed", batch_size=2)
    for start in range(0, 5, 2):
        server.enqueue(tei_answer("/embed", texts[start:start + 2]))
    tei.embed_documents(texts)
    server.enqueue(tei_answer("/embed", texts))
    tei.embed_documents(texts, batch_size=5)
    assert [len(r.json["inputs"]) for r in server.requests] == [2, 2, 1, 5]


def test_openai_format_orders_by_index(server: ScriptedServer) -> None:
    texts = ["zero", "one", "two"]
    data = [{"object": "embedding", "index": i, "embedding": fake_vector(texts[i])} for i in (2, 0, 1)]
    server.enqueue(Reply.json({"object": "list", "data": data}))
    vectors = client(server, "/v1/embeddings").embed_documents(texts)
    assert vectors == [pytest.approx(fake_vector(t)) for t in texts]
    assert server.requests[0].json == {"input": texts}


def test_openai_format_sends_model_name_and_accepts_missing_index(server: ScriptedServer) -> None:
    data = [{"embedding": fake_vector(t)} for t in ("a", "b")]
    server.enqueue(Reply.json({"data": data}))
    vectors = client(server, "/v1/embeddings/", model_name="bge-m3").embed_documents(["a", "b"])
    assert vectors == [pytest.approx(fake_vector("a")), pytest.approx(fake_vector("b"))]
    assert server.requests[0].json == {"input": ["a", "b"], "model": "bge-m3"}


def test_sparse_format(server: ScriptedServer) -> None:
    server.enqueue(Reply.json([[{"index": 5, "value": 0.5}, {"index": 17, "value": 1}], []]))
    result = client(server, "/embed_sparse", embed_mode="sparse").embed_documents(["x y", "z"])
    assert result == [{5: 0.5, 17: 1.0}, {}]
    assert server.requests[0].json == {"inputs": ["x y", "z"], "truncate": True}


def test_embed_query_and_headers(server: ScriptedServer) -> None:
    server.enqueue(tei_answer("/embed", ["q"]))
    param = ClientParam(use_http=True, api_key="sk-test", headers={"X-Tenant": "t1"})
    assert client(server, "/embed?api-version=1", client_param=param).embed_query("q") == pytest.approx(
        fake_vector("q"))
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer sk-test" and headers["x-tenant"] == "t1"
    assert server.requests[0].path == "/embed?api-version=1"


@pytest.mark.parametrize(
    "answer",
    [
        Reply.json([fake_vector("a")]),  # one vector for two texts
        Reply.json({"error": "model overloaded"}),
        Reply.json([[0.1, "x"], [0.2, 0.3]]),
        Reply.json([[0.1, True], [0.2, 0.3]]),
        Reply.json([[], []]),
        Reply.json([[0.1, 0.2], [0.3]]),  # different lengths
        Reply.raw(b"[[0.1, NaN], [0.2, 0.3]]", content_type="application/json"),
        Reply.raw(b"<html>gateway</html>", content_type="text/html"),
    ],
)
def test_malformed_answers_raise(server: ScriptedServer, answer: Reply) -> None:
    server.enqueue(answer)
    with pytest.raises(RemoteResponseError):
        client(server, "/embed").embed_documents(["a", "b"])


@pytest.mark.parametrize(
    "answer",
    [
        Reply.json({"data": [{"index": 0, "embedding": [0.1]}, {"index": 0, "embedding": [0.2]}]}),
        Reply.json({"data": [{"index": 0, "embedding": [0.1]}, {"index": 5, "embedding": [0.2]}]}),
        Reply.json({"data": [{"index": 0, "embedding": [0.1]}, {"index": 1}]}),
        Reply.json({"object": "list"}),
    ],
)
def test_malformed_openai_answers_raise(server: ScriptedServer, answer: Reply) -> None:
    server.enqueue(answer)
    with pytest.raises(RemoteResponseError):
        client(server, "/v1/embeddings").embed_documents(["a", "b"])


def test_malformed_sparse_answer_raises(server: ScriptedServer) -> None:
    server.enqueue(Reply.json([[{"index": "5", "value": 0.5}]]))
    with pytest.raises(RemoteResponseError):
        client(server, "/embed_sparse").embed_documents(["a"])


def test_different_dimensions_across_batches_raise(server: ScriptedServer) -> None:
    server.enqueue(Reply.json([[0.6, 0.8]]), Reply.json([[1.0, 0.0, 0.0]]))
    with pytest.raises(RemoteResponseError, match="different lengths"):
        client(server, "/embed").embed_documents(["a", "b"], batch_size=1)


def test_status_errors_carry_status_and_body(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(413, {"error": "Input validation error: batch size 64 > maximum allowed 32"}))
    with pytest.raises(RemoteStatusError) as info:
        client(server, "/embed").embed_documents(["a"])
    assert info.value.status_code == 413 and "maximum allowed" in info.value.body


def test_retries_on_503_then_succeeds(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(503, "warming up"), tei_answer("/embed", ["a"]))
    param = ClientParam(use_http=True, retries=1, backoff=0)
    assert client(server, "/embed", client_param=param).embed_documents(["a"]) == [pytest.approx(fake_vector("a"))]


def test_connection_refused() -> None:
    srv = ScriptedServer().start()
    url = srv.url("/embed")
    srv.stop()
    with pytest.raises(RemoteConnectionError):
        TEIEmbedding(url, client_param=PARAM).embed_documents(["a"])


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"url": "http://127.0.0.1:1/rerank"}, r"^url .* is not supported"),
        ({"url": "http://127.0.0.1:1/embed", "client_param": ClientParam()}, r"^url .* plain http"),
        ({"url": "ftp://127.0.0.1/embed"}, r"^url must be"),
        ({"url": ""}, r"^url must have length"),
        ({"url": "http://127.0.0.1:1/embed", "embed_mode": "hybrid"}, r"^embed_mode must be one of"),
        ({"url": "http://127.0.0.1:1/embed", "batch_size": 0}, r"^batch_size"),
        ({"url": "http://127.0.0.1:1/embed", "client_param": {"use_http": True}}, r"^client_param must be"),
        ({"url": "http://127.0.0.1:1/embeddings", "model_name": ""}, r"^model_name"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], pattern: str) -> None:
    kwargs.setdefault("client_param", PARAM)
    with pytest.raises(ParameterError, match=pattern):
        TEIEmbedding(**kwargs)
