# SPDX-License-Identifier: Apache-2.0
"""``mxrag serve``'s app end to end: a real uvicorn server on 127.0.0.1 (``AppServer``) over a real
``KnowledgeService`` (SQLite + FAISS in a temporary folder, the MiniLM embedding), answering with
``Text2TextLLM`` against the scripted LLM server (it echoes the prompt, so an answer shows what the
chain retrieved). Called over real HTTP by the official ``openai`` client, LangChain's
``ChatOpenAI``, our ``TEIEmbedding``/``TEIReranker`` and CoRAG's ``RetrievalApiClient``.

API keys are configured (alice, an admin, owns every knowledge base here; bob is another user);
a second server over another folder, with no key and no reranker, covers local mode and the 503
of ``/rerank``. Every test of the main server is ``slow``: its fixture loads torch, MiniLM and a
cross-encoder (most of this file's time is those imports), then its tests take a few seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mx_rag.llm import Text2TextLLM
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam
from tests.server.jobs import wait_job

DOCS = Path(__file__).resolve().parents[1] / "data" / "docs"
PDF, DOCX = DOCS / "layout-parser-paper-fast.pdf", DOCS / "docx-tables.docx"
KB = "handbook"
ALICE, BOB = "alice01", "bobby02"  # user ids
FACTS = (
    "The Zorblax reactor in Building 7 runs on molten salt and was commissioned in 1987.\n\n"
    "Visitors to Building 7 must sign in at the east gate before entering the reactor hall.\n"
)
QUESTION = "What does the Zorblax reactor run on?"
TIMEOUT = 120.0


@dataclass
class Served:
    server: AppServer
    service: KnowledgeService
    alice: str  # API keys
    bob: str
    reranker_dir: Path

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def client(self, key: str | None) -> httpx.Client:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=TIMEOUT)

    def folder(self, kb: str) -> Path:
        return self.service.uploads / ALICE / kb


def upload(client: httpx.Client, kb: str, files: list[tuple[str, bytes]]) -> httpx.Response:
    return client.post(f"/v1/knowledge-bases/{kb}/documents", files=[("files", f) for f in files])


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
def llm_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def _llm(srv: ScriptedServer) -> Text2TextLLM:
    return Text2TextLLM(base_url=srv.url("/v1/chat/completions"), model_name="m",
                        client_param=ClientParam(use_http=True, retries=0))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, llm_server: ScriptedServer,
           cross_encoder_dir: Path) -> Iterator[Served]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("data"), upload={"max_file_mb": 1},
                             chain={"reranker": str(cross_encoder_dir)})
    service = KnowledgeService(settings)
    alice, bob = service.keys.create(ALICE, admin=True), service.keys.create(BOB, admin=True)
    with AppServer(create_app(service, _llm(llm_server)), host="127.0.0.1", port=0) as server:
        out = Served(server, service, alice, bob, cross_encoder_dir)
        with out.client(alice) as client:
            assert client.post("/v1/knowledge-bases", json={"name": KB}).status_code == 201
            response = upload(client, KB, [("facts.txt", FACTS.encode())])
            assert response.status_code == 202, response.text
            assert wait_job(client, KB, response.json())["status"] == "done"
        try:
            yield out
        finally:
            service.close()


@pytest.fixture(scope="module")
def local_served(tmp_path_factory: pytest.TempPathFactory, llm_server: ScriptedServer) -> Iterator[AppServer]:
    """No API key and no reranker configured."""
    service = KnowledgeService(load_settings(data_dir=tmp_path_factory.mktemp("local")))
    with AppServer(create_app(service, _llm(llm_server)), host="127.0.0.1", port=0) as server:
        yield server
    service.close()


@pytest.fixture(scope="module")
def openai_client(served: Served) -> Iterator[Any]:
    from openai import OpenAI

    client = OpenAI(base_url=served.base_url + "/v1", api_key=served.alice, max_retries=0, timeout=TIMEOUT)
    yield client
    client.close()


# -- the official openai client -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("chain", ["", "/parallel", "/hybrid", "/multi-query"])
def test_openai_chat_answers_through_the_knowledge_base(openai_client: Any, chain: str) -> None:
    completion = openai_client.chat.completions.create(
        model=KB + chain, messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    )
    answer = completion.choices[0].message.content
    assert completion.model == KB + chain and completion.choices[0].finish_reason == "stop"
    assert "molten salt" in answer and QUESTION in answer  # the echoed prompt holds the passage and question
    sources = (completion.model_extra or {})["sources"]
    assert sources and {s["source"] for s in sources} == {"facts.txt"}
    assert any("molten salt" in s["text"] for s in sources)
    assert completion.usage is not None and completion.usage.completion_tokens > 0


@pytest.mark.slow
@pytest.mark.parametrize(("question", "chinese"), [(QUESTION, False), ("Zorblax 反应堆用什么燃料？", True)])
def test_the_answer_instruction_is_in_the_questions_language(openai_client: Any, question: str,
                                                              chinese: bool) -> None:
    """The question comes before the passages and again after the instruction, labelled in its language."""
    from mx_rag.app.answers import ANSWER_PROMPT, ANSWER_PROMPT_ZH

    completion = openai_client.chat.completions.create(model=KB, messages=[{"role": "user", "content": question}])
    prompt = completion.choices[0].message.content.removeprefix("echo: ")  # the scripted LLM echoes the prompt
    instruction, label = (ANSWER_PROMPT_ZH, "问题：") if chinese else (ANSWER_PROMPT, "Question: ")
    assert (ANSWER_PROMPT_ZH in prompt) is chinese and (ANSWER_PROMPT in prompt) is not chinese
    assert prompt.startswith(label + question + "\n\n") and prompt.endswith(instruction + "\n\n" + label + question)
    assert "molten salt" in prompt[len(label + question):prompt.index(instruction)]  # the passages in between


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_corag_chain_answers_after_its_retrieval_steps(openai_client: Any, llm_server: ScriptedServer,
                                                       stream: bool) -> None:
    """``kb/corag``: a sub-query, its retrieval and sub-answer, the early final answer, then the
    final answer; the sources are what the steps retrieved."""
    from mx_rag.testing import Reply

    llm_server.enqueue(Reply.chat("SubQuery: What does the Zorblax reactor run on?"), Reply.chat("molten salt"),
                       Reply.chat("Final Answer: molten salt"), Reply.chat("The reactor runs on molten salt."))
    messages = [{"role": "user", "content": QUESTION}]
    if stream:
        chunks = list(openai_client.chat.completions.create(model=KB + "/corag", messages=messages, stream=True))
        answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        sources = (chunks[-1].model_extra or {})["sources"]
    else:
        completion = openai_client.chat.completions.create(model=KB + "/corag", messages=messages)
        answer, sources = completion.choices[0].message.content, (completion.model_extra or {})["sources"]
    assert answer == "The reactor runs on molten salt."
    assert sources and {s["source"] for s in sources} == {"facts.txt"}
    assert any("molten salt" in s["text"] for s in sources)


@pytest.mark.slow
def test_graph_chain_on_a_knowledge_base_without_a_graph_is_400(served: Served) -> None:
    with served.client(served.alice) as client:
        response = client.post("/v1/chat/completions",
                               json={"model": KB + "/graph", "messages": [{"role": "user", "content": QUESTION}]})
    assert response.status_code == 400, response.text
    assert "keeps no graph" in response.json()["error"]["message"]


@pytest.mark.slow
def test_openai_streaming_concatenates_to_the_answer_and_ends_with_sources(openai_client: Any) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    whole = openai_client.chat.completions.create(model=KB, messages=messages)
    chunks = list(openai_client.chat.completions.create(model=KB, messages=messages, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(chunks) > 3 and text == whole.choices[0].message.content
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert (last.model_extra or {})["sources"] == (whole.model_extra or {})["sources"]
    assert all("sources" not in (c.model_extra or {}) for c in chunks[:-1])


@pytest.mark.slow
def test_openai_models_list_shows_the_callers_knowledge_bases(served: Served, openai_client: Any) -> None:
    from openai import OpenAI

    assert KB in [m.id for m in openai_client.models.list()]
    with OpenAI(base_url=served.base_url + "/v1", api_key=served.bob, max_retries=0) as bobs:
        assert KB not in [m.id for m in bobs.models.list()]


@pytest.mark.slow
def test_openai_embeddings_are_the_servers_model(served: Served, openai_client: Any) -> None:
    texts = ["molten salt reactor", "east gate"]
    result = openai_client.embeddings.create(model="default", input=texts, encoding_format="float")
    vectors = [d.embedding for d in sorted(result.data, key=lambda d: d.index)]
    expected = served.service.embedding.embed_documents(texts)
    assert len(vectors) == 2 and all(len(v) == served.service.embedding.dimension for v in vectors)
    assert all(v == pytest.approx(e, abs=1e-5) for v, e in zip(vectors, expected, strict=True))


@pytest.mark.slow
def test_openai_embeddings_with_the_clients_default_encoding(served: Served, openai_client: Any) -> None:
    """openai's client asks for ``encoding_format="base64"`` unless told otherwise, and decodes it."""
    result = openai_client.embeddings.create(model="default", input="molten salt reactor")
    expected = served.service.embedding.embed_documents(["molten salt reactor"])[0]
    assert result.data[0].embedding == pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
