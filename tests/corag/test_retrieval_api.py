# SPDX-License-Identifier: Apache-2.0
"""CoRAG document sources: the retrieve-API parser, its HTTP client (against ScriptedServer) and
the adapter over a real ``Retriever`` (MindFAISS + SQLiteDocstore + HashEmbedding)."""

from __future__ import annotations

import hashlib
import logging
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from mx_rag.corag.retrieval_api import (
    NO_ID,
    RetrievalApiClient,
    RetrieverSource,
    as_document_source,
    normalize_retrieve_api_results,
)
from mx_rag.corag.types import DocumentSource, RetrievedDocument
from mx_rag.errors import ParameterError, RemoteError, RemoteStatusError, StorageError
from mx_rag.retrievers import Retriever
from mx_rag.retrievers.sources import RetrievalError
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding, Reply, ScriptedServer
from mx_rag.utils import ClientParam

GOOGLE = "Google is a multinational technology company."
YOUTUBE = "YouTube was founded on February 14, 2005."
PATH = "/retrieve"
LOGGER = "mx_rag.corag.retrieval_api"

# The six shapes documented by the original SDK (Seed E), a bare list, and garbage.
SHAPES: dict[str, tuple[Any, list[tuple[str, str]]]] = {
    "format1_ids_and_documents": (
        {"document_ids": ["doc1", "doc2"], "documents": [GOOGLE, YOUTUBE]},
        [("doc1", GOOGLE), ("doc2", YOUTUBE)],
    ),
    "format2_chunks": ({"chunks": [GOOGLE, YOUTUBE]}, [(NO_ID, GOOGLE), (NO_ID, YOUTUBE)]),
    "format3_data": (
        {"data": [{"id": "doc1", "content": GOOGLE}, {"id": "doc2", "content": YOUTUBE}]},
        [("doc1", GOOGLE), ("doc2", YOUTUBE)],
    ),
    "format4_results": (
        {"results": [{"doc_id": "doc1", "text": GOOGLE}, {"doc_id": "doc2", "text": YOUTUBE}]},
        [("doc1", GOOGLE), ("doc2", YOUTUBE)],
    ),
    "format5_docs": (
        {"docs": [{"id": "doc1", "contents": GOOGLE}, {"id": "doc2", "contents": YOUTUBE}]},
        [("doc1", GOOGLE), ("doc2", YOUTUBE)],
    ),
    "format6_passages_mixed": (
        {"passages": [{"id": "doc1", "content": GOOGLE}, YOUTUBE]},
        [("doc1", GOOGLE), (NO_ID, YOUTUBE)],
    ),
    "bare_list": ([GOOGLE, {"doc_id": 7, "text": YOUTUBE}], [(NO_ID, GOOGLE), ("7", YOUTUBE)]),
    "garbage_error_object": ({"error": "index not loaded", "code": 500}, []),
    "garbage_scalar": (42, []),
    "garbage_string": ("not a list", []),
    "garbage_null": (None, []),
    "garbage_elements": (
        {"data": [None, 3, [GOOGLE], {"id": "x"}, {"id": "y", "text": 5}, {"content": "  "}, ""]},
        [],
    ),
    "garbage_documents_not_list": ({"document_ids": ["a"], "documents": GOOGLE}, []),
}


def pairs(docs: list[RetrievedDocument]) -> list[tuple[str, str]]:
    return [(d.id, d.text) for d in docs]


def http_param(**kwargs: Any) -> ClientParam:
    return ClientParam(use_http=True, **{"timeout": 5, "retries": 0, "backoff": 0, **kwargs})


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def api(server: ScriptedServer) -> Iterator[RetrievalApiClient]:
    with RetrievalApiClient(server.url(PATH), client_param=http_param(), top_k=5) as client:
        yield client


# -- normalize_retrieve_api_results -------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), SHAPES.values(), ids=SHAPES.keys())
def test_normalize_reads_every_documented_shape(data: Any, expected: list[tuple[str, str]]) -> None:
    assert pairs(normalize_retrieve_api_results(data)) == expected


