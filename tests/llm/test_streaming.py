"""The tolerant SSE reader, through Text2TextLLM.chat_streamly against real HTTP streams."""

import pytest

from mx_rag.errors import RemoteResponseError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer


def test_stream_yields_cumulative_answer(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(["The ", "answer ", "is 42."]))
    assert list(llm.chat_streamly("q")) == ["The ", "The answer ", "The answer is 42."]
    assert server.requests[0].json["stream"] is True


@pytest.mark.parametrize(
    "reply",
    [
        Reply.stream(["Hello", " world"], space=True),
        Reply.stream(["Hello", " world"], space=False),
        Reply.stream(["Hello", None, " world"]),
        Reply.stream(["Hello"], final_content=" world"),
        Reply.stream(["Hello", " world"], done=False),
        Reply.stream(["Hello", " world"], role_chunk=False, omit_finish_key=True),
        Reply.sse(['{"choices":[{"delta":{"content":"Hello world"},"finish_reason":"stop"}]}']),
        Reply.sse([
            '{"choices":[{"delta":{"content":"Hello"},"finish_reason":null}]}',
            '{"choices":[{"delta":{"content":" world"},"finish_reason":"stop"}]}',
            '{"choices":[],"usage":{"total_tokens":3}}',
            "[DONE]",
        ], space=False),
    ],
    ids=["space", "no-space", "null-delta", "content-in-final-chunk", "no-done", "no-finish-key",
         "single-final-chunk", "usage-chunk"],
)
def test_sse_edge_cases(llm: Text2TextLLM, server: ScriptedServer, reply: Reply) -> None:
    server.enqueue(reply)
    assert list(llm.chat_streamly("q"))[-1] == "Hello world"


def test_empty_answer_stream_yields_nothing(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.stream([]))
    assert list(llm.chat_streamly("q")) == []


def test_error_event_raises_with_message(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.error_event("model overloaded"))
    with pytest.raises(RemoteResponseError, match="model overloaded"):
        list(llm.chat_streamly("q"))


def test_error_event_after_content_raises(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.sse(['{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}',
                              '{"error":{"message":"context length exceeded"}}']))
    seen = []
    with pytest.raises(RemoteResponseError, match="context length exceeded"):
        for text in llm.chat_streamly("q"):
            seen.append(text)
    assert seen == ["Hi"]


def test_stream_cut_mid_way_raises(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(["one ", "two ", "three"], cut_after=2))
    seen = []
    with pytest.raises(RemoteResponseError, match=r"cut off|ended before"):
        for text in llm.chat_streamly("q"):
            seen.append(text)
    assert seen[-1] == "one two "


def test_stream_ending_without_finish_raises(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.sse(['{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}']))
    with pytest.raises(RemoteResponseError, match="ended before"):
        list(llm.chat_streamly("q"))


def test_malformed_event_raises(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.sse(['{"choices": [', "[DONE]"]))
    with pytest.raises(RemoteResponseError, match="malformed"):
        list(llm.chat_streamly("q"))



def test_streams_reuse_the_pooled_connection(llm: Text2TextLLM, server: ScriptedServer) -> None:
    pool = llm._http._client._transport._pool  # the httpcore pool of the one client
    seen = set()
    for i in range(5):
        assert list(llm.chat_streamly(f"q{i}"))[-1] == f"echo: q{i}"
        assert len(pool.connections) == 1
        seen.add(id(pool.connections[0]))
    assert len(seen) == 1