def test_usage_is_what_the_llm_server_reported(openai_client: Any) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    completion = openai_client.chat.completions.create(model=KB, messages=messages)
    usage = completion.usage
    # the scripted LLM counts every word it was sent (passages, instruction, question) and each piece it sent
    assert usage.prompt_tokens > len(QUESTION.split()) + 10
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    stream = openai_client.chat.completions.create(model=KB, messages=messages, stream=True)
    last = [chunk for chunk in stream][-1]
    assert last.usage is not None and last.usage.prompt_tokens == usage.prompt_tokens
    assert last.usage.completion_tokens == usage.completion_tokens


# -- LangChain's ChatOpenAI ---------------------------------------------------------------------------


@pytest.mark.slow
def test_langchain_chat_openai_invoke_and_stream(served: Served) -> None:
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=served.base_url + "/v1", api_key=served.alice, model=KB,  # type: ignore[arg-type]
                      max_retries=0, timeout=TIMEOUT)
    answer = chat.invoke(QUESTION)
    assert isinstance(answer.content, str) and "molten salt" in answer.content
    streamed = "".join(str(chunk.content) for chunk in chat.stream(QUESTION))
    assert streamed == answer.content


# -- TEI /embed and /rerank ---------------------------------------------------------------------------


@pytest.mark.slow
def test_tei_embedding_client_against_embed(served: Served) -> None:
    from mx_rag.embedding.service import TEIEmbedding

    texts = [f"passage number {i} about reactors" for i in range(5)]
    param = ClientParam(use_http=True, api_key=served.alice, retries=0, timeout=int(TIMEOUT))
    with TEIEmbedding(served.base_url + "/embed", client_param=param, batch_size=2) as emb:
        vectors = emb.embed_documents(texts)
        query = emb.embed_query("reactors")
    expected = served.service.embedding.embed_documents(texts)
    assert len(vectors) == 5 and all(v == pytest.approx(e, abs=1e-5) for v, e in zip(vectors, expected, strict=True))
    assert math.isclose(sum(x * x for x in query), 1.0, abs_tol=1e-4)