def test_format1_is_never_stringified_into_one_document() -> None:
    """The original turned format 1 into one document holding ``str(response)``."""
    docs = normalize_retrieve_api_results({"document_ids": ["a", "b"], "documents": ["x", "y"]})
    assert all("{" not in d.text for d in docs) and len(docs) == 2


def test_skipping_a_bad_element_keeps_the_others_paired() -> None:
    data = {"document_ids": ["a", "b", "c"], "documents": ["first", {"oops": 1}, "third"]}
    assert pairs(normalize_retrieve_api_results(data)) == [("a", "first"), ("c", "third")]
    data3 = {"data": [{"id": 1, "content": "one"}, {"id": 2}, {"id": 3, "content": "three"}]}
    assert pairs(normalize_retrieve_api_results(data3)) == [("1", "one"), ("3", "three")]


def test_format1_ids_of_another_length_are_dropped_not_mispaired() -> None:
    data = {"document_ids": ["a"], "documents": ["first", "second"]}
    assert pairs(normalize_retrieve_api_results(data)) == [(NO_ID, "first"), (NO_ID, "second")]
    assert pairs(normalize_retrieve_api_results({"documents": ["only"]})) == [(NO_ID, "only")]


def test_format1_dict_documents_keep_their_own_ids() -> None:
    data = {"document_ids": ["outer1", "outer2"], "documents": [{"id": "inner", "text": "t1"}, {"text": "t2"}]}
    assert pairs(normalize_retrieve_api_results(data)) == [("inner", "t1"), ("outer2", "t2")]


def test_text_and_id_key_precedence() -> None:
    item = {"contents": "C", "content": "c", "text": "t", "id": "i", "doc_id": "d"}
    assert pairs(normalize_retrieve_api_results([item])) == [("i", "C")]
    # an empty field falls through to the next one, as in the original ("first truthy")
    assert pairs(normalize_retrieve_api_results([{"contents": "", "text": "t", "id": "", "doc_id": 9}])) == [("9", "t")]


def test_ids_zero_and_floats_are_kept_bools_and_objects_are_not() -> None:
    data = [{"id": 0, "text": "a"}, {"id": 1.5, "text": "b"}, {"id": True, "text": "c"}, {"id": {"x": 1}, "text": "d"}]
    assert pairs(normalize_retrieve_api_results(data)) == [("0", "a"), ("1.5", "b"), (NO_ID, "c"), (NO_ID, "d")]


def test_first_list_key_wins_and_a_single_document_object_is_read() -> None:
    assert pairs(normalize_retrieve_api_results({"chunks": "x", "data": ["from data"], "docs": ["no"]})) == [
        (NO_ID, "from data")
    ]
    assert pairs(normalize_retrieve_api_results({"id": "only", "content": "one"})) == [("only", "one")]


def test_skipped_elements_are_logged_at_debug_without_their_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        normalize_retrieve_api_results({"data": [{"secret": "do not log me"}, 5]})
    assert caplog.records and all(r.levelno == logging.DEBUG for r in caplog.records)
    assert "do not log me" not in caplog.text


# -- RetrievalApiClient over real HTTP ------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), SHAPES.values(), ids=SHAPES.keys())
def test_client_reads_every_shape_over_http(
    server: ScriptedServer, api: RetrievalApiClient, data: Any, expected: list[tuple[str, str]]
) -> None:
    server.enqueue(Reply.json(data))
    assert pairs(api.retrieve("Which company acquired by Google was founded first?", top_k=3)) == expected
    (request,) = server.requests
    assert request.method == "POST" and request.path == PATH
    assert request.headers["content-type"] == "application/json"
    assert request.json == {"query": "Which company acquired by Google was founded first?", "top_k": 3}


def test_client_default_top_k_and_truncation(server: ScriptedServer, api: RetrievalApiClient) -> None:
    server.enqueue(Reply.json({"chunks": [f"c{i}" for i in range(9)]}), Reply.json({"chunks": ["a", "b", "c"]}))
    assert len(api.retrieve("q")) == 5  # the server sent 9; the client asked for top_k=5
    assert server.requests[0].json == {"query": "q", "top_k": 5}
    assert [d.text for d in api.retrieve("q", top_k=2)] == ["a", "b"]


