# SPDX-License-Identifier: Apache-2.0
"""The retrieval API server end to end: a real uvicorn server on 127.0.0.1 over a real knowledge
base (SQLiteDocstore + MindFAISS + HashEmbedding over HotpotQA paragraphs), called over real
HTTP by ``RetrievalApiClient``; and ``mxrag serve-retrieval`` as a subprocess."""

from __future__ import annotations

import json
import logging
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.corag.retrieval_api import RetrievalApiClient, RetrieverSource
from mx_rag.corag.types import RetrievedDocument
from mx_rag.errors import MxRagError, ParameterError, RetrievalError
from mx_rag.retrievers import Retriever
from mx_rag.server import RetrievalServer, create_retrieval_app
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding
from mx_rag.utils import ClientParam

DATA = Path(__file__).resolve().parents[1] / "data" / "multihop" / "hotpotqa_sample.json"
ITEMS = json.loads(DATA.read_text())
MAX_TOP_K = 20
HTTP = ClientParam(use_http=True, timeout=30, retries=0)


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    root = tmp_path_factory.mktemp("kb")
    emb = HashEmbedding(dim=384)
    docstore = SQLiteDocstore(db_path=str(root / "sql.db"))
    vectors = MindFAISS(x_dim=384, devs=None, load_local_index=str(root / "faiss.index"))
    for doc_id, item in enumerate(ITEMS, start=1):
        paragraphs = [(title, " ".join(sentences)) for title, sentences in item["context"]]
        chunks = [MxDocument(text, {"title": title}, document_name=item["_id"]) for title, text in paragraphs]
        ids = docstore.add(chunks, doc_id)
        vectors.add(ids, emb.embed_documents([text for _, text in paragraphs]), document_id=doc_id)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=emb.embed_documents, k=3)


@pytest.fixture(scope="module")
def served(retriever: Retriever) -> Iterator[RetrievalServer]:
    app = create_retrieval_app(retriever, max_top_k=MAX_TOP_K, default_top_k=4)
    with RetrievalServer(app, host="127.0.0.1", port=0) as server:
        yield server


@pytest.fixture(scope="module")
def api(served: RetrievalServer) -> Iterator[RetrievalApiClient]:
    with RetrievalApiClient(served.url, client_param=HTTP) as client:
        yield client


def titles_by_text() -> dict[str, str]:
    return {" ".join(sentences): title for item in ITEMS for title, sentences in item["context"]}


# -- end to end over real HTTP -----------------------------------------------------------------------


def test_url_is_on_loopback_and_health_answers(served: RetrievalServer) -> None:
    assert served.url == f"http://127.0.0.1:{served.port}/retrieve" and served.port > 0
    response = httpx.get(served.base_url + "/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_answers_match_the_retriever_for_every_question(retriever: Retriever, api: RetrievalApiClient) -> None:
    direct = RetrieverSource(retriever)
    texts = titles_by_text()
    found = total = 0
    for item in ITEMS:
        docs = api.retrieve(item["question"], top_k=5)
        assert docs == direct.retrieve(item["question"], top_k=5)
        assert len(docs) == 5 and all(d.text in texts and len(d.id) == 16 for d in docs)
        gold = {title for title, _ in item["supporting_facts"]}
        found += len(gold & {texts[d.text] for d in docs})
        total += len(gold)
    assert found / total >= 0.4  # lexical HashEmbedding; MiniLM does better (tests/retrievers)


def test_wire_format_is_format1(served: RetrievalServer) -> None:
    response = httpx.post(served.url, json={"query": ITEMS[0]["question"], "top_k": 2})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"document_ids", "documents"}
    assert len(body["document_ids"]) == len(body["documents"]) == 2
    assert all(isinstance(x, str) for x in body["document_ids"] + body["documents"])


@pytest.mark.parametrize("top_k", [1, 3, MAX_TOP_K])
def test_top_k_is_honoured(api: RetrievalApiClient, top_k: int) -> None:
    assert len(api.retrieve("demon in Mesopotamian mythology", top_k=top_k)) == top_k


def test_defaults_and_extra_keys(served: RetrievalServer, retriever: Retriever) -> None:
    """No top_k: the app's default (4). The original SDK's client also sends "stream": false."""
    response = httpx.post(served.url, json={"query": "Lilu", "stream": False})
    assert response.status_code == 200 and len(response.json()["documents"]) == 4
    assert retriever.k == 3  # per-request top_k never changes the shared retriever


