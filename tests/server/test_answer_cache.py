# SPDX-License-Identifier: Apache-2.0
"""The server's ``[cache]``: a real uvicorn server (local mode, MiniLM, FAISS + SQLite) answering with the
scripted LLM; a repeated question is answered from the cache and marked, a new document clears it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mx_rag.app.users import Principal
from mx_rag.chain import SingleText2TextChain
from mx_rag.llm import Text2TextLLM
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam

pytestmark = pytest.mark.slow

KB = "handbook"
FACTS = "The Zorblax reactor in Building 7 runs on molten salt and was commissioned in 1987.\n"
QUESTION = {"model": KB, "messages": [{"role": "user", "content": "What does the Zorblax reactor run on?"}]}


def _upload(client: httpx.Client, name: str, text: str) -> None:
    response = client.post(f"/v1/knowledge-bases/{KB}/documents", files=[("files", (name, text.encode()))])
    assert response.status_code == 202, response.text
    job = response.json()
    deadline = time.monotonic() + 120
    while job["status"] not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.1)
        job = client.get(f"/v1/knowledge-bases/{KB}/jobs/{job['id']}").json()
    assert job["status"] == "done", job


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedServer) -> Iterator[tuple[str, KnowledgeService]]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("data"), cache={"enabled": True})
    service = KnowledgeService(settings)
    chat_llm = Text2TextLLM(base_url=llm.url("/v1/chat/completions"), model_name="m",
                            client_param=ClientParam(use_http=True, retries=0))
    with AppServer(create_app(service, chat_llm), host="127.0.0.1", port=0) as server:
        with httpx.Client(base_url=server.base_url, timeout=120) as client:
            assert client.post("/v1/knowledge-bases", json={"name": KB}).status_code == 201
            _upload(client, "facts.txt", FACTS)
        try:
            yield server.base_url, service
        finally:
            service.close()


def _ask(base_url: str, **extra: Any) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/chat/completions", json={**QUESTION, **extra}, timeout=120)


def test_a_repeated_question_is_answered_from_the_cache_until_the_documents_change(
        served: tuple[str, KnowledgeService], llm: ScriptedServer) -> None:
    base_url, _ = served
    llm.reset()
    first = _ask(base_url).json()
    assert "cached" not in first and len(llm.requests) == 1
    second = _ask(base_url).json()
    assert second["cached"] is True and len(llm.requests) == 1
    assert second["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
    assert second["sources"] == first["sources"]
    streamed = _ask(base_url, stream=True).text
    assert '"cached": true' in streamed and len(llm.requests) == 1
    with httpx.Client(base_url=base_url, timeout=120) as client:
        _upload(client, "more.txt", "Building 7 also has a cafeteria on its ground floor.\n")
    third = _ask(base_url).json()
    assert "cached" not in third and len(llm.requests) == 2
    conversation = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                 QUESTION["messages"][0]]}
    assert "cached" not in _ask(base_url, **conversation).json()  # a conversation is never cached


def test_each_user_has_its_own_cache(served: tuple[str, KnowledgeService]) -> None:
    from mx_rag.app.answer_cache import AnswerCaches

    _, service = served
    caches = AnswerCaches(service)
    me = service.local_principal()
    other = Principal(user_id="someone_else", admin=True)
    service.registry.add_usr_id_to_knowledge(KB, other.user_id, "member")  # the same knowledge base
    llm = Text2TextLLM(base_url="http://127.0.0.1:9/v1/chat/completions", model_name="m",
                       client_param=ClientParam(use_http=True))
    chain = SingleText2TextChain(llm=llm, retriever=service.retriever(me, KB))
    mine = caches.wrap(me, KB, "single", None, chain)
    theirs = caches.wrap(other, KB, "single", None, chain)
    assert mine.cache.cache_name != theirs.cache.cache_name
    assert caches.wrap(me, KB, "single", 3, chain).cache.cache_name != mine.cache.cache_name  # k is part of it