def test_client_sends_the_api_key(server: ScriptedServer) -> None:
    server.enqueue(Reply.json({"chunks": ["x"]}))
    with RetrievalApiClient(server.url(PATH), client_param=http_param(api_key="sk-test")) as client:
        assert pairs(client.retrieve("q", 1)) == [(NO_ID, "x")]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_500_after_retries_raises_a_retrieval_error_without_the_body(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(*[Reply.status(500, "index exploded")] * 3)
    with (
        RetrievalApiClient(server.url(PATH), client_param=http_param(retries=2)) as client,
        caplog.at_level(logging.DEBUG, logger=LOGGER),
        pytest.raises(RetrievalError, match="retrieval API answered HTTP 500") as raised,
    ):
        client.retrieve("a question", 3)
    assert len(server.requests) == 3
    assert "index exploded" not in str(raised.value)  # a body may echo the query: not in the message
    assert isinstance(raised.value.__cause__, RemoteStatusError) and raised.value.__cause__.body == "index exploded"
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == LOGGER)


def test_a_retried_500_then_success_returns_documents(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(503), Reply.json({"chunks": ["ok"]}))
    with RetrievalApiClient(server.url(PATH), client_param=http_param(retries=1)) as client:
        assert pairs(client.retrieve("q", 1)) == [(NO_ID, "ok")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("replies", "param", "error"),
    [
        ([Reply.raw(b"not json", content_type="application/json")], {}, "RemoteResponseError"),
        ([Reply.status(404, {"detail": "Not Found"})], {"retries": 3}, "HTTP 404"),
        ([Reply.drop(), Reply.drop()], {"retries": 1}, "RemoteConnectionError"),
        ([Reply.json({"chunks": ["x"]}, delay=1.0)], {"timeout": 0.2}, "RemoteTimeoutError"),
        ([Reply.json({"chunks": ["x" * 500]})], {"response_limit_size": 100}, "ResponseTooLargeError"),
    ],
    ids=["malformed_json", "404_not_retried", "dropped_connection", "read_timeout", "too_large"],
)
def test_failing_server_raises_a_retrieval_error_naming_the_failure(
    server: ScriptedServer, replies: list[Reply], param: dict[str, Any], error: str
) -> None:
    server.enqueue(*replies)
    with (
        RetrievalApiClient(server.url(PATH), client_param=http_param(**param)) as client,
        pytest.raises(RetrievalError, match=error) as raised,
    ):
        client.retrieve("q", 3)
    assert isinstance(raised.value.__cause__, RemoteError)
    assert len(server.requests) == len(replies)


def test_connection_refused_raises_a_retrieval_error() -> None:
    url = f"http://127.0.0.1:{free_port()}{PATH}"
    with (
        RetrievalApiClient(url, client_param=http_param(retries=1)) as client,
        pytest.raises(RetrievalError, match="RemoteConnectionError"),
    ):
        client.retrieve("q", 3)


def test_concurrent_use_from_16_threads(server: ScriptedServer, api: RetrievalApiClient) -> None:
    calls = 64
    server.enqueue(*[Reply.json({"document_ids": ["doc1", "doc2"], "documents": [GOOGLE, YOUTUBE]})] * calls)
    queries = [f"question {i}" for i in range(calls)]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda q: api.retrieve(q, top_k=2), queries))
    assert all(pairs(r) == [("doc1", GOOGLE), ("doc2", YOUTUBE)] for r in results)
    assert sorted(r.json["query"] for r in server.requests) == sorted(queries)
    assert all(r.json["top_k"] == 2 for r in server.requests)


# -- construction and arguments -----------------------------------------------------------------------


def test_http_url_with_default_client_param_fails_at_construction() -> None:
    with pytest.raises(ParameterError, match=r"use_http") as info:
        RetrievalApiClient("http://127.0.0.1:8000/retrieve", client_param=ClientParam())
    assert "ClientParam(use_http=True)" in str(info.value)
    with pytest.raises(ParameterError, match=r"use_http"):
        RetrievalApiClient("http://127.0.0.1:8000/retrieve")


