"""Bodies larger than ``ClientParam.response_limit_size``, with and without Content-Length.

Expected behaviour (mx_rag/utils/http.py module doc): ``ResponseTooLargeError`` as soon as the
excess is seen: a too large ``Content-Length`` before any of the body is read, a chunked body
after at most the limit; for streams, a line or an event (data lines up to a blank line) over
the limit. The server sends 1 GiB, made while it is sent; the client's memory stays at a few
MiB (measured with tracemalloc, which sees every Python allocation in the process).
"""

from __future__ import annotations

import tracemalloc

import pytest
from net_helpers import CLIENTS, failure, param

from mx_rag.errors import ResponseTooLargeError
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
