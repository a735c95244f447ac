"""ScriptedServer and Reply, exercised over real HTTP with httpx (no mx_rag LLM classes)."""

import base64
import json
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trustme

from mx_rag.testing import TINY_PNG, RecordedRequest, Reply, ScriptedServer
from mx_rag.testing.scripted_server import Fault

CHAT = "/v1/chat/completions"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def client(server: ScriptedServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=5) as c:
        yield c


def sse_payloads(text: str) -> list[str]:
    """The data of each SSE event, with the optional single space after ``data:`` removed."""
    out = []
    for line in text.split("\n"):
        if line.startswith("data:"):
            data = line[5:]
            out.append(data[1:] if data.startswith(" ") else data)
    return out


def chat_body(content: Any = "hello world", **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": content}],
        **extra,
    }


# -- defaults -----------------------------------------------------------------------------------


def test_echo_chat_completion_shape(client: httpx.Client) -> None:
    response = client.post(CHAT, json=chat_body())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["id"] and isinstance(data["created"], int)
    assert data["model"] == "m"
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "echo: hello world"},
            "finish_reason": "stop",
        }
    ]
    assert data["usage"]["completion_tokens"] == 3
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + 3


def test_echo_content_parts(client: httpx.Client) -> None:
    parts = [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "this"},
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
    ]
    content = client.post(CHAT, json=chat_body(parts)).json()["choices"][0]["message"]["content"]
    assert content == "echo: describe this [image] [image]"


def test_echo_stream_shape(client: httpx.Client) -> None:
    response = client.post(CHAT, json=chat_body("the quick  brown fox", stream=True))
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in response.headers
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert pieces == ["echo: ", "the ", "quick  ", "brown ", "fox"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}


def test_echo_stream_include_usage(client: httpx.Client) -> None:
    body = chat_body("a b", stream=True, stream_options={"include_usage": True})
    payloads = sse_payloads(client.post(CHAT, json=body).text)
    usage_chunk = json.loads(payloads[-2])
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("max_tokens", "expected", "finish"),
    [
        (2, "echo: a", "length"),
        (1, "echo:", "length"),
        (5, "echo: a b c d", "stop"),
        (50, "echo: a b c d", "stop"),
    ],
)
def test_echo_max_tokens(
    client: httpx.Client, stream: bool, max_tokens: int, expected: str, finish: str
) -> None:
    response = client.post(CHAT, json=chat_body("a b c d", stream=stream, max_tokens=max_tokens))
    if stream:
        chunks = [json.loads(p) for p in sse_payloads(response.text)[:-1]]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        reason = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = response.json()["choices"][0]
        text, reason = choice["message"]["content"], choice["finish_reason"]
    assert (text, reason) == (expected, finish)


def test_default_models(client: httpx.Client) -> None:
    assert client.get("/v1/models").json() == {
        "object": "list",
        "data": [{"id": "scripted", "object": "model"}],
    }


def test_default_text2img_and_img2img(client: httpx.Client) -> None:
    raw = client.post("/text2img", json={"prompt": "cat"})
    assert raw.headers["content-type"] == "image/png"
    assert raw.content == TINY_PNG
    encoded = client.post("/v1/img2img", json={"prompt": "dog"}).json()
    assert base64.b64decode(encoded["image"]) == TINY_PNG


def test_default_unknown_route_is_404(client: httpx.Client) -> None:
    response = client.post("/v1/nothing", json={})
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "no route"


