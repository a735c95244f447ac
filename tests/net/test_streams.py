"""Broken server-sent-event streams, through both stream paths of Text2TextLLM.

``chat_streamly`` yields the answer so far; LangChain's ``stream()`` yields deltas. For both,
what arrived before a break is delivered and then ``RemoteResponseError`` is raised, so a
partial answer never passes for a complete one (``openai_wire.stream_deltas`` docstring).
Cuts by the network are in test_resets.py; here the bytes themselves are wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from net_helpers import STREAMING, param

from mx_rag.errors import RemoteResponseError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer


def chunk(content: str | None, finish: str | None = None, **extra: object) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}], **extra})


def run(server: ScriptedServer, path: str) -> tuple[list[str], Callable[[], None]]:
    """``(received, go)``: ``go()`` runs the stream path, appending each item to ``received``."""
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m", client_param=param())
    received: list[str] = []

    def go() -> None:
        items = llm.chat_streamly("q") if path == "chat_streamly" else llm.stream("q")
        for item in items:
            received.append(item)

    return received, go


BROKEN = {
    "no-done-no-finish": (Reply.sse([chunk("Hel"), chunk("lo")]), "ended before the answer was finished"),
    "cut-mid-token": (Reply.stream(["Hel", "lo", " world"], cut_after=2), "cut off"),
    "malformed-line": (Reply.sse([chunk("Hel"), '{"choices": [{"delta": {"content": "lo"', "[DONE]"]), "malformed"),
    "error-event": (Reply.sse([chunk("Hel"), json.dumps({"error": {"message": "KV cache full"}})]), "KV cache full"),
    "vllm-object-error": (Reply.sse([chunk("Hel"), json.dumps({"object": "error", "message": "engine dead"})]),
                          "engine dead"),
    "deeply-nested": (Reply.sse([chunk("Hel"), "[" * 50_000 + "]" * 50_000]), "malformed"),
    "not-a-chunk": (Reply.sse([chunk("Hel"), "42", "[DONE]"]), "no choices"),
    "json-instead-of-sse": (Reply.chat("Hello"), "ended before the answer was finished"),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("path", STREAMING)
def test_broken_stream_raises_after_what_arrived(server: ScriptedServer, path: str, case: str) -> None:
    reply, message = BROKEN[case]
    server.enqueue(reply)
    received, go = run(server, path)
    with pytest.raises(RemoteResponseError, match=message) as info:
        go()
    assert "\n" not in str(info.value) and server.url("/v1/chat/completions") in str(info.value)
    deltas = {"json-instead-of-sse": [], "no-done-no-finish": ["Hel", "lo"], "cut-mid-token": ["Hel", "lo"]}
    expected = deltas.get(case, ["Hel"])
    if path == "chat_streamly":
        expected = ["".join(expected[: i + 1]) for i in range(len(expected))]
    assert received == expected


@pytest.mark.parametrize("path", STREAMING)
def test_error_null_is_not_an_error(server: ScriptedServer, path: str) -> None:
    server.enqueue(Reply.sse([chunk("Hel", error=None), chunk("lo", "stop", error=None), "[DONE]"]))
    received, go = run(server, path)
    go()
    assert received == (["Hel", "Hello"] if path == "chat_streamly" else ["Hel", "lo"])


@pytest.mark.parametrize("path", STREAMING)
def test_non_string_finish_reason_does_not_end_the_answer(server: ScriptedServer, path: str) -> None:
    server.enqueue(Reply.sse([json.dumps({"choices": [{"delta": {"content": "Hel"}, "finish_reason": 0}]}),
                              json.dumps({"choices": [{"delta": {"content": "lo"}, "finish_reason": []}]})]))
    received, go = run(server, path)
    with pytest.raises(RemoteResponseError, match="ended before"):
        go()
    assert received[-1] in ("Hello", "lo")


def test_non_streaming_answer_with_error_null_is_read(server: ScriptedServer) -> None:
    server.enqueue(Reply.json({"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}], "error": None}))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m", client_param=param())
    assert llm.chat("q") == "fine"


def test_non_streaming_object_error_is_reported(server: ScriptedServer) -> None:
    server.enqueue(Reply.json({"object": "error", "message": "model not loaded", "code": 500}))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m", client_param=param())
    with pytest.raises(RemoteResponseError, match="model not loaded"):
        llm.chat("q")
