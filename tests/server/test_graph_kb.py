# SPDX-License-Identifier: Apache-2.0
"""Graph knowledge bases through ``mxrag serve``: created with ``graph: true``, their graph built
by the upload job with the offline (spaCy) extractor, answered by the ``graph`` chain with the
entities around the answer, and cut when a document is deleted. A real uvicorn server over a real
``KnowledgeService`` (SQLite + FAISS, MiniLM), the scripted LLM (it echoes the prompt)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mx_rag.app.users import Principal
from mx_rag.llm import Text2TextLLM
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import LOCAL_USER, KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam
from tests.server.jobs import wait_job
from tests.server.test_server import TIMEOUT, upload

KB = "people"
TEXT = (
    "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.\n\n"
    "Charles Babbage was born in London and designed the Difference Engine.\n\n"
    "The Analytical Engine was never completed during the lifetime of Charles Babbage.\n"
)
QUESTION = "Who worked with Charles Babbage on the Analytical Engine?"


@pytest.fixture(scope="module")
def graph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AppServer, KnowledgeService]]:
    with ScriptedServer() as llm_server:
        llm = Text2TextLLM(base_url=llm_server.url("/v1/chat/completions"), model_name="m",
                           client_param=ClientParam(use_http=True, retries=0))
        service = KnowledgeService(load_settings(data_dir=tmp_path_factory.mktemp("graph")), llm)
        with AppServer(create_app(service, llm), host="127.0.0.1", port=0) as server:
            with httpx.Client(base_url=server.base_url, timeout=TIMEOUT) as client:
                created = client.post("/v1/knowledge-bases", json={"name": KB, "graph": True})
                assert created.status_code == 201 and created.json()["graph"] is True, created.text
                job = wait_job(client, KB, upload(client, KB, [("babbage.txt", TEXT.encode())]).json())
                assert job["status"] == "done" and job["results"] == {"babbage.txt": "stored"}, job
            try:
                yield server, service
            finally:
                service.close()


def _ask(server: AppServer, stream: bool) -> dict[str, Any]:
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url + "/v1", api_key="local", max_retries=0, timeout=TIMEOUT)
    messages: Any = [{"role": "user", "content": QUESTION}]
    if not stream:
        reply = client.chat.completions.create(model=KB + "/graph", messages=messages)
        return {"answer": reply.choices[0].message.content, **(reply.model_extra or {})}
    chunks = list(client.chat.completions.create(model=KB + "/graph", messages=messages, stream=True))
    return {"answer": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
            **(chunks[-1].model_extra or {})}


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_graph_chain_answers_with_sources_and_the_entities_around_them(
    graph_server: tuple[AppServer, KnowledgeService], stream: bool
) -> None:
    server, _ = graph_server
    reply = _ask(server, stream)
    assert "Ada Lovelace" in reply["answer"]  # the echoed prompt holds the retrieved passage
    sources = reply["sources"]
    assert sources and {s["source"] for s in sources} == {"babbage.txt"}
    graph = reply["graph"]
    labels = {n["label"].lower() for n in graph["nodes"]}
    assert "charles babbage" in labels, labels
    for node in graph["nodes"]:
        assert all(0 <= i < len(sources) for i in node["passages"])
    assert any(node["passages"] for node in graph["nodes"])  # entities are tied to the passages shown
    ids = {n["id"] for n in graph["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])


@pytest.mark.slow
def test_a_plain_chain_has_no_graph_field_and_deleting_cuts_the_graph(
    graph_server: tuple[AppServer, KnowledgeService]
) -> None:
    server, service = graph_server
    with httpx.Client(base_url=server.base_url, timeout=TIMEOUT) as client:
        asked = {"model": KB, "messages": [{"role": "user", "content": QUESTION}]}
        plain = client.post("/v1/chat/completions", json=asked)
        assert plain.status_code == 200 and "graph" not in plain.json()
        listed = client.get("/v1/knowledge-bases").json()["knowledge_bases"]
        assert [(kb["name"], kb["graph"]) for kb in listed] == [(KB, True)]
        pipeline = service.graph(Principal(LOCAL_USER, admin=True), KB)
        assert len(pipeline.documents()) == 1 and pipeline.graph.count_nodes() > 0
        [document] = client.get(f"/v1/knowledge-bases/{KB}/documents").json()["documents"]
        assert client.delete(f"/v1/knowledge-bases/{KB}/documents/{document['id']}").status_code == 200
        assert pipeline.documents() == [] and pipeline.graph.count_nodes() == 0


def test_a_graph_knowledge_base_is_refused_before_it_is_made_without_the_graph_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without spaCy (hidden from imports here), creating a graph knowledge base answers 501 with
    the extra to install and makes nothing; a plain one is still made, and so is a graph one when
    the LLM extracts the graph (spaCy is then not needed)."""
    monkeypatch.setitem(sys.modules, "spacy", None)  # "import spacy" fails, find_spec finds nothing
    service = KnowledgeService(load_settings(data_dir=tmp_path / "offline"))
    try:
        with AppServer(create_app(service, None), host="127.0.0.1", port=0) as server, \
                httpx.Client(base_url=server.base_url, timeout=TIMEOUT) as client:
            refused = client.post("/v1/knowledge-bases", json={"name": "g", "graph": True})
            assert refused.status_code == 501, refused.text
            assert refused.json()["error"] == {
                "code": "not_installed",
                "message": "this feature needs the Python module 'spacy', which is not installed: "
                           'run pip install "mxrag[graph]"'}
            assert client.post("/v1/knowledge-bases", json={"name": "plain"}).status_code == 201
            listed = client.get("/v1/knowledge-bases").json()
        assert [kb["name"] for kb in listed["knowledge_bases"]] == ["plain"]
        assert not service.is_graph(Principal(LOCAL_USER, admin=True), "g")
    finally:
        service.close()
    by_llm = KnowledgeService(load_settings(data_dir=tmp_path / "llm", graph={"extractor": "llm"}))
    try:
        assert by_llm.create(Principal(LOCAL_USER, admin=True), "g", graph=True)["graph"] is True
    finally:
        by_llm.close()
