# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the hostile-client tests (``test_hostile_*.py``): real uvicorn servers over real
``KnowledgeService`` s (SQLite + FAISS in temporary folders, the packaged embedding model), the
scripted LLM, and the keys an attacker or a careless operator would hold.

``keyed``: a server whose settings say it listens on 0.0.0.0 (so it may never fall back to
local mode; the socket itself is on 127.0.0.1), bodies limited to 2 MiB, uploads to 1 MiB per
file and 3 files. Users: alice (owner of ``shared``, admin key and a read-only
key), bob (admin key, a ``member`` of ``shared``). ``local``: a server on 127.0.0.1 without keys
(local mode). Both live for the session, shared by the hostile modules.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mx_rag.llm import Text2TextLLM
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam

__all__ = ["World", "keyed", "llm_client", "local", "mcp_client", "raw_request", "scripted_llm", "upload"]

ALICE, BOB = "alice_01", "bob_0001"
SHARED = "shared"
TIMEOUT = 60.0


@dataclass
class World:
    server: AppServer
    service: KnowledgeService
    keys: dict[str, str]  # "alice", "alice_ro", "bob" -> API key (empty in local mode)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def client(self, who: str | None = None, **headers: str) -> httpx.Client:
        if who is not None:
            headers["Authorization"] = f"Bearer {self.keys[who]}"
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=TIMEOUT)

    def folder(self, user: str, kb: str) -> Path:
        return self.service.uploads / user / kb


def raw_request(world: World, head: bytes, body_parts: list[bytes] = (), wait_s: float = 5.0) -> bytes:  # type: ignore[assignment]
    """Send ``head`` (request line and headers, CRLF-ended) and ``body_parts`` on a plain socket,
    then read what the server answers within ``wait_s`` (b"" if nothing)."""
    with socket.create_connection((world.server.host, world.server.port), timeout=wait_s) as sock:
        sock.sendall(head)
        for part in body_parts:
            sock.sendall(part)
        try:
            return sock.recv(65536)
        except TimeoutError:
            return b""


def upload(client: Any, kb: str, files: list[tuple[str, bytes]]) -> Any:
    return client.post(f"/v1/knowledge-bases/{kb}/documents", files=[("files", f) for f in files])


@asynccontextmanager
async def mcp_client(world: World, who: str) -> Any:
    headers = {"Authorization": f"Bearer {world.keys[who]}"}
    async with (httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(world.base_url + "/mcp", http_client=http)) as client):
        yield client


@pytest.fixture(scope="session")
def scripted_llm() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def llm_client(srv: ScriptedServer) -> Text2TextLLM:
    return Text2TextLLM(base_url=srv.url("/v1/chat/completions"), model_name="m",
                        client_param=ClientParam(use_http=True, retries=0))


def _serve(settings: Any, llm: ScriptedServer) -> tuple[KnowledgeService, AppServer]:
    service = KnowledgeService(settings)
    return service, AppServer(create_app(service, llm_client(llm)), host="127.0.0.1", port=0)


@pytest.fixture(scope="session")
def keyed(tmp_path_factory: pytest.TempPathFactory, scripted_llm: ScriptedServer) -> Iterator[World]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("keyed"), host="0.0.0.0", max_body_mb=2,
                             upload={"max_file_mb": 1, "max_files": 3})
    service, server = _serve(settings, scripted_llm)
    keys = {"alice": service.keys.create(ALICE, admin=True), "alice_ro": service.keys.create(ALICE),
            "bob": service.keys.create(BOB, admin=True)}
    with server:
        world = World(server, service, keys)
        with world.client("alice") as alice:
            assert alice.post("/v1/knowledge-bases", json={"name": SHARED}).status_code == 201
        service.registry.add_usr_id_to_knowledge(SHARED, BOB, "member")
        yield world
    service.close()


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory, scripted_llm: ScriptedServer) -> Iterator[World]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("local"), upload={"max_file_mb": 1})
    service, server = _serve(settings, scripted_llm)
    with server:
        yield World(server, service, {})
    service.close()
