# SPDX-License-Identifier: Apache-2.0
"""Hostile clients against what ``mxrag serve`` reads and keeps (issue 29, cases 4, 5, 9, 10, 11
and 14): chunked bodies over the limit, bodies sent without a key, slow clients, long file names,
a zip bomb, over the real HTTP of the ``hostile_world`` servers (httpx, MCP, plain sockets)."""

from __future__ import annotations

import base64
import io
import socket
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from mx_rag.server import errors, slow_clients
from tests.server.hostile_world import ALICE, SHARED, World, mcp_client, raw_request, upload
from tests.server.jobs import wait_job

pytestmark = pytest.mark.slow

MIB = 1024 * 1024


def _chunks(total: int, sent: list[int]) -> Iterator[bytes]:
    """A JSON body of ``total`` bytes in 64 KiB pieces, counting what was taken in ``sent``."""
    body = b'{"input": "' + b"a" * (total - 13) + b'"}'
    for start in range(0, len(body), 65536):
        sent[0] += len(body[start:start + 65536])
        yield body[start:start + 65536]


# -- case 4: the body limit holds for chunked bodies ----------------------------------------------------


@pytest.mark.parametrize("route", ["/v1/embeddings", "/embed", "/v1/chat/completions",
                                   f"/v1/knowledge-bases/{SHARED}/retrieve"])
def test_a_chunked_body_over_the_limit_is_cut_off(keyed: World, route: str) -> None:
    sent = [0]
    with keyed.client("alice") as alice:
        answer = alice.post(route, content=_chunks(7 * MIB, sent), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413, answer.text[:200]
    assert answer.json()["error"]["code"] == "body_too_large"


def test_a_chunked_upload_over_the_upload_limit_is_cut_off(keyed: World) -> None:
    boundary = "xyzzy"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode()

    def body() -> Iterator[bytes]:
        yield head
        for _ in range(6 * 16):  # 6 MiB: over 3 files of 1 MiB
            yield b"b" * 65536
        yield f"\r\n--{boundary}--\r\n".encode()

    with keyed.client("alice") as alice:
        answer = alice.post(f"/v1/knowledge-bases/{SHARED}/documents", content=body(),
                            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert answer.status_code == 413, answer.text
    assert not (keyed.folder(ALICE, SHARED) / "big.txt").exists()


# -- case 5: no body is read before the key is checked -----------------------------------------------


def test_a_body_without_a_key_is_refused_before_it_is_read(keyed: World) -> None:
    head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1:{keyed.server.port}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    first = b'{"input": "' + b"a" * 60000
    answer = raw_request(keyed, head, [b"%x\r\n%s\r\n" % (len(first), first)])  # 24 MiB would follow
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"www-authenticate: Bearer" in answer.lower().replace(b"bearer", b"Bearer")


# -- case 14: slow clients are cut off ----------------------------------------------------------------


def test_slow_headers_and_bodies_are_cut_off(keyed: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slow_clients, "HEADER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(errors, "BODY_IDLE_S", 1.0)
    with socket.create_connection((keyed.server.host, keyed.server.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and nothing more
        started = time.monotonic()
        assert sock.recv(100) == b""  # closed by the server
        assert time.monotonic() - started < 5
    head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {keyed.keys['alice']}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
    answer = raw_request(keyed, head, [b'{"input": "'], wait_s=8)  # the other 989 bytes never come
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


# -- cases 9, 10, 11: long names, failure reasons, nothing left behind --------------------------------


def _zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        bomb.writestr("[Content_Types].xml", "<Types/>")
        bomb.writestr("word/document.xml", b"\0" * (8 * MIB))
    return out.getvalue()


def test_long_names_are_stored_or_refused_cleanly(keyed: World) -> None:
    longest = "n" * 251 + ".txt"  # 255 bytes: the most a file name may have
    cjk = "文" * 84 + ".txt"  # 256 bytes in UTF-8
    with keyed.client("alice") as alice:
        job = wait_job(alice, SHARED, upload(alice, SHARED, [(longest, b"A long name, stored.\n")]).json())
        assert job["status"] == "done" and job["results"] == {longest: "stored"}, job
        refused = upload(alice, SHARED, [(cjk, b"too long a name")])
        assert refused.status_code == 400, refused.text
        assert "1 to 255 bytes" in refused.json()["error"]["message"]

    async def add() -> Any:
        async with mcp_client(keyed, "alice") as client:
            return await client.call_tool("add_document", {
                "kb": SHARED, "filename": cjk, "content_base64": base64.b64encode(b"x").decode()})

    result = anyio.run(add)
    assert result.is_error and "1 to 255 bytes" in result.content[0].text
    assert not [p for p in keyed.folder(ALICE, SHARED).iterdir() if p.name.startswith(".")]


def test_a_failed_file_says_why_and_leaves_nothing_on_disk(keyed: World) -> None:
    folder = keyed.folder(ALICE, SHARED)
    with keyed.client("alice") as alice:
        job = wait_job(alice, SHARED, upload(alice, SHARED, [("bomb.docx", _zip_bomb()),
                                                           ("fine.txt", b"A fine file.\n")]).json())
        assert job["status"] == "done", job
        assert job["results"]["fine.txt"] == "stored"
        reason = job["results"]["bomb.docx"]
        assert reason.startswith("failed: ") and "zip bomb" in reason, reason
        assert str(folder) not in reason
        assert not (folder / "bomb.docx").exists()
        refused = upload(alice, SHARED, [("ok.txt", b"ok"), ("huge.txt", b"h" * (MIB + 10))])
        assert refused.status_code == 413, refused.text
        assert not (folder / "ok.txt").exists() and not (folder / "huge.txt").exists()
        names = {d["name"] for d in alice.get(f"/v1/knowledge-bases/{SHARED}").json()["documents"]}
    on_disk = {p.name for p in folder.iterdir()}
    assert on_disk <= names, on_disk - names
