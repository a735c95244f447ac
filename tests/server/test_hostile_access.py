# SPDX-License-Identifier: Apache-2.0
"""Hostile clients against who may do what on ``mxrag serve`` (issue 29, cases 1, 2, 3, 6, 7,
13 and the 405 / ``/readyz`` parts of 17), over real HTTP (httpx, the MCP client, plain sockets)
against the real servers of ``hostile_world``."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from mx_rag.server import auth
from mx_rag.server.app import create_app
from mx_rag.server.runner import AppServer
from mx_rag.server.service import KnowledgeService
from mx_rag.server.settings import load_settings
from mx_rag.testing import ScriptedServer
from tests.server.hostile_world import ALICE, SHARED, World, llm_client, mcp_client, upload
from tests.server.jobs import wait_job

pytestmark = pytest.mark.slow

TEXT = b"The Zorblax reactor in Building 7 runs on molten salt.\n"


# -- case 1: a member cannot delete the owner's knowledge base ------------------------------------


def test_a_member_cannot_delete_a_knowledge_base_and_the_owners_delete_removes_every_file(keyed: World) -> None:
    with keyed.client("alice") as alice, keyed.client("bob") as bob:
        assert alice.post("/v1/knowledge-bases", json={"name": "doomed"}).status_code == 201
        keyed.service.registry.add_usr_id_to_knowledge("doomed", "bob_0001", "member")
        job = wait_job(alice, "doomed", upload(alice, "doomed", [("facts.txt", TEXT)]).json())
        assert job["status"] == "done", job
        refused = bob.delete("/v1/knowledge-bases/doomed")
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "forbidden"
        assert [d["name"] for d in alice.get("/v1/knowledge-bases/doomed").json()["documents"]] == ["facts.txt"]
        assert bob.post("/v1/knowledge-bases/doomed/documents", files=[("files", ("x.txt", TEXT))]).status_code == 403
        assert alice.delete("/v1/knowledge-bases/doomed").status_code == 200
        assert not keyed.folder(ALICE, "doomed").exists()


# -- case 2: revoking the last key of a public server keeps it closed ------------------------------


def test_revoking_the_last_key_of_a_public_server_keeps_refusing(
        tmp_path: Any, scripted_llm: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "CACHE_S", 0.2)
    settings = load_settings(data_dir=tmp_path / "data", host="0.0.0.0")
    service = KnowledgeService(settings)
    key = service.keys.create("owner_01", admin=True)
    try:
        with AppServer(create_app(service, llm_client(scripted_llm))) as server:
            world = World(server, service, {"owner": key})
            with world.client("owner") as owner, world.client() as anonymous:
                assert owner.get("/v1/models").status_code == 200
                assert anonymous.get("/v1/models").status_code == 401
                service.keys.revoke(service.keys.list()[0].id)
                time.sleep(0.5)
                assert owner.get("/v1/models").status_code == 401
                assert anonymous.get("/v1/models").status_code == 401
                created = anonymous.post("/v1/knowledge-bases", json={"name": "mine"})
                assert created.status_code == 401, created.text
                assert created.headers["www-authenticate"] == "Bearer"
            assert service.names(service.local_principal()) == []
    finally:
        service.close()


# -- case 3: a key without --admin reads and asks, and changes nothing --------------------------------


def test_a_key_without_admin_only_reads(keyed: World) -> None:
    with keyed.client("alice") as alice, keyed.client("alice_ro") as reader:
        job = wait_job(alice, SHARED, upload(alice, SHARED, [("keep.txt", TEXT)]).json())
        document = alice.get(f"/v1/knowledge-bases/{SHARED}").json()["documents"][0]["id"]
        assert reader.get("/v1/knowledge-bases").status_code == 200
        assert reader.get(f"/v1/knowledge-bases/{SHARED}/jobs/{job['id']}").status_code == 200
        assert reader.post(f"/v1/knowledge-bases/{SHARED}/retrieve", json={"query": "reactor"}).status_code == 200
        refused = [
            reader.post("/v1/knowledge-bases", json={"name": "sneaky"}),
            upload(reader, SHARED, [("planted.txt", TEXT)]),
            reader.delete(f"/v1/knowledge-bases/{SHARED}/documents/{document}"),
            reader.delete(f"/v1/knowledge-bases/{SHARED}"),
        ]
        assert [r.status_code for r in refused] == [403] * 4, [r.text for r in refused]
        assert all("admin key" in r.json()["error"]["message"] for r in refused)
        assert SHARED in [k["name"] for k in alice.get("/v1/knowledge-bases").json()["knowledge_bases"]]

    async def add() -> Any:
        async with mcp_client(keyed, "alice_ro") as client:
            return await client.call_tool("add_document", {
                "kb": SHARED, "filename": "planted.txt", "content_base64": base64.b64encode(TEXT).decode()})

    result = anyio.run(add)
    assert result.is_error and "admin key" in result.content[0].text
    assert not (keyed.folder(ALICE, SHARED) / "planted.txt").exists()


# -- cases 6 and 7: local mode answers this machine's pages only ----------------------------------------


def test_local_mode_refuses_another_host_name(local: World) -> None:
    port = local.server.port
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example"):
        with local.client(Host=host) as rebound:
            answer = rebound.get("/v1/knowledge-bases")
            assert answer.status_code == 421, (host, answer.text)
            assert answer.json()["error"]["code"] == "misdirected_request"
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        with local.client(Host=host) as mine:
            assert mine.get("/v1/knowledge-bases").status_code == 200, host


def test_local_mode_refuses_cross_site_writes(local: World) -> None:
    port = local.server.port
    with local.client(Origin="http://attacker.example") as page:
        created = page.post("/v1/knowledge-bases", json={"name": "planted"})
        assert created.status_code == 403, created.text
        uploaded = upload(page, "anything", [("evil.txt", TEXT)])
        assert uploaded.status_code == 403
        assert page.get("/v1/knowledge-bases").status_code == 200  # reading gives a page nothing: CORS hides it
    with local.client(**{"Sec-Fetch-Site": "cross-site"}) as page:
        assert page.post("/v1/knowledge-bases", json={"name": "planted"}).status_code == 403
    with local.client(Origin="null") as page:
        assert page.post("/v1/knowledge-bases", json={"name": "planted"}).status_code == 403
    assert "planted" not in local.service.names(local.service.local_principal())
    with local.client(Origin=f"http://127.0.0.1:{port}") as own_page:
        assert own_page.post("/v1/knowledge-bases", json={"name": "mine"}).status_code == 201
        assert own_page.delete("/v1/knowledge-bases/mine").status_code == 200


# -- case 13 and 17: bounded metrics, 405 with Allow, a /readyz that tells nothing ------------------------


def test_made_up_methods_share_one_metrics_series(keyed: World) -> None:
    with keyed.client() as anonymous:
        for n in range(12):
            assert anonymous.request(f"MADEUP{n}", "/healthz").status_code == 405
        text = anonymous.get("/metrics").text
    assert "MADEUP" not in text
    assert re.search(r'mxrag_requests_total\{method="other",route="/healthz",status="405"\} 12', text), text


def test_wrong_method_answers_405_with_allow(keyed: World) -> None:
    with keyed.client("alice") as alice:
        answer = alice.put("/v1/models")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET"
    assert answer.json()["error"]["code"] == "method_not_allowed"


def test_readyz_does_not_tell_why(tmp_path: Any, scripted_llm: ScriptedServer) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    service = KnowledgeService(settings)
    try:
        with AppServer(create_app(service, llm_client(scripted_llm))) as server:
            secret = tmp_path / "data" / "faiss.index"
            service.vectors.count = _broken(f"cannot read {secret} at postgresql://u:pw@db")  # type: ignore[method-assign]
            with World(server, service, {}).client() as client:
                answer = client.get("/readyz")
        assert answer.status_code == 503
        assert str(tmp_path) not in answer.text and "pw@" not in answer.text
        assert answer.json()["error"]["code"] == "not_ready"
    finally:
        service.close()


def _broken(message: str) -> Any:
    def count() -> int:
        raise OSError(message)

    return count


@pytest.fixture(autouse=True)
def _no_leftover_parts(keyed: World) -> Iterator[None]:
    """No test here may leave a temporary upload file behind (case 11)."""
    yield
    assert not list(keyed.service.uploads.rglob("*.part"))
