"""Bodies larger than ``ClientParam.response_limit_size``, with and without Content-Length.

Expected behaviour (mx_rag/utils/http.py module doc): ``ResponseTooLargeError`` as soon as the
excess is seen: a too large ``Content-Length`` before any of the body is read, a chunked body
after at most the limit; for streams, a line or an event (data lines up to a blank line) over
the limit. The server sends 1 GiB, made while it is sent; the client's memory stays at a few
MiB (measured with tracemalloc, which sees every Python allocation in the process). The same
holds for a compression bomb: gzip and deflate are decoded 64 KiB at a time; an encoding the
client did not ask for is refused.
"""

from __future__ import annotations

import functools
import gzip
import json
import tracemalloc
import zlib

import pytest
from net_helpers import CLIENTS, failure, param

from mx_rag.errors import RemoteResponseError, ResponseTooLargeError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.testing.scripted_server import Fault

GIB = 1 << 30
LIMIT = 1 << 20


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("name", list(CLIENTS))
def test_huge_body_is_refused_without_reading_it(
    server: ScriptedServer, name: str, chunked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(Fault.flood(GIB, chunked=chunked, content_type="text/event-stream"))
    tracemalloc.start()
    try:
        error = failure(name, server.base_url, param(response_limit_size=LIMIT, retries=2), caplog)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LIMIT, f"peak {peak} bytes while refusing a 1 GiB body"
    if error is not None:
        assert isinstance(error, ResponseTooLargeError)
        assert f"response_limit_size={LIMIT}" in str(error)
        if not chunked and name not in ("chat_streamly", "stream"):
            assert f"response of {GIB} bytes" in str(error)  # refused on the header alone
    assert len(server.requests) == 1  # too large is not retried


@pytest.mark.parametrize("path", ["chat_streamly", "stream"])
def test_stream_event_of_many_small_lines_is_capped(server: ScriptedServer, path: str) -> None:
    # one valid event whose JSON is spread over 20,000 short data lines (JSON allows the newlines)
    event = ('data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]\n'
             + "data:        \n" * 20_000 + "data: }\n\n")
    server.enqueue(Reply.sse([event, "data: [DONE]\n\n"], raw=True))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                       client_param=param(response_limit_size=64 * 1024))
    with pytest.raises(ResponseTooLargeError, match="streamed event exceeded"):
        list(llm.chat_streamly("q") if path == "chat_streamly" else llm.stream("q"))


def test_multi_line_event_under_the_cap_is_read(server: ScriptedServer) -> None:
    event = ('data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]\n'
             + "data:        \n" * 100 + "data: }\n\n")
    server.enqueue(Reply.sse([event, "data: [DONE]\n\n"], raw=True))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                       client_param=param(response_limit_size=64 * 1024))
    assert list(llm.chat_streamly("q")) == ["hi"]


def _compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data)
    if encoding == "deflate-zlib":
        return zlib.compress(data)
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)  # "deflate" sent without the zlib header
    return raw.compress(data) + raw.flush()


@functools.cache
def _bomb(encoding: str) -> bytes:
    return _compress(b" " * (32 << 20), encoding)  # 32 MiB of JSON whitespace in about 32 KiB


@pytest.mark.parametrize(("name", "encoding"), [("chat", "gzip"), ("embed", "deflate-zlib"),
                                                ("retrieve", "deflate-raw"), ("chat_streamly", "gzip")])
def test_compression_bomb_is_refused_without_inflating_it(
    server: ScriptedServer, name: str, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    bomb = _bomb(encoding)
    header = "deflate" if encoding.startswith("deflate") else encoding
    server.enqueue(Reply.raw(bomb, content_type="application/json", headers={"Content-Encoding": header}))
    tracemalloc.start()
    try:
        error = failure(name, server.base_url, param(response_limit_size=LIMIT), caplog)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LIMIT, f"peak {peak} bytes while refusing a 32 MiB compression bomb"
    if error is not None:
        assert isinstance(error, ResponseTooLargeError)


@pytest.mark.parametrize("encoding", ["gzip", "deflate-zlib", "deflate-raw"])
@pytest.mark.parametrize("path", ["chat", "chat_streamly"])
def test_compressed_answers_are_read(server: ScriptedServer, path: str, encoding: str) -> None:
    if path == "chat":
        body = json.dumps({"choices": [{"message": {"content": "packed " * 500}, "finish_reason": "stop"}]})
        reply = Reply.raw(_compress(body.encode(), encoding), content_type="application/json",
                          headers={"Content-Encoding": "deflate" if encoding.startswith("deflate") else encoding})
    else:
        stream = b"".join(Reply.stream(["packed "] * 500).chunks or ())
        reply = Reply.raw(_compress(stream, encoding), content_type="text/event-stream", chunked=True,
                          headers={"Content-Encoding": "deflate" if encoding.startswith("deflate") else encoding})
    server.enqueue(reply)
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m", client_param=param())
    answer = llm.chat("q") if path == "chat" else "".join(llm.stream("q"))
    assert answer == "packed " * 500
    assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"


def test_encoding_that_was_not_asked_for_is_refused(server: ScriptedServer) -> None:
    server.enqueue(Reply.raw(b"\x28\xb5\x2f\xfd...", content_type="application/json",
                             headers={"Content-Encoding": "zstd"}))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m", client_param=param())
    with pytest.raises(RemoteResponseError, match="Content-Encoding 'zstd', which was not asked for"):
        llm.chat("q")


def test_own_accept_encoding_is_sent_and_honoured(server: ScriptedServer) -> None:
    server.enqueue(Reply.raw(b'{"choices": [{"message": {"content": "plain"}, "finish_reason": "stop"}]}',
                             content_type="application/json"))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                       client_param=param(headers={"Accept-Encoding": "identity"}))
    assert llm.chat("q") == "plain"
    assert server.requests[0].headers["accept-encoding"] == "identity"