@pytest.mark.slow
def test_embed_wire_format_and_limits(served: Served) -> None:
    with served.client(served.alice) as client:
        one = client.post("/embed", json={"inputs": "a single text"})
        assert one.status_code == 200 and len(one.json()) == 1 and len(one.json()[0]) == 384
        both = client.post("/embed", json={"inputs": ["a", "b"], "truncate": True, "normalize": True})
        assert both.status_code == 200 and len(both.json()) == 2
        for body, status in [({"inputs": []}, 400), ({"inputs": [""]}, 400), ({"inputs": ["x"] * 1025}, 400),
                             ({"inputs": "x", "normalize": False}, 400), ({"inputs": 3}, 422), ({}, 422)]:
            response = client.post("/embed", json=body)
            assert response.status_code == status, (body, response.text)
            assert set(response.json()["error"]) == {"code", "message"}


@pytest.mark.slow
def test_tei_reranker_client_against_rerank(served: Served) -> None:
    from mx_rag.reranker.local import LocalReranker
    from mx_rag.reranker.service import TEIReranker

    query = "what does the reactor run on?"
    texts = ["The reactor runs on molten salt.", "Bananas are yellow.", "Sign in at the east gate.", "Salt water."]
    param = ClientParam(use_http=True, api_key=served.alice, retries=0, timeout=int(TIMEOUT))
    reranker = TEIReranker(served.base_url + "/rerank", k=2, client_param=param)
    scores = reranker.rerank(query, texts, batch_size=3)
    logits = LocalReranker(str(served.reranker_dir)).rerank(query, texts)
    assert list(scores) == pytest.approx([1 / (1 + math.exp(-x)) for x in logits], abs=1e-5)
    best = reranker.rerank_top_k(texts, scores)
    assert best == [texts[i] for i in sorted(range(4), key=lambda i: -scores[i])[:2]]