def test_sixteen_client_threads(retriever: Retriever, api: RetrievalApiClient) -> None:
    questions = [item["question"] for item in ITEMS] * 4
    direct = RetrieverSource(retriever)
    expected = {q: direct.retrieve(q, top_k=3) for q in set(questions)}
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda q: (q, api.retrieve(q, top_k=3)), questions))
    assert all(docs == expected[q] for q, docs in results)


# -- bad requests -----------------------------------------------------------------------------------------

BAD_BODIES: dict[str, Any] = {
    "empty_object": {},
    "no_query": {"top_k": 3},
    "empty_query": {"query": "", "top_k": 3},
    "query_not_str": {"query": 5, "top_k": 3},
    "query_list": {"query": ["a"], "top_k": 3},
    "query_too_long": {"query": "x" * 1_000_001, "top_k": 3},
    "top_k_zero": {"query": "q", "top_k": 0},
    "top_k_negative": {"query": "q", "top_k": -1},
    "top_k_over_max": {"query": "q", "top_k": MAX_TOP_K + 1},
    "top_k_str": {"query": "q", "top_k": "3"},
    "top_k_float": {"query": "q", "top_k": 1.5},
    "top_k_bool": {"query": "q", "top_k": True},
    "top_k_null": {"query": "q", "top_k": None},
    "json_list": [{"query": "q"}],
    "json_string": "q",
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_bodies_get_422(served: RetrievalServer, body: Any) -> None:
    response = httpx.post(served.url, json=body, timeout=30)
    assert response.status_code == 422
    assert response.json()["error"]["message"]
    assert len(response.content) < 2000  # the offending value is not echoed back


@pytest.mark.parametrize("content", [b"not json", b"", b'{"query": "q", "top_k": 3'])
def test_non_json_bodies_get_422(served: RetrievalServer, content: bytes) -> None:
    response = httpx.post(served.url, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 422


def test_declared_huge_body_gets_413_without_being_read(served: RetrievalServer) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n")
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 413")


def test_wrong_method_and_path(served: RetrievalServer) -> None:
    assert httpx.get(served.url).status_code == 405
    assert httpx.post(served.base_url + "/search", json={"query": "q"}).status_code == 404


# -- failures and arguments -------------------------------------------------------------------------------


class BrokenRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun | None = None
    ) -> list[Document]:
        raise RuntimeError("/secret/path/faiss.index is corrupt")


def test_failing_retriever_gives_500_without_internals_and_the_client_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with RetrievalServer(create_retrieval_app(BrokenRetriever())) as server:
        with caplog.at_level(logging.WARNING, logger="mx_rag.server.retrieval"):
            response = httpx.post(server.url, json={"query": "q", "top_k": 2})
        assert response.status_code == 500 and "secret" not in response.text
        assert "RetrievalError" in response.json()["error"]["message"]  # the type, never the text
        assert "corrupt" in caplog.text  # logged for the operator
        with RetrievalApiClient(server.url, client_param=HTTP) as client, \
                pytest.raises(RetrievalError, match="HTTP 500"):
            client.retrieve("q", 2)  # the server's failure reaches the caller as an error


class CountingSource:
    """A plain DocumentSource (no LangChain)."""

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        return [RetrievedDocument(id=f"{query}-{i}", text=f"text {i}") for i in range(top_k)]


def test_serves_any_document_source() -> None:
    with (
        RetrievalServer(create_retrieval_app(CountingSource(), max_top_k=5, default_top_k=2)) as server,
        RetrievalApiClient(server.url, client_param=HTTP) as client,
    ):
        assert [(d.id, d.text) for d in client.retrieve("q", 3)] == [("q-0", "text 0"), ("q-1", "text 1"),
                                                                      ("q-2", "text 2")]
        assert len(httpx.post(server.url, json={"query": "q"}).json()["documents"]) == 2


@pytest.mark.parametrize(
    ("source", "kwargs", "match"),
    [
        ("http://127.0.0.1:8000/retrieve", {}, "source"),
        (object(), {}, "source"),
        (CountingSource(), {"max_top_k": 0}, "max_top_k"),
        (CountingSource(), {"max_top_k": 10001}, "max_top_k"),
        (CountingSource(), {"max_top_k": 3, "default_top_k": 5}, "default_top_k"),
    ],
)
def test_create_retrieval_app_checks_its_arguments(source: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        create_retrieval_app(source, **kwargs)


def test_busy_port_fails_clearly(served: RetrievalServer) -> None:
    with pytest.raises(MxRagError, match=r"cannot listen on 127\.0\.0\.1"):
        RetrievalServer(create_retrieval_app(CountingSource()), port=served.port).start()
    with pytest.raises(MxRagError, match=r"cannot listen"):
        RetrievalServer(port=served.port).bind()


def test_bind_reserves_the_port_before_the_app_exists() -> None:
    server = RetrievalServer().bind()
    try:
        with pytest.raises(MxRagError, match="cannot listen"):
            RetrievalServer(port=server.port).bind()
        with pytest.raises(ParameterError, match="app"):
            server.start()
        early: queue.Queue[httpx.Response] = queue.Queue()
        threading.Thread(target=lambda: early.put(httpx.post(server.url, json={"query": "q"}, timeout=30)),
                         daemon=True).start()
        with pytest.raises(queue.Empty):  # bound, not yet serving: the request waits
            early.get(timeout=0.5)
        port = server.port
        server.app = create_retrieval_app(CountingSource())
        server.start()
        assert server.port == port
        assert early.get(timeout=30).json()["document_ids"] == [f"q-{i}" for i in range(5)]
    finally:
        server.stop()
    with pytest.raises(RuntimeError, match="not bound"):
        _ = server.url


def test_stop_is_idempotent_and_frees_the_port() -> None:
    server = RetrievalServer(create_retrieval_app(CountingSource())).start()
    port = server.port
    server.stop()
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}/retrieve", json={"query": "q"})
    with RetrievalServer(create_retrieval_app(CountingSource()), port=port) as again:
        assert httpx.get(again.base_url + "/health").status_code == 200


def test_importing_mx_rag_does_not_import_the_server() -> None:
    code = (
        "import sys, mx_rag, mx_rag.corag.retrieval_api, mx_rag.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'uvicorn', 'starlette') "
        "or m.startswith('mx_rag.server')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


# -- mxrag serve-retrieval ---------------------------------------------------------------------------------


def first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    stream = proc.stdout
    assert stream is not None
    box: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: box.put(stream.readline()), daemon=True).start()
    try:
        return box.get(timeout=timeout).strip()
    except queue.Empty:
        return ""


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "storage.txt").write_text("By default mx_rag keeps vectors in a FAISS index file named faiss.index.\n")
    (docs / "france.txt").write_text("The capital of France is Paris, a city on the river Seine.\n")
    return docs