def test_seed_example_http_url_with_a_ca_file_names_the_fix() -> None:
    """Seed E: ``retrieve_api_url="http://..."`` with ``ClientParam(ca_file=...)``."""
    with pytest.raises(ParameterError, match=r"pass ClientParam\(use_http=True\)"):
        RetrievalApiClient("http://10.0.0.1:8000/retrieve", client_param=ClientParam(ca_file="/path/to/ca.crt"))


def test_https_url_with_default_client_param_is_accepted() -> None:
    with RetrievalApiClient("https://retrieval.example.com/retrieve") as client:
        assert client.url == "https://retrieval.example.com/retrieve" and client.top_k == 5


@pytest.mark.parametrize("url", ["", "ftp://h/retrieve", "/retrieve", "http://user:pw@h/r", 5])
def test_bad_urls_are_refused(url: Any) -> None:
    with pytest.raises(ParameterError):
        RetrievalApiClient(url, client_param=http_param())


@pytest.mark.parametrize("top_k", [0, 10001, True, "5", 2.0, None])
def test_top_k_is_checked(server: ScriptedServer, api: RetrievalApiClient, top_k: Any) -> None:
    if top_k is not None:
        with pytest.raises(ParameterError, match="top_k"):
            api.retrieve("q", top_k=top_k)
    with pytest.raises(ParameterError, match="top_k"):
        RetrievalApiClient(server.url(PATH), client_param=http_param(), top_k=top_k)
    assert server.requests == []


@pytest.mark.parametrize("query", ["", None, b"q", "x" * 1_000_001])
def test_query_is_checked(api: RetrievalApiClient, query: Any) -> None:
    with pytest.raises(ParameterError, match="query"):
        api.retrieve(query, top_k=1)


def test_closed_client_refuses_calls(server: ScriptedServer) -> None:
    client = RetrievalApiClient(server.url(PATH), client_param=http_param())
    client.close()
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.retrieve("q", 1)


def test_client_param_type_is_checked() -> None:
    with pytest.raises(ParameterError, match="client_param"):
        RetrievalApiClient("https://h/retrieve", client_param={"use_http": True})  # type: ignore[arg-type]


# -- RetrieverSource over a real Retriever ------------------------------------------------------------

CORPUS = {
    1: ["The capital of France is Paris, on the river Seine.", "Berlin is the capital of Germany."],
    2: ["YouTube was founded in February 2005 by three PayPal employees.",
        "Google acquired YouTube in November 2006."],
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    root: Path = tmp_path_factory.mktemp("source")
    emb = HashEmbedding(dim=128)
    docstore = SQLiteDocstore(db_path=str(root / "sql.db"))
    vectors = MindFAISS(x_dim=128, devs=None, load_local_index=None)
    for doc_id, texts in CORPUS.items():
        ids = docstore.add([MxDocument(t, {"source": f"doc{doc_id}.txt"}, document_name=f"doc{doc_id}") for t in texts],
                           doc_id)
        vectors.add(ids, emb.embed_documents(texts), document_id=doc_id)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=emb.embed_documents, k=2)


def text_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_retriever_source_returns_ids_and_texts(retriever: Retriever) -> None:
    source = RetrieverSource(retriever)
    assert isinstance(source, DocumentSource)
    docs = source.retrieve("What is the capital of France?", top_k=2)
    assert len(docs) == 2
    assert docs[0].text == CORPUS[1][0]
    assert all(d.id == text_id(d.text) for d in docs)  # Retriever's metadata carries no chunk id
    assert source.retrieve("What is the capital of France?", top_k=2) == docs  # stable ids


def test_retriever_source_honours_top_k_without_changing_the_retriever(retriever: Retriever) -> None:
    source = RetrieverSource(retriever)
    assert len(source.retrieve("capital", top_k=1)) == 1
    assert len(source.retrieve("capital", top_k=4)) == 4
    assert len(source.retrieve("capital")) == 2  # None: the retriever's own k
    assert len(RetrieverSource(retriever, top_k=3).retrieve("capital")) == 3
    assert retriever.k == 2


def test_retriever_source_sees_later_filter_changes(retriever: Retriever) -> None:
    source = RetrieverSource(retriever)
    narrowed = retriever.model_copy()
    source_narrowed = RetrieverSource(narrowed)
    assert {d.text for d in source_narrowed.retrieve("capital YouTube", top_k=4)} == set(CORPUS[1] + CORPUS[2])
    narrowed.set_filter({"document_id": [2]})
    assert {d.text for d in source_narrowed.retrieve("capital YouTube", top_k=4)} == set(CORPUS[2])
    assert len(source.retrieve("capital YouTube", top_k=4)) == 4