@pytest.mark.slow
def test_rerank_wire_format(served: Served) -> None:
    texts = ["one text", "another text", "a third"]
    with served.client(served.alice) as client:
        plain = client.post("/rerank", json={"query": "text", "texts": texts})
        raw = client.post("/rerank", json={"query": "text", "texts": texts, "raw_scores": True, "return_text": True})
        assert plain.status_code == 200 and raw.status_code == 200
        items, raw_items = plain.json(), raw.json()
        assert sorted(i["index"] for i in items) == [0, 1, 2] and set(items[0]) == {"index", "score"}
        assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
        assert all(0 < i["score"] < 1 for i in items)
        by_index = {i["index"]: i for i in raw_items}
        assert all(by_index[i]["text"] == texts[i] for i in range(3))
        assert all(math.isclose(1 / (1 + math.exp(-by_index[i["index"]]["score"])), i["score"], abs_tol=1e-6)
                   for i in items)
        for body, status in [({"query": "", "texts": ["a"]}, 400), ({"query": "q", "texts": []}, 400),
                             ({"query": "q", "texts": ["a", ""]}, 400), ({"query": "q"}, 422)]:
            response = client.post("/rerank", json=body)
            assert response.status_code == status and "error" in response.json(), (body, response.text)


def test_rerank_without_a_reranker_model_is_503(local_served: AppServer) -> None:
    response = httpx.post(local_served.base_url + "/rerank", json={"query": "q", "texts": ["a"]}, timeout=TIMEOUT)
    error = response.json()["error"]
    assert response.status_code == 503 and error["code"] == "no_reranker" and "[chain] reranker" in error["message"]


@pytest.mark.slow
def test_rerank_with_an_unloadable_reranker_model_is_503(tmp_path: Path, llm_server: ScriptedServer) -> None:
    empty = tmp_path / "reranker"
    empty.mkdir()  # a directory without a model
    service = KnowledgeService(load_settings(data_dir=tmp_path / "data", chain={"reranker": str(empty)}))
    try:
        with AppServer(create_app(service, _llm(llm_server)), host="127.0.0.1", port=0) as server:
            response = httpx.post(server.base_url + "/rerank", json={"query": "q", "texts": ["a"]}, timeout=TIMEOUT)
    finally:
        service.close()
    error = response.json()["error"]
    assert response.status_code == 503 and error["code"] == "no_reranker" and "could not be loaded" in error["message"]


def test_local_mode_needs_no_key(local_served: AppServer) -> None:
    response = httpx.get(local_served.base_url + "/v1/models", timeout=TIMEOUT)
    assert response.status_code == 200 and response.json()["object"] == "list"


# -- CoRAG's retrieval client -------------------------------------------------------------------------


@pytest.mark.slow
def test_corag_retrieval_client_against_retrieve(served: Served) -> None:
    from mx_rag.corag.retrieval_api import RetrievalApiClient, as_document_source

    url = f"{served.base_url}/v1/knowledge-bases/{KB}/retrieve"
    param = ClientParam(use_http=True, api_key=served.alice, retries=0, timeout=int(TIMEOUT))
    source = as_document_source(url, param, 2)  # what CoRagEvaluator builds from retrieve_api_url
    assert isinstance(source, RetrievalApiClient)
    with source:
        docs = source.retrieve(QUESTION, top_k=2)
    assert 1 <= len(docs) <= 2 and any("molten salt" in d.text for d in docs) and all(d.id for d in docs)
    with RetrievalApiClient(url, client_param=ClientParam(use_http=True, api_key=served.bob, retries=0)) as bobs:
        from mx_rag.retrievers.sources import RetrievalError

        with pytest.raises(RetrievalError, match="retrieval API answered HTTP 404"):
            bobs.retrieve(QUESTION)  # a failed retrieval is an error, not an empty result


