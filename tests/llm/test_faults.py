"""Retries, timeouts, deadlines, size caps and error detail of the pooled HTTP layer."""

import socket
import time

import pytest

from mx_rag.errors import (
    RemoteConnectionError,
    RemoteResponseError,
    RemoteStatusError,
    RemoteTimeoutError,
    ResponseTooLargeError,
)
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam


def make_llm(server: ScriptedServer, **param: object) -> Text2TextLLM:
    settings = {"use_http": True, "retries": 2, "backoff": 0, "timeout": 5, **param}
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                        client_param=ClientParam(**settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_transient_status_is_retried(server: ScriptedServer, status: int) -> None:
    server.enqueue(Reply.status(status, "busy"), Reply.chat("recovered"))
    assert make_llm(server).chat("q") == "recovered"
    assert len(server.requests) == 2


def test_retry_after_is_honoured(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(429, headers={"Retry-After": "0"}), Reply.chat("ok"))
    assert make_llm(server, backoff=30).chat("q") == "ok"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried_and_carry_detail(server: ScriptedServer, status: int) -> None:
    server.enqueue(Reply.status(status, {"error": {"message": "bad request detail"}}))
    with pytest.raises(RemoteStatusError) as info:
        make_llm(server).chat("q")
    assert info.value.status_code == status
    assert "bad request detail" in info.value.body
    assert "bad request detail" in str(info.value)
    assert len(server.requests) == 1


def test_retries_exhausted_raises_last_status(server: ScriptedServer) -> None:
    server.enqueue(*[Reply.status(503, "still down")] * 3)
    with pytest.raises(RemoteStatusError, match="503") as info:
        make_llm(server, retries=2).chat("q")
    assert info.value.body == "still down"
    assert len(server.requests) == 3


def test_stream_status_error_is_retried_before_first_byte(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(502), Reply.stream(["ok"]))
    assert list(make_llm(server).chat_streamly("q")) == ["ok"]


def test_dropped_connection_is_retried(server: ScriptedServer) -> None:
    server.enqueue(Reply.drop(), Reply.chat("second try"))
    assert make_llm(server).chat("q") == "second try"


def test_connection_refused_raises_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = Text2TextLLM(base_url=f"http://127.0.0.1:{port}/v1/chat/completions", model_name="m",
                       client_param=ClientParam(use_http=True, retries=1, backoff=0))
    with pytest.raises(RemoteConnectionError, match=str(port)):
        llm.chat("q")


def test_slow_server_times_out(server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("late", delay=2.0))
    with pytest.raises(RemoteTimeoutError):
        make_llm(server, timeout=0.3, retries=0).chat("q")


def test_deadline_bounds_the_whole_stream(server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(["a"] * 50, chunk_delay=0.05))
    started = time.monotonic()
    with pytest.raises(RemoteTimeoutError, match="deadline"):
        list(make_llm(server, deadline=0.5).chat_streamly("q"))
    assert time.monotonic() - started < 2.0


def test_deadline_stops_retrying(server: ScriptedServer) -> None:
    server.enqueue(*[Reply.status(503)] * 5)
    with pytest.raises(RemoteTimeoutError, match="deadline"):
        make_llm(server, deadline=0.5, backoff=1.0, retries=5).chat("q")


@pytest.mark.parametrize("chunked", [False, True])
def test_response_size_cap_with_and_without_content_length(server: ScriptedServer, chunked: bool) -> None:
    big = {"choices": [{"message": {"content": "x" * 5000}, "finish_reason": "stop"}]}
    server.enqueue(Reply.json(big, chunked=chunked))
    with pytest.raises(ResponseTooLargeError, match="response_limit_size=1024"):
        make_llm(server, response_limit_size=1024).chat("q")


def test_stream_event_size_cap(server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(["y" * 5000]))
    with pytest.raises(ResponseTooLargeError):
        list(make_llm(server, response_limit_size=1024).chat_streamly("q"))


def test_long_stream_of_small_events_is_not_capped(server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(["word "] * 400))
    assert len(list(make_llm(server, response_limit_size=1024).chat_streamly("q"))[-1]) == 2000


@pytest.mark.parametrize(
    "reply",
    [Reply.raw(b"<html>gateway</html>", content_type="text/html"), Reply.json({"object": "list"}),
     Reply.json({"error": {"message": "quota"}})],
    ids=["not-json", "no-choices", "error-object"],
)
def test_broken_answers_raise_response_error(server: ScriptedServer, reply: Reply) -> None:
    server.enqueue(reply)
    with pytest.raises(RemoteResponseError):
        make_llm(server).chat("q")
