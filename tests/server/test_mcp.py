# SPDX-License-Identifier: Apache-2.0
"""The MCP tools end to end, with the MCP SDK's own client: over streamable HTTP against
``create_app`` served by a real uvicorn (``AppServer``) on 127.0.0.1, and over stdio against
``python -m mx_rag.cli mcp``. The knowledge bases use the real MiniLM embedding that
``KnowledgeService`` builds; the LLM is a ``ScriptedServer`` echoing its prompt."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from mx_rag.app.users import Principal
from mx_rag.server.app import create_app, server_llm
from mx_rag.server.runner import AppServer
from mx_rag.server.service import LOCAL_USER, KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer

pytestmark = pytest.mark.slow  # the MiniLM embedding, in this process and in the stdio server's

HANDBOOK = b"# Storage\n\nVectors are kept in faiss.index. Chunks and the registry are kept in sql.db.\n"
DESK = b"The coffee machine is on the third floor, next to the library.\n"
TOOLS = {"list_knowledge_bases", "search", "ask", "add_document"}


@dataclass
class World:
    data: Path
    service: KnowledgeService
    llm: ScriptedServer
    url: str  # the MCP endpoint
    alice: str  # owner (admin) of handbook and scratch
    bob: str  # belongs to no knowledge base
    carol: str  # a member (not admin) of scratch


def _ingest(service: KnowledgeService, who: Principal, kb: str, name: str, body: bytes) -> None:
    staged = service.save_upload(who, kb, name, io.BytesIO(body))
    job = service.start_ingest(who, kb, {name: staged})
    deadline = time.monotonic() + 120
    while (job := service.job(who, kb, job.id)).status not in ("done", "failed"):
        assert time.monotonic() < deadline, f"ingestion job {job.id} did not finish"
        time.sleep(0.05)
    assert job.status == "done" and job.results == {name: "stored"}, job


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data = tmp_path_factory.mktemp("mcp") / "data"
    with ScriptedServer() as llm:
        settings = load_settings(data_dir=data)
        service = KnowledgeService(settings)
        alice, carol = Principal("alice_01", False), Principal("carol_01", False)
        service.create(alice, "handbook")
        service.create(alice, "scratch")
        service.registry.add_usr_id_to_knowledge("scratch", carol.user_id, "member")
        service.create(service.local_principal(), "desk")
        _ingest(service, alice, "handbook", "storage.md", HANDBOOK)
        _ingest(service, service.local_principal(), "desk", "office.txt", DESK)
        keys = {user: service.keys.create(user, admin=user != "carol_01")  # carol's key only reads
                for user in ("alice_01", "bob_0001", "carol_01")}
        app = create_app(service, server_llm(settings, llm.url("/v1")))
        try:
            with AppServer(app) as server:
                yield World(data, service, llm, server.base_url + "/mcp",
                            keys["alice_01"], keys["bob_0001"], keys["carol_01"])
        finally:
            service.close()


@asynccontextmanager
async def _http_client(url: str, key: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as client):
        yield client


def _calls(url: str, key: str | None, calls: list[tuple[str, dict[str, Any]]],
           mode: str = "auto") -> list[CallToolResult]:
    """Open one client for ``key`` and make ``calls`` (tool name, arguments) in order."""

    async def run() -> list[CallToolResult]:
        async with _http_client(url, key, mode) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    inner = getattr(exc, "exceptions", None)
    return [leaf for sub in inner for leaf in _leaves(sub)] if inner else [exc]


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _refused(result: CallToolResult, *needles: str) -> str:
    """The one-line error text of a failed call, which must contain every needle."""
    text = _text(result)
    assert result.is_error, f"expected a tool error, got {result.structured_content!r}"
    assert "\n" not in text and text.strip() == text, repr(text)
    for needle in needles:
        assert needle in text, text
    return text


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 single exchanges, and the handshake
def test_tools_list_and_search_for_the_owner(world: World, mode: str) -> None:
    async def run() -> tuple[Any, list[CallToolResult]]:
        async with _http_client(world.url, world.alice, mode) as client:
            tools = await client.list_tools()
            return tools, [await client.call_tool("list_knowledge_bases", {}),
                           await client.call_tool("search", {"kb": "handbook", "query": "Where are vectors kept?",
                                                             "k": 2})]

    tools, (listed, found) = anyio.run(run)
    assert {tool.name for tool in tools.tools} == TOOLS
    search = next(tool for tool in tools.tools if tool.name == "search")
    assert search.input_schema["properties"]["k"]["maximum"] == 100
    assert search.input_schema["required"] == ["kb", "query"]
    assert not listed.is_error and listed.structured_content == {"knowledge_bases": ["handbook", "scratch"]}
    assert not found.is_error, _text(found)
    chunks = found.structured_content["chunks"]
    assert 1 <= len(chunks) <= 2
    assert chunks[0]["source"] == "storage.md" and "faiss.index" in chunks[0]["text"]
    assert isinstance(chunks[0]["score"], float)


def test_ask_answers_through_the_chain_with_sources(world: World) -> None:
    before = len(world.llm.requests)
    [answer] = _calls(world.url, world.alice, [("ask", {"kb": "handbook", "question": "Where is sql.db used?"})])
    assert not answer.is_error, _text(answer)
    body = answer.structured_content
    assert "Where is sql.db used?" in body["answer"] and "faiss.index" in body["answer"]  # the echoed prompt
    assert body["sources"] and body["sources"][0]["source"] == "storage.md"
    sent = world.llm.requests[before:]
    assert len(sent) == 1 and sent[0].path.endswith("/chat/completions")
    assert "faiss.index" in str(sent[0].json["messages"])


def test_arguments_are_checked_with_one_line_errors(world: World) -> None:
    results = _calls(world.url, world.alice, [
        ("search", {"kb": "handbook", "query": "vectors", "k": 0}),
        ("search", {"kb": "handbook", "query": "vectors", "k": 101}),
        ("search", {"kb": "handbook", "query": "vectors", "k": "many"}),
        ("search", {"kb": "../etc", "query": "vectors"}),
        ("search", {"kb": "handbook", "query": "   "}),
        ("ask", {"kb": "handbook", "question": "x" * 10_001}),
        ("search", {"kb": "handbook"}),
        ("search", {"kb": "nothing", "query": "vectors"}),
        ("ask", {"kb": "handbook", "question": "Where?", "chain": "telepathy"}),
    ])
    _refused(results[0], "k must be an integer from 1 to 100, got 0")
    _refused(results[1], "k must be an integer from 1 to 100, got 101")
    _refused(results[2], "k", "valid integer")
    _refused(results[3], "knowledge base name '../etc'")
    _refused(results[4], "query must be a non-empty string")
    _refused(results[5], "question must be at most 10000 characters")
    _refused(results[6], "query", "required")
    _refused(results[7], "'nothing' does not exist for user 'alice_01'")
    _refused(results[8], "chain must be one of single, parallel, hybrid, multi-query, graph, corag, got 'telepathy'")


def test_another_users_key_never_reaches_the_knowledge_base(world: World) -> None:
    before = len(world.llm.requests)
    content = base64.b64encode(b"planted text").decode()
    listed, found, answer, added = _calls(world.url, world.bob, [
        ("list_knowledge_bases", {}),
        ("search", {"kb": "handbook", "query": "Where are vectors kept?"}),
        ("ask", {"kb": "handbook", "question": "Where are vectors kept?"}),
        ("add_document", {"kb": "handbook", "filename": "planted.txt", "content_base64": content}),
    ])
    assert not listed.is_error and listed.structured_content == {"knowledge_bases": []}
    for result in (found, answer, added):
        _refused(result, "knowledge base 'handbook' does not exist for user 'bob_0001'")
    assert len(world.llm.requests) == before  # the LLM never saw the question
    owner = Principal("alice_01", False)
    assert [d["name"] for d in world.service.describe(owner, "handbook")["documents"]] == ["storage.md"]
    assert not list(world.data.rglob("planted.txt"))


def test_requests_without_a_valid_key_are_refused(world: World) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(world.url, json=hello, headers=accept, timeout=30)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "unauthorized"
    unknown = httpx.post(world.url, json=hello, headers={**accept, "Authorization": "Bearer mxr_" + "x" * 43},
                         timeout=30)
    assert unknown.status_code == 401 and "unknown or revoked" in unknown.json()["error"]["message"]
    try:  # the SDK client cannot even connect without a key
        _calls(world.url, None, [("list_knowledge_bases", {})])
    except Exception as exc:  # the SDK raises its error inside exception groups
        raised: BaseException = exc
    else:
        pytest.fail("a client without a key connected")
    assert any(isinstance(leaf, MCPError) for leaf in _leaves(raised)), repr(raised)


def test_add_document_needs_the_admin_role(world: World) -> None:
    faq = base64.b64encode(b"Backups of sql.db run every night at two o'clock.\n").decode()
    [refused] = _calls(world.url, world.carol, [
        ("add_document", {"kb": "scratch", "filename": "faq.txt", "content_base64": faq}),
    ])
    _refused(refused, "'carol_01' is not an admin of knowledge base 'scratch'")
    assert not list(world.data.rglob("faq.txt"))  # nothing of the refused upload was kept
    added, bad_type, bad_content, found = _calls(world.url, world.alice, [
        ("add_document", {"kb": "scratch", "filename": "faq.txt", "content_base64": faq}),
        ("add_document", {"kb": "scratch", "filename": "tool.exe", "content_base64": faq}),
        ("add_document", {"kb": "scratch", "filename": "faq2.txt", "content_base64": "not base64!"}),
        ("search", {"kb": "scratch", "query": "When do backups run?", "k": 1}),
    ])
    assert not added.is_error, _text(added)
    assert added.structured_content["status"] == "stored" and added.structured_content["chunks"] >= 1
    _refused(bad_type, "file type '.exe'", "not supported")
    _refused(bad_content, "not valid base64")
    assert found.structured_content["chunks"][0]["source"] == "faq.txt"
    [member_search] = _calls(world.url, world.carol, [("search", {"kb": "scratch", "query": "backups"})])
    assert not member_search.is_error and member_search.structured_content["chunks"][0]["source"] == "faq.txt"


def test_local_mode_acts_for_the_local_user_on_this_machine_only(tmp_path: Path, world: World) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    service = KnowledgeService(settings)  # no keys: local mode (the embedding is loaded on first use only)
    try:
        service.create(service.local_principal(), "notes")
        app = create_app(service, server_llm(settings, world.llm.url("/v1")))
        with AppServer(app) as server:
            url = server.base_url + "/mcp"
            [listed, foreign] = _calls(url, None, [("list_knowledge_bases", {}),
                                                   ("search", {"kb": "handbook", "query": "vectors"})])
            hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            accept = {"Accept": "application/json, text/event-stream"}
            rebound = httpx.post(url, json=hello, headers={**accept, "Host": "attacker.example"}, timeout=30)
            foreign_page = httpx.post(url, json=hello, headers={**accept, "Origin": "http://attacker.example"},
                                      timeout=30)
    finally:
        service.close()
    assert not listed.is_error and listed.structured_content == {"knowledge_bases": ["notes"]}
    _refused(foreign, f"knowledge base 'handbook' does not exist for user '{LOCAL_USER}'")
    assert rebound.status_code == 421  # the SDK's DNS-rebinding protection on a loopback server
    assert foreign_page.status_code == 403


def _stdio(world: World, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mx_rag.cli", "mcp", "--data-dir", str(world.data)],
        env={**os.environ, "MXRAG_LLM__URL": world.llm.url("/v1"), **env},
    )


def test_stdio_serves_the_local_user_and_a_keys_user(world: World) -> None:
    stray: list[Exception] = []

    async def record(message: Any) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    got: dict[str, Any] = {}

    async def local() -> None:
        async with Client(_stdio(world), message_handler=record) as client:
            got["tools"] = await client.list_tools()
            got["local"] = [
                await client.call_tool("list_knowledge_bases", {}),
                await client.call_tool("search", {"kb": "desk", "query": "Where is the coffee machine?"}),
                await client.call_tool("ask", {"kb": "desk", "question": "Where is the coffee machine?"}),
                await client.call_tool("search", {"kb": "handbook", "query": "vectors"}),
            ]

    async def keyed() -> None:
        async with Client(_stdio(world, MXRAG_API_KEY=world.alice), message_handler=record) as client:
            got["keyed"] = await client.call_tool("list_knowledge_bases", {})

    async def run() -> None:
        async with anyio.create_task_group() as group:  # the two servers start side by side
            group.start_soon(local)
            group.start_soon(keyed)

    anyio.run(run)
    tools, (listed, found, answer, foreign), alice_listed = got["tools"], got["local"], got["keyed"]
    assert {tool.name for tool in tools.tools} == TOOLS
    assert listed.structured_content == {"knowledge_bases": ["desk"]}
    assert found.structured_content["chunks"][0]["source"] == "office.txt"
    assert "third floor" in answer.structured_content["answer"]
    _refused(foreign, f"knowledge base 'handbook' does not exist for user '{LOCAL_USER}'")
    assert alice_listed.structured_content == {"knowledge_bases": ["handbook", "scratch"]}
    assert not stray  # stdout carried MCP messages only


def test_stdio_refuses_an_unknown_key(world: World) -> None:
    params = _stdio(world, MXRAG_API_KEY="mxr_" + "y" * 43)
    proc = subprocess.run([params.command, *params.args], env=params.env, input="", capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "unknown or revoked" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""