# -- API keys -----------------------------------------------------------------------------------------


def _kb_routes(kb: str, job_id: str, document_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    chat = {"model": kb, "messages": [{"role": "user", "content": QUESTION}]}
    return [
        ("POST", "/v1/chat/completions", {"json": chat}),
        ("POST", "/v1/chat/completions", {"json": {**chat, "stream": True}}),
        ("POST", f"/v1/knowledge-bases/{kb}/retrieve", {"json": {"query": QUESTION}}),
        ("GET", f"/v1/knowledge-bases/{kb}", {}),
        ("GET", f"/v1/knowledge-bases/{kb}/documents", {}),
        ("POST", f"/v1/knowledge-bases/{kb}/documents", {"files": [("files", ("more.txt", b"bob was here"))]}),
        ("GET", f"/v1/knowledge-bases/{kb}/jobs/{job_id}", {}),
        ("DELETE", f"/v1/knowledge-bases/{kb}/documents/{document_id}", {}),
        ("DELETE", f"/v1/knowledge-bases/{kb}", {}),
    ]


def _alice_state(served: Served) -> tuple[Any, list[str]]:
    with served.client(served.alice) as client:
        shown = client.get(f"/v1/knowledge-bases/{KB}").json()
    return shown, sorted(p.name for p in served.folder(KB).iterdir())


@pytest.mark.slow
def test_every_route_needs_a_key(served: Served) -> None:
    routes = [
        *_kb_routes(KB, "0" * 32, 1),
        ("GET", "/v1/models", {}), ("POST", "/v1/embeddings", {"json": {"input": "x"}}),
        ("GET", "/v1/knowledge-bases", {}), ("POST", "/v1/knowledge-bases", {"json": {"name": "intruder"}}),
        ("POST", "/embed", {"json": {"inputs": "x"}}), ("POST", "/rerank", {"json": {"query": "q", "texts": ["a"]}}),
    ]
    before = _alice_state(served)
    for headers in ({}, {"Authorization": "Bearer mxr_not-a-key"}, {"Authorization": f"Basic {served.alice}"}):
        with httpx.Client(base_url=served.base_url, headers=headers, timeout=TIMEOUT) as client:
            for method, path, kwargs in routes:
                response = client.request(method, path, **kwargs)
                assert response.status_code == 401, (method, path, headers, response.text)
                assert response.json()["error"]["code"] == "unauthorized"
    assert _alice_state(served) == before
    with served.client(None) as client:
        assert all(client.get(p).status_code == 200 for p in ("/healthz", "/readyz", "/metrics"))


@pytest.mark.slow
def test_another_users_key_finds_nothing_and_changes_nothing(served: Served) -> None:
    with served.client(served.alice) as alice:
        documents = alice.get(f"/v1/knowledge-bases/{KB}/documents").json()["documents"]
        job = upload(alice, KB, [("extra.txt", b"Bananas are yellow when ripe.")]).json()
        assert wait_job(alice, KB, job)["status"] == "done"
    before = _alice_state(served)
    document_id = documents[0]["id"]
    with served.client(served.bob) as bob:
        for (method, path, kwargs), (_, ghost_path, ghost_kwargs) in zip(
            _kb_routes(KB, job["id"], document_id), _kb_routes("no-such-kb", job["id"], document_id), strict=True
        ):
            response = bob.request(method, path, **kwargs)
            assert response.status_code == 404, (method, path, response.text)
            ghost = bob.request(method, ghost_path, **ghost_kwargs)  # a name nobody holds: the same answer
            assert ghost.status_code == 404
            assert response.json()["error"]["message"].replace(KB, "?") == \
                ghost.json()["error"]["message"].replace("no-such-kb", "?"), (method, path)
    assert _alice_state(served) == before
    assert not (served.service.uploads / BOB).exists() or not any((served.service.uploads / BOB).rglob("*"))


# -- uploads ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_upload_pdf_and_docx_then_ask_with_page_sources(served: Served, openai_client: Any) -> None:
    with served.client(served.alice) as client:
        assert client.post("/v1/knowledge-bases", json={"name": "papers"}).status_code == 201
        response = upload(client, "papers", [(PDF.name, PDF.read_bytes()), (DOCX.name, DOCX.read_bytes())])
        assert response.status_code == 202, response.text
        assert response.json()["total"] == 2
        job = wait_job(client, "papers", response.json())
        assert job["status"] == "done" and job["processed"] == 2
        assert job["results"] == {PDF.name: "stored", DOCX.name: "stored"}
        shown = client.get("/v1/knowledge-bases/papers").json()
    assert {d["name"] for d in shown["documents"]} == {PDF.name, DOCX.name}
    assert all(d["chunks"] > 0 for d in shown["documents"]) and shown["chunks"] > 2
    assert sorted(p.name for p in served.folder("papers").iterdir()) == sorted([PDF.name, DOCX.name])
    completion = openai_client.chat.completions.create(
        model="papers", messages=[{"role": "user", "content": "What is LayoutParser, the unified toolkit for "
                                   "deep learning based document image analysis?"}])
    sources = (completion.model_extra or {})["sources"]
    pdf_sources = [s for s in sources if s["source"] == PDF.name]
    assert pdf_sources and all(s["page"] in (1, 2) for s in pdf_sources)
    assert "LayoutParser" in completion.choices[0].message.content


MALFORMED = ("malformed multipart", "no boundary")


def _refusals() -> list[tuple[str, dict[str, Any]]]:
    oversize = b"x" * (1024 * 1024 + 1)  # upload.max_file_mb = 1
    return [
        ("malformed multipart", {"content": b"--nope\r\ngarbage", "headers": {
            "Content-Type": "multipart/form-data; boundary=xyz"}}),
        ("no boundary", {"content": b"abc", "headers": {"Content-Type": "multipart/form-data"}}),
        ("not multipart", {"json": {"files": ["a.txt"]}}),
        ("no files field", {"files": [("other", ("a.txt", b"text"))]}),
        ("oversize", {"files": [("files", ("big.txt", oversize))]}),
        ("wrong type", {"files": [("files", ("tool.exe", b"MZ\x90\x00"))]}),
        ("empty file", {"files": [("files", ("empty.txt", b""))]}),
        ("path traversal", {"files": [("files", ("../../x.txt", b"escaped"))]}),
        ("backslash traversal", {"files": [("files", ("..\\..\\x.txt", b"escaped"))]}),
        ("good then bad", {"files": [("files", ("good.txt", b"fine")), ("files", ("bad.exe", b"MZ"))]}),
        ("a name twice", {"files": [("files", ("twice.txt", b"one")), ("files", ("twice.txt", b"two"))]}),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("case", [name for name, _ in _refusals()])
def test_bad_uploads_are_refused_and_store_nothing(served: Served, case: str) -> None:
    kwargs = dict(_refusals())[case]
    kb = "refusals"
    with served.client(served.alice) as client:
        if client.get(f"/v1/knowledge-bases/{kb}").status_code == 404:
            assert client.post("/v1/knowledge-bases", json={"name": kb}).status_code == 201
        response = client.post(f"/v1/knowledge-bases/{kb}/documents", **kwargs)
        assert 400 <= response.status_code < 500, (case, response.status_code, response.text)
        assert set(response.json()["error"]) == {"code", "message"}
        assert client.get(f"/v1/knowledge-bases/{kb}/documents").json()["documents"] == []
    folder = served.folder(kb)
    assert not folder.exists() or list(folder.iterdir()) == []
    root = served.service.root
    assert not any(p.name == "x.txt" for p in root.rglob("*")) and not (root.parent / "x.txt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_multipart_answers_in_the_error_shape(served: Served, case: str) -> None:
    with served.client(served.alice) as client:
        response = client.post(f"/v1/knowledge-bases/{KB}/documents", **dict(_refusals())[case])
    assert response.status_code == 400 and set(response.json()["error"]) == {"code", "message"}


@pytest.mark.slow
def test_unknown_routes_answer_in_the_error_shape(served: Served) -> None:
    with served.client(served.alice) as client:
        unknown, method = client.get("/v1/no-such-route"), client.put("/healthz")
    assert (unknown.status_code, method.status_code) == (404, 405)
    assert all(set(r.json()["error"]) == {"code", "message"} for r in (unknown, method))


# -- health and metrics -------------------------------------------------------------------------------


@pytest.mark.slow
def test_health_ready_and_metrics(served: Served) -> None:
    with served.client(None) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}
        assert client.get("/v1/models").status_code == 401  # a counted request
        text = client.get("/metrics").text
    assert "mxrag_requests_total" in text
    assert 'route="/v1/models"' in text and 'status="401"' in text
    assert "mxrag_request_seconds_bucket" in text


@pytest.mark.slow
def test_metrics_time_the_stages_of_uploads_and_questions(served: Served, openai_client: Any) -> None:
    openai_client.chat.completions.create(model=KB + "/hybrid", messages=[{"role": "user", "content": QUESTION}])
    with served.client(None) as client:
        text = client.get("/metrics").text
    for stage in ("load", "split", "embed", "write", "query.embed", "query.vector_search", "query.keyword_search",
                  "query.fusion", "query.rerank", "query.prompt", "query.llm"):
        assert f'mxrag_stage_seconds_count{{stage="{stage}"}}' in text, stage


@pytest.mark.slow
def test_deleting_a_document_keeps_a_users_own_file(served: Served, tmp_path: Path) -> None:
    """A document ingested from the user's folder (as ``mxrag ingest --kb`` does) is deleted from the
    knowledge base; the user's file stays. An upload's copy is removed."""
    from mx_rag.app.users import Principal
    from mx_rag.knowledge import KnowledgeDB
    from mx_rag.knowledge.ingest import ingest_files

    service = served.service
    own = tmp_path / "notes.txt"
    own.write_text("The spare keys hang in the blue cabinet.\n", encoding="utf-8")
    kb = KnowledgeDB(knowledge_store=service.registry, chunk_store=service.chunks, vector_store=service.vectors,
                     knowledge_name=KB, white_paths=[str(tmp_path)], user_id=ALICE)
    assert not ingest_files(kb, [str(own)], service.loader, service.embedding.embed_documents).failed
    alice = Principal(ALICE, admin=True)
    row = next(r for r in service.open(alice, KB).get_all_documents() if r.document_name == "notes.txt")
    with served.client(served.alice) as client:
        assert client.delete(f"/v1/knowledge-bases/{KB}/documents/{row.document_id}").status_code == 200
        assert "notes.txt" not in {d["name"] for d in client.get(f"/v1/knowledge-bases/{KB}/documents").json()[
            "documents"]}
    assert own.read_text(encoding="utf-8").startswith("The spare keys")


def test_a_data_folder_opens_with_the_embedding_model_that_built_it(tmp_path: Path) -> None:
    """A folder built with MiniLM (the default before e5) keeps answering with it when no model is
    configured; naming another model for it is refused, and a new folder gets the default."""
    from mx_rag.app.users import Principal
    from mx_rag.errors import KnowledgeError

    alice = Principal(ALICE, admin=True)
    old = KnowledgeService(load_settings(data_dir=tmp_path / "old", embedding={"model": "all-MiniLM-L6-v2"}))
    old.create(alice, "notes")
    old.close()
    reopened = KnowledgeService(load_settings(data_dir=tmp_path / "old"))
    assert reopened.embedding_model == "all-MiniLM-L6-v2"
    assert reopened.describe(alice, "notes")["documents"] == []
    reopened.close()
    other = KnowledgeService(load_settings(data_dir=tmp_path / "old", embedding={"model": "multilingual-e5-small"}))
    with pytest.raises(KnowledgeError, match="built with the embedding model 'all-minilm-l6-v2'"):
        other.open(alice, "notes")
    other.close()
    new = KnowledgeService(load_settings(data_dir=tmp_path / "new"))
    assert new.embedding_model == "multilingual-e5-small"
    new.close()