def test_tiny_png_is_valid() -> None:
    assert TINY_PNG[:8] == b"\x89PNG\r\n\x1a\n"
    pos, kinds, idat = 8, [], b""
    while pos < len(TINY_PNG):
        (length,) = struct.unpack(">I", TINY_PNG[pos : pos + 4])
        kind, data = TINY_PNG[pos + 4 : pos + 8], TINY_PNG[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", TINY_PNG[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF
        kinds.append(kind)
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    assert kinds == [b"IHDR", b"IDAT", b"IEND"]
    width, height = struct.unpack(">II", TINY_PNG[16:24])
    assert len(zlib.decompress(idat)) == height * (1 + 3 * width)


# -- queue and record ---------------------------------------------------------------------------


def test_fifo_order_then_echo(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.chat("first"), Reply.status(500))
    server.enqueue(Reply.chat("third"))
    assert server.pending == 3
    assert client.post(CHAT, json=chat_body()).json()["choices"][0]["message"]["content"] == "first"
    assert client.post(CHAT, json=chat_body()).status_code == 500
    assert client.post(CHAT, json=chat_body()).json()["choices"][0]["message"]["content"] == "third"
    assert client.post(CHAT, json=chat_body("x")).json()["choices"][0]["message"]["content"] == "echo: x"
    assert server.pending == 0
    assert len(server.requests) == 4


def test_get_also_consumes_a_reply(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.json({"data": []}))
    assert client.get("/v1/models").json() == {"data": []}
    assert client.get("/v1/models").json()["data"][0]["id"] == "scripted"


def test_requests_are_recorded(server: ScriptedServer, client: httpx.Client) -> None:
    client.post(
        CHAT + "?x=1", json={"a": 1}, headers={"X-Custom-Header": "Value", "Authorization": "Bearer k"}
    )
    client.get("/v1/models")
    client.post("/raw", content=b"not json")
    first, second, third = server.requests
    assert isinstance(first, RecordedRequest)
    assert (first.method, first.path) == ("POST", CHAT + "?x=1")
    assert first.headers["x-custom-header"] == "Value"
    assert first.headers["authorization"] == "Bearer k"
    assert first.headers["content-type"] == "application/json"
    assert all(key == key.lower() for key in first.headers)
    assert first.json == {"a": 1}
    assert json.loads(first.body) == {"a": 1}
    assert first.client_cert is None
    assert (second.method, second.body, second.json) == ("GET", b"", None)
    assert (third.body, third.json) == (b"not json", None)


def test_chunked_request_body(server: ScriptedServer, client: httpx.Client) -> None:
    client.post("/upload", content=iter([b'{"messages":', b" [1, 2]", b"}"]))
    request = server.requests[0]
    assert request.headers["transfer-encoding"] == "chunked"
    assert request.json == {"messages": [1, 2]}


def test_reset_clears_queue_and_requests(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.status(500), Reply.status(501))
    client.get("/v1/models")
    requests = server.requests
    server.reset()
    assert server.requests == [] and requests == [] and server.pending == 0
    assert client.get("/v1/models").status_code == 200


def test_enqueue_rejects_non_replies(server: ScriptedServer) -> None:
    with pytest.raises(TypeError, match="Reply"):
        server.enqueue("hi")  # type: ignore[arg-type]


def test_concurrent_clients_are_all_recorded(server: ScriptedServer) -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            with httpx.Client(base_url=server.base_url, timeout=5) as c:
                for i in range(10):
                    text = c.post(CHAT, json=chat_body(f"w{n} {i}")).json()["choices"][0]["message"][
                        "content"
                    ]
                    assert text == f"echo: w{n} {i}"
        except BaseException as exc:  # re-raised in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(server.requests) == 80


# -- Reply.chat / Reply.stream / SSE ------------------------------------------------------------


def test_chat_null_content_reasoning_and_usage(server: ScriptedServer, client: httpx.Client) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}
    server.enqueue(
        Reply.chat(None, reasoning_content="think", finish_reason="length", model="x", usage=usage)
    )
    data = client.post(CHAT, json=chat_body()).json()
    assert data["model"] == "x" and data["usage"] == usage
    assert data["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "think",
    }
    assert data["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(("space", "prefix"), [(True, b"data: {"), (False, b"data:{")])
def test_stream_space(server: ScriptedServer, client: httpx.Client, space: bool, prefix: bytes) -> None:
    server.enqueue(Reply.stream(["a"], space=space))
    raw = client.post(CHAT, json=chat_body()).content
    events = raw.split(b"\n\n")
    assert events[-1] == b""
    assert all(e.startswith(prefix) for e in events[:-2])
    assert events[-2] == (b"data: [DONE]" if space else b"data:[DONE]")


def test_stream_options(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(
        Reply.stream(
            ["a", None, "b"], omit_finish_key=True, final_content="!", done=False, finish_reason="length"
        )
    )
    payloads = sse_payloads(client.post(CHAT, json=chat_body()).text)
    assert "[DONE]" not in payloads
    choices = [json.loads(p)["choices"][0] for p in payloads]
    assert [c["delta"].get("content") for c in choices] == ["", "a", None, "b", "!"]
    assert "content" in choices[2]["delta"] and choices[2]["delta"]["content"] is None
    assert all("finish_reason" not in c for c in choices[:-1])
    assert choices[-1] == {"index": 0, "delta": {"content": "!"}, "finish_reason": "length"}


def test_stream_without_role_chunk(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.stream(["x"], role_chunk=False, finish_reason=None))
    payloads = sse_payloads(client.post(CHAT, json=chat_body()).text)
    assert json.loads(payloads[0])["choices"][0]["delta"] == {"content": "x"}
    assert json.loads(payloads[1])["choices"][0]["finish_reason"] is None
    assert payloads[2] == "[DONE]"


def test_stream_events_arrive_as_separate_chunks(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.stream(["a", "b", "c"], chunk_delay=0.05))
    arrivals: list[float] = []
    start = time.monotonic()
    with client.stream("POST", CHAT, json=chat_body()) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 6  # role, 3 pieces, final, [DONE]
    assert arrivals[-1] - arrivals[0] >= 0.2


@pytest.mark.parametrize(("role_chunk", "cut_after"), [(True, 2), (False, 2), (True, 0)])
def test_stream_cut_after_is_incomplete_body(
    server: ScriptedServer, client: httpx.Client, role_chunk: bool, cut_after: int
) -> None:
    server.enqueue(Reply.stream(["a", "b", "c"], cut_after=cut_after, role_chunk=role_chunk))
    received: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError), client.stream("POST", CHAT, json=chat_body()) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:"):
                received.append(line)
    pieces = [json.loads(line[5:])["choices"][0]["delta"]["content"] for line in received]
    assert pieces == [""] * role_chunk + ["a", "b", "c"][:cut_after]
    # the server keeps serving on a fresh connection
    assert client.get("/v1/models").status_code == 200


def test_sse_verbatim_and_comments(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(
        Reply.sse([": keep-alive", "garbage{", '{"x":1}']), Reply.sse(["data: a\n\n", "oops"], raw=True)
    )
    assert client.post(CHAT, json=chat_body()).text == ': keep-alive\n\ndata: garbage{\n\ndata: {"x":1}\n\n'
    assert client.post(CHAT, json=chat_body()).text == "data: a\n\noops"


def test_error_event(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.error_event("model exploded", code="overloaded"))
    response = client.post(CHAT, json=chat_body())
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert sse_payloads(response.text) == [
        json.dumps(
            {"error": {"message": "model exploded", "type": "server_error", "code": "overloaded"}},
            separators=(",", ":"),
        )
    ]


def test_unicode_pieces_survive(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.stream(["你好", "，世界"]))
    chunks = [json.loads(p) for p in sse_payloads(client.post(CHAT, json=chat_body()).text)[1:-2]]
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == "你好，世界"


# -- plain HTTP replies ---------------------------------------------------------------------------


def test_status_with_headers(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(
        Reply.status(429, headers={"Retry-After": "0"}),
        Reply.status(503, {"error": "busy"}),
        Reply.status(400, "bad", headers={"content-type": "text/html"}),
    )
    first = client.post(CHAT, json=chat_body())
    assert (first.status_code, first.headers["retry-after"], first.content) == (429, "0", b"")
    second = client.post(CHAT, json=chat_body())
    assert second.status_code == 503 and second.json() == {"error": "busy"}
    third = client.post(CHAT, json=chat_body())
    assert (third.status_code, third.text, third.headers["content-type"]) == (400, "bad", "text/html")


def test_status_204_has_no_body(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.status(204))
    response = client.delete("/thing")
    assert response.status_code == 204 and response.content == b""
    assert client.get("/v1/models").status_code == 200  # connection still in a sane state


@pytest.mark.parametrize("chunked", [False, True])
def test_json_chunked_or_not(server: ScriptedServer, client: httpx.Client, chunked: bool) -> None:
    server.enqueue(Reply.json({"k": [1, 2]}, status=201, chunked=chunked))
    response = client.post("/x", json={})
    assert response.status_code == 201 and response.json() == {"k": [1, 2]}
    assert ("content-length" in response.headers) is not chunked
    assert (response.headers.get("transfer-encoding") == "chunked") is chunked


@pytest.mark.parametrize("chunked", [False, True])
def test_raw(server: ScriptedServer, client: httpx.Client, chunked: bool) -> None:
    server.enqueue(
        Reply.raw(b"\x00\x01", status=202, content_type="x/y", chunked=chunked, headers={"X-A": "b"})
    )
    response = client.get("/r")
    assert (response.status_code, response.content) == (202, b"\x00\x01")
    assert (response.headers["content-type"], response.headers["x-a"]) == ("x/y", "b")


def test_image_reply(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.image(), Reply.image(as_json_key="b64_json"))
    assert client.post("/gen", json={}).content == TINY_PNG
    assert base64.b64decode(client.post("/gen", json={}).json()["b64_json"]) == TINY_PNG


def test_drop_closes_without_response(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.drop())
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(CHAT, json=chat_body())
    assert server.requests[0].json == chat_body()
    assert client.post(CHAT, json=chat_body("again")).status_code == 200


def test_delay(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Reply.chat("late", delay=0.2))
    start = time.monotonic()
    client.post(CHAT, json=chat_body())
    assert time.monotonic() - start >= 0.2


def test_delay_trips_client_timeout(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(200, delay=1.0))
    with httpx.Client(timeout=0.1) as c, pytest.raises(httpx.ReadTimeout):
        c.get(server.url("/slow"))


# -- lifecycle, performance, TLS -------------------------------------------------------------------


def test_lifecycle_stop_is_idempotent_and_restart_keeps_port() -> None:
    srv = ScriptedServer()
    with pytest.raises(RuntimeError):
        _ = srv.base_url
    srv.start()
    assert srv.start() is srv
    url = srv.url("v1/models")
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1/models")
    with httpx.Client(timeout=2) as c:
        assert c.get(url).status_code == 200
        srv.stop()
        srv.stop()
        with pytest.raises(httpx.TransportError):  # pooled keep-alive connection was closed too
            c.get(url)
        with pytest.raises(httpx.ConnectError):
            c.get(url)
        srv.start()
        try:
            assert srv.url("/v1/models") == url
            assert c.get(url).status_code == 200
        finally:
            srv.stop()


def test_keep_alive_throughput(server: ScriptedServer, client: httpx.Client) -> None:
    start = time.monotonic()
    for i in range(300):
        assert client.post(CHAT, json=chat_body(str(i))).status_code == 200
    elapsed = time.monotonic() - start
    assert elapsed < 3.0, f"300 keep-alive requests took {elapsed:.2f}s"


def test_openai_sdk_understands_the_echo(server: ScriptedServer) -> None:
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=server.url("/v1"), api_key="k", max_retries=0)
    reply = sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi there"}])
    assert reply.choices[0].message.content == "echo: hi there"
    stream = sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi there"}], stream=True
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == "echo: hi there"
    server.enqueue(Reply.error_event("boom"))
    with pytest.raises(openai.APIError, match="boom"):
        list(sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True))


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _client_context(ca: trustme.CA, client_cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    if client_cert is not None:
        client_cert.configure_cert(ctx)
    return ctx


@pytest.mark.parametrize("mutual", [False, True])
def test_tls(ca: trustme.CA, mutual: bool) -> None:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_cert = None
    if mutual:
        ca.configure_trust(server_ctx)
        server_ctx.verify_mode = ssl.CERT_REQUIRED
        client_cert = ca.issue_cert("client@example.org")
    with ScriptedServer(ssl_context=server_ctx) as srv:
        assert srv.base_url.startswith("https://127.0.0.1:")
        with httpx.Client(verify=_client_context(ca, client_cert), timeout=5) as c:
            assert c.post(srv.url(CHAT), json=chat_body("tls")).json()["choices"][0]["message"][
                "content"
            ] == ("echo: tls")
            srv.enqueue(Reply.stream(["a", "b"]))
            assert sse_payloads(c.post(srv.url(CHAT), json=chat_body()).text)[-1] == "[DONE]"
        cert = srv.requests[0].client_cert
        if mutual:
            assert cert is not None
            assert any("client@example.org" in str(value) for value in cert.values())
        else:
            assert cert is None


def test_tls_failures_do_not_kill_the_server(ca: trustme.CA) -> None:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    with ScriptedServer(ssl_context=server_ctx) as srv:
        with httpx.Client(verify=_client_context(ca), timeout=5) as c, pytest.raises(httpx.TransportError):
            c.get(srv.url("/v1/models"))  # no client certificate
        with httpx.Client(verify=False, timeout=5) as c, pytest.raises(httpx.TransportError):
            c.get(srv.url("/v1/models").replace("https://", "http://"))  # plain HTTP to a TLS port
        srv.enqueue(Reply.stream(["a", "b"], cut_after=1))
        with httpx.Client(verify=_client_context(ca, ca.issue_cert("c@x")), timeout=5) as c:
            with pytest.raises(httpx.RemoteProtocolError):
                c.post(srv.url(CHAT), json=chat_body())
            assert c.get(srv.url("/v1/models")).status_code == 200


# -- Fault: broken connections ------------------------------------------------------------------


def test_fault_hang_reads_the_request_and_never_answers(server: ScriptedServer) -> None:
    server.enqueue(Fault.hang())
    with httpx.Client(timeout=0.2) as c, pytest.raises(httpx.ReadTimeout):
        c.post(server.url(CHAT), json=chat_body())
    assert server.requests[0].json == chat_body()


def test_fault_hang_after_head_and_bytes(server: ScriptedServer) -> None:
    server.enqueue(Fault.hang(Reply.chat("hello"), after=7), Fault.hang(Reply.stream(["a", "b"]), after=2))
    with httpx.Client(timeout=0.2) as c:
        with c.stream("POST", server.url(CHAT), json=chat_body()) as response:
            assert response.status_code == 200 and int(response.headers["content-length"]) > 7
            with pytest.raises(httpx.ReadTimeout):
                response.read()
        received: list[str] = []
        with pytest.raises(httpx.ReadTimeout), c.stream("POST", server.url(CHAT), json=chat_body()) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    received.append(line)
    assert [json.loads(line[5:])["choices"][0]["delta"]["content"] for line in received] == ["", "a"]


def test_fault_hang_with_hold_zero_closes_mid_body(server: ScriptedServer, client: httpx.Client) -> None:
    server.enqueue(Fault.hang(Reply.chat("hello"), after=7, hold=0))
    with pytest.raises(httpx.RemoteProtocolError, match="received 7 bytes"):
        client.post(CHAT, json=chat_body())


def test_fault_hang_is_released_by_stop() -> None:
    srv = ScriptedServer().start()
    srv.enqueue(Fault.hang())
    errors: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(srv.url(CHAT), json={}, timeout=30)
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert _eventually(lambda: len(srv.requests) == 1)
    srv.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()  # the held connection was closed, long before the 30 s timeout
    assert len(errors) == 1 and isinstance(errors[0], httpx.TransportError)


@pytest.mark.parametrize("reply", [None, "chat", "stream"])
def test_fault_reset_is_a_connection_reset(server: ScriptedServer, client: httpx.Client, reply: str | None) -> None:
    wrapped = {None: None, "chat": Reply.chat("hello"), "stream": Reply.stream(["a", "b"])}[reply]
    server.enqueue(Fault.reset(wrapped, after=2))
    with pytest.raises(httpx.ReadError, match="reset"):
        client.post(CHAT, json=chat_body())
    assert len(server.requests) == 1
    assert client.get("/v1/models").status_code == 200  # the server keeps serving


@pytest.mark.parametrize("chunked", [False, True])
def test_fault_flood_sends_exactly_size_bytes(server: ScriptedServer, client: httpx.Client, chunked: bool) -> None:
    server.enqueue(Fault.flood(300_000, chunked=chunked))
    response = client.post("/big", json={})
    assert response.content == b"x" * 300_000
    assert ("content-length" in response.headers) is not chunked
    assert client.get("/v1/models").status_code == 200  # a complete body keeps the connection usable


def test_fault_flood_stops_when_the_client_goes_away(server: ScriptedServer) -> None:
    server.enqueue(Fault.flood(1 << 40, chunked=True))  # a terabyte: only a client that leaves ends it
    with httpx.Client(timeout=5) as c, c.stream("POST", server.url("/big"), json={}) as response:
        assert len(next(response.iter_bytes())) > 0
    assert c.is_closed
    with httpx.Client(timeout=5) as c2:
        assert c2.get(server.url("/v1/models")).status_code == 200


def test_fault_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="after"):
        Fault.reset(Reply.chat("x"), after=-1)
    with pytest.raises(ValueError, match="ordinary Reply"):
        Fault.hang(Reply.drop())
    with pytest.raises(ValueError, match="ordinary Reply"):
        Fault.reset(Fault.hang())
    with pytest.raises(ValueError, match="size"):
        Fault.flood(-1)


def test_connection_count(server: ScriptedServer) -> None:
    assert server.connection_count == 0
    with httpx.Client(timeout=5) as c:
        for _ in range(3):
            c.get(server.url("/v1/models"))  # one kept-alive connection
    with httpx.Client(timeout=5) as c:
        c.get(server.url("/v1/models"))
    assert _eventually(lambda: server.connection_count == 2)
    server.reset()
    assert server.connection_count == 0


def _eventually(condition: Any, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True