@pytest.mark.slow
def test_cli_serves_a_folder_until_terminated(tmp_path: Path, docs_dir: Path) -> None:
    command = [sys.executable, "-m", "mx_rag.cli", "serve-retrieval", "--docs", str(docs_dir),
               "--workdir", str(tmp_path / "kb"), "--port", "0", "--k", "1"]
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        url = first_line(proc, 240)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/retrieve"), stderr_path.read_text()
        with RetrievalApiClient(url, client_param=HTTP, top_k=2) as client:
            docs = client.retrieve("What is the capital of France?")
        assert len(docs) == 2 and docs[0].text.startswith("The capital of France is Paris")
        assert len(httpx.post(url, json={"query": "Where are vectors kept?"}).json()["documents"]) == 1  # --k 1
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    log = stderr_path.read_text()
    assert "2 added" in log and "stopped" in log


@pytest.mark.slow
def test_cli_on_a_busy_port_fails_clearly(tmp_path: Path, docs_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        command = [sys.executable, "-m", "mx_rag.cli", "serve-retrieval", "--docs", str(docs_dir),
                   "--workdir", str(tmp_path / "kb"), "--port", str(port)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert not (tmp_path / "kb").exists()  # failed before ingesting anything


def test_cli_checks_k_before_doing_anything(tmp_path: Path, docs_dir: Path) -> None:
    from typer.testing import CliRunner

    from mx_rag.cli.main import app

    runner = CliRunner()
    assert "serve-retrieval" in runner.invoke(app, ["--help"]).output
    for args, message in ((["--k", "200"], "--k must be in [1, --max-top-k=100]"),
                          (["--max-top-k", "0"], "--max-top-k must be in [1, 10000]")):
        result = runner.invoke(app, ["serve-retrieval", "--docs", str(docs_dir), "--workdir", str(tmp_path / "kb"),
                                     "--port", "0", *args])
        assert result.exit_code == 1 and message in result.output
    assert not (tmp_path / "kb").exists()