def test_retriever_source_from_16_threads(retriever: Retriever) -> None:
    source = RetrieverSource(retriever)
    questions = ["capital of France", "capital of Germany", "Who founded YouTube?", "Google acquired"] * 16
    expected = {q: source.retrieve(q, top_k=2) for q in set(questions)}
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda q: (q, source.retrieve(q, top_k=(len(q) % 3) + 1)), questions))
    for question, docs in results:
        k = (len(question) % 3) + 1
        assert docs[: min(k, 2)] == expected[question][: min(k, 2)] and len(docs) == k


class ListRetriever(BaseRetriever):
    """A retriever without a ``k`` field that returns fixed documents (or raises)."""

    docs: list[Document] = Field(default_factory=list)
    error: str = ""
    error_type: str = "runtime"

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None
    ) -> list[Document]:
        if self.error:
            raise (StorageError if self.error_type == "storage" else RuntimeError)(self.error)
        return list(self.docs)


def test_ids_come_from_metadata_then_document_id_then_a_hash() -> None:
    docs = [
        Document(page_content="a", metadata={"chunk_id": 11, "id": "no"}),
        Document(page_content="b", metadata={"id": "meta-id"}),
        Document(page_content="c", id="doc-id"),
        Document(page_content="d"),
        Document(page_content=""),
    ]
    source = RetrieverSource(ListRetriever(docs=docs))
    expected = [("11", "a"), ("meta-id", "b"), ("doc-id", "c"), (text_id("d"), "d")]
    assert pairs(source.retrieve("q", top_k=10)) == expected
    assert [d.text for d in source.retrieve("q", top_k=2)] == ["a", "b"]  # no k field: cut


def test_a_failing_retriever_raises() -> None:
    source = RetrieverSource(ListRetriever(error="vector store offline"))
    with pytest.raises(RetrievalError, match=r"^RuntimeError: vector store offline$") as raised:
        source.retrieve("q", 3)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert source.retrieve_strict == source.retrieve  # the old name of the raising call


def test_a_retriever_raising_an_mx_rag_error_keeps_its_type() -> None:
    source = RetrieverSource(ListRetriever(error="table lost", error_type="storage"))
    with pytest.raises(StorageError, match="table lost"):
        source.retrieve("q", 3)


def test_retriever_source_checks_its_arguments(retriever: Retriever) -> None:
    with pytest.raises(ParameterError, match="retriever"):
        RetrieverSource("http://h/retrieve")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="top_k"):
        RetrieverSource(retriever, top_k=0)
    with pytest.raises(ParameterError, match="query"):
        RetrieverSource(retriever).retrieve("", 1)


# -- as_document_source --------------------------------------------------------------------------------


class EchoSource:
    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        return [RetrievedDocument(id="e", text=query)][:top_k]


def test_as_document_source_picks_the_right_adapter(retriever: Retriever, server: ScriptedServer) -> None:
    client = as_document_source(server.url(PATH), http_param(), top_k=4)
    assert isinstance(client, RetrievalApiClient) and client.top_k == 4
    client.close()
    adapted = as_document_source(retriever, top_k=3)
    assert isinstance(adapted, RetrieverSource) and len(adapted.retrieve("capital")) == 3
    echo = EchoSource()
    assert as_document_source(echo) is echo
    source = RetrieverSource(retriever)
    assert as_document_source(source) is source


@pytest.mark.parametrize("obj", [None, 5, b"http://h/retrieve", object(), {"url": "x"}])
def test_as_document_source_refuses_other_objects(obj: Any) -> None:
    with pytest.raises(ParameterError, match="retrieval source"):
        as_document_source(obj)


def test_as_document_source_checks_the_url_scheme() -> None:
    with pytest.raises(ParameterError, match="use_http"):
        as_document_source("http://127.0.0.1:8000/retrieve", ClientParam(ca_file="/path/to/ca.crt"))

