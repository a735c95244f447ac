"""Connection resets and closes, before the response and mid-body, for every HTTP client.

Expected behaviour (mx_rag/utils/http.py module doc):

* a reset (RST) or a close without any response is a connection failure: retried up to
  ``retries`` times, then ``RemoteConnectionError``;
* a non-streamed body cut off mid-way (RST or FIN) is retried too (nothing was returned yet),
  then ``RemoteResponseError`` ("cut off");
* a stream cut before its end raises ``RemoteResponseError`` after the deltas that arrived and
  is never retried; cut after its ``finish_reason`` (or stalled after ``[DONE]``), the answer is
  whole and is returned without an error.
"""

from __future__ import annotations

import pytest
from net_helpers import CLIENTS, RAISING, STREAMING, failure, is_ok, ok_reply, param

from mx_rag.errors import RemoteConnectionError, RemoteResponseError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.testing.scripted_server import Fault

BEFORE_RESPONSE = {"reset": Fault.reset, "close": Reply.drop}


def llm(server: ScriptedServer, **changes: object) -> Text2TextLLM:
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                        client_param=param(**changes))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(CLIENTS))
def test_reset_before_the_response_is_retried(server: ScriptedServer, name: str) -> None:
    server.enqueue(Fault.reset(), Fault.reset(), ok_reply(name))
    assert is_ok(name, CLIENTS[name](server.base_url, param(retries=2)))
    assert len(server.requests) == 3


@pytest.mark.parametrize("fault", list(BEFORE_RESPONSE))
@pytest.mark.parametrize("name", list(CLIENTS))
def test_no_response_after_all_retries_is_a_connection_error(
    server: ScriptedServer, name: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(*[BEFORE_RESPONSE[fault]()] * 3)
    error = failure(name, server.base_url, param(retries=2), caplog)
    if error is not None:
        assert isinstance(error, RemoteConnectionError)
        assert str(error).startswith("connection failed: ")
        assert error.__cause__ is not None  # the httpx exception, kept as the cause
    assert len(server.requests) == 3


@pytest.mark.parametrize("cut", ["reset", "close"])
@pytest.mark.parametrize("name", ["chat", "embed", "rerank", "retrieve"])
def test_body_cut_mid_way_is_retried(server: ScriptedServer, name: str, cut: str) -> None:
    # head and 5 of the body's bytes, then a reset (RST) or a close (FIN) of the connection
    broken = Fault.reset(ok_reply(name), after=5) if cut == "reset" else Fault.hang(ok_reply(name), after=5, hold=0)
    server.enqueue(broken, ok_reply(name))
    assert is_ok(name, CLIENTS[name](server.base_url, param(retries=1)))
    assert len(server.requests) == 2


@pytest.mark.parametrize("name", RAISING)
def test_body_cut_every_time_is_a_response_error(server: ScriptedServer, name: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    after = 2 if name in STREAMING else 5
    server.enqueue(*[Fault.reset(ok_reply(name), after=after)] * 3)
    error = failure(name, server.base_url, param(retries=2), caplog)
    assert isinstance(error, RemoteResponseError) and "cut off" in str(error)
    # a stream is not retried once it has started; a JSON body is
    assert len(server.requests) == (1 if name in STREAMING else 3)


@pytest.mark.parametrize("name", STREAMING)
def test_stream_reset_mid_answer_raises_after_the_partial_deltas(server: ScriptedServer, name: str) -> None:
    server.enqueue(Fault.reset(Reply.stream(["one ", "two ", "three"]), after=3))  # role, "one ", "two "
    model, seen = llm(server), []
    with pytest.raises(RemoteResponseError, match="cut off"):
        for item in model.chat_streamly("q") if name == "chat_streamly" else model.stream("q"):
            seen.append(item)
    assert seen == (["one ", "one two "] if name == "chat_streamly" else ["one ", "two "])
    assert len(server.requests) == 1


def test_reset_inside_a_multibyte_character(server: ScriptedServer) -> None:
    event = '{"choices":[{"delta":{"content":"你好"},"finish_reason":null}]}'.encode()
    half = event.index("好".encode()) + 1  # cut between the bytes of one character
    server.enqueue(Fault.reset(Reply.raw(b"data: " + event[:half], chunked=True), after=1))
    with pytest.raises(RemoteResponseError, match="cut off"):
        list(llm(server).chat_streamly("q"))


@pytest.mark.parametrize("cut", ["reset", "close"])
@pytest.mark.parametrize("name", STREAMING)
def test_stream_cut_after_its_finish_reason_is_complete(server: ScriptedServer, name: str, cut: str) -> None:
    # role, "a", "b", the finish_reason chunk; then the connection breaks before [DONE]
    answer = Reply.stream(["a", "b"])
    server.enqueue(Fault.reset(answer, after=4) if cut == "reset" else Fault.hang(answer, after=4, hold=0))
    model = llm(server)
    result = list(model.chat_streamly("q")) if name == "chat_streamly" else list(model.stream("q"))
    assert result == (["a", "ab"] if name == "chat_streamly" else ["a", "b"])


def test_stream_that_stalls_after_done_is_complete(server: ScriptedServer) -> None:
    # everything up to [DONE], then no terminating chunk: the drain's read timeout is not an error
    server.enqueue(Fault.hang(Reply.stream(["a", "b"]), after=5, hold=5))
    assert list(llm(server, timeout=0.2).chat_streamly("q")) == ["a", "ab"]


def test_pooled_connection_reset_while_idle_is_transparent(server: ScriptedServer) -> None:
    model = llm(server, retries=0)
    assert model.chat("one") == "echo: one"
    server.stop()  # closes the kept-alive connection under the client
    server.start()
    assert model.chat("two") == "echo: two"
