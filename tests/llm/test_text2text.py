"""Text2TextLLM against the scripted OpenAI-compatible server: request shape, answers, limits."""

import copy

import pytest

from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.llm.text2text import _check_sys_messages
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam


def test_chat_sends_openai_body_and_returns_content(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("Paris"))
    answer = llm.chat("Capital of France?", sys_messages=[{"role": "system", "content": "Be brief."}])
    assert answer == "Paris"
    body = server.requests[0].json
    assert body["model"] == "scripted"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
    ]
    assert body["stream"] is False
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (512, 1.0, 1.0, None)
    assert server.requests[0].headers["content-type"] == "application/json"


def test_per_call_config_wins_and_instance_config_is_default(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("a"), Reply.chat("b"))
    llm.chat("q", llm_config=LLMParameterConfig(max_tokens=7, temperature=0.2, seed=3))
    llm.chat("q")
    first, second = (r.json for r in server.requests)
    assert (first["max_tokens"], first["temperature"], first["seed"]) == (7, 0.2, 3)
    assert (second["max_tokens"], second["temperature"]) == (512, 1.0)


def test_role_is_sent(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("ok"))
    llm.chat("hello", role="assistant")
    assert server.requests[0].json["messages"][-1] == {"role": "assistant", "content": "hello"}


def test_caller_lists_never_mutated_across_20_calls(llm: Text2TextLLM, server: ScriptedServer) -> None:
    sys_messages = [{"role": "system", "content": "You are terse."}]
    before = copy.deepcopy(sys_messages)
    for i in range(20):
        assert llm.chat(f"question {i}", sys_messages=sys_messages) == f"echo: question {i}"
        assert "".join(llm.chat_streamly(f"stream {i}", sys_messages=sys_messages)) != ""
    assert sys_messages == before
    assert all(len(r.json["messages"]) == 2 for r in server.requests)
    assert len(server.requests) == 40


def test_instances_do_not_share_default_config(server: ScriptedServer, param: ClientParam) -> None:
    url = server.url("/v1/chat/completions")
    a = Text2TextLLM(base_url=url, model_name="a", client_param=param)
    b = Text2TextLLM(base_url=url, model_name="b", client_param=param)
    assert a.llm_config is not b.llm_config
    a.llm_config.temperature = 0.1
    assert b.llm_config.temperature == 1.0


def test_null_content_is_empty_answer(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat(None, reasoning_content="thinking"))
    assert llm.chat("q") == ""


def test_length_finish_appends_truncation_mark(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("partial", finish_reason="length"), Reply.stream(["par", "tial"], finish_reason="length"))
    assert llm.chat("q") == "partial......"
    assert list(llm.chat_streamly("q"))[-1] == "partial......"


def test_chunked_response_without_content_length(llm: Text2TextLLM, server: ScriptedServer) -> None:
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "chunked"},
                               "finish_reason": "stop"}]}
    server.enqueue(Reply.json(completion, chunked=True))
    assert llm.chat("q") == "chunked"


def test_api_key_and_headers_are_sent(server: ScriptedServer) -> None:
    param = ClientParam(use_http=True, api_key="sk-test", headers={"X-Tenant": "blue"})
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m", client_param=param)
    llm.chat("q")
    list(llm.chat_streamly("q"))
    for request in server.requests:
        assert request.headers["authorization"] == "Bearer sk-test"
        assert request.headers["x-tenant"] == "blue"
    assert "sk-test" not in repr(param)


def test_langchain_invoke_and_stream_deltas(llm: Text2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("invoked"), Reply.stream(["Hel", "lo ", "world"]))
    assert llm.invoke("hi") == "invoked"
    chunks = list(llm.stream("hi"))
    assert chunks == ["Hel", "lo ", "world"]
    assert "".join(chunks) == "Hello world"


def test_langchain_stop_sequences_are_sent(llm: Text2TextLLM, server: ScriptedServer) -> None:
    llm.invoke("hi", stop=["\n\n"])
    assert server.requests[0].json["stop"] == ["\n\n"]


# -- limits -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"query": ""}, "query"),
        ({"query": "x" * (4 * 1024 * 1024 + 1)}, "query"),
        ({"query": "q", "role": ""}, "role"),
        ({"query": "q", "role": "r" * 17}, "role"),
        ({"query": "q", "sys_messages": [{"role": "system", "content": "s"}] * 17}, "sys_messages"),
        ({"query": "q", "sys_messages": [{"k" * 17: "v"}]}, "sys_messages[0] key"),
        ({"query": "q", "sys_messages": [{"content": "x" * (4 * 1024 * 1024 + 1)}]}, "sys_messages[0]['content']"),
        ({"query": "q", "sys_messages": ["not a dict"]}, "sys_messages[0]"),
        ({"query": "q", "llm_config": {"max_tokens": 5}}, "llm_config"),
    ],
)
def test_chat_limits_name_the_parameter(llm: Text2TextLLM, server: ScriptedServer, kwargs: dict, name: str) -> None:
    for method in (llm.chat, llm.chat_streamly):
        with pytest.raises(ParameterError) as info:
            method(**kwargs)
        assert str(info.value).startswith(name)
    assert server.requests == []


def test_check_sys_messages_is_exported() -> None:
    assert _check_sys_messages(None) == []
    with pytest.raises(ValueError, match="sys_messages"):
        _check_sys_messages("system")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"base_url": "", "model_name": "m"}, "base_url"),
        ({"base_url": "ftp://h/x", "model_name": "m"}, "base_url"),
        ({"base_url": "https://h/" + "x" * 2100, "model_name": "m"}, "base_url"),
        ({"base_url": "http://h/x", "model_name": "m"}, "use_http"),
        ({"base_url": "https://u:p@h/x", "model_name": "m"}, "base_url"),
        ({"base_url": "https://h/x", "model_name": ""}, "model_name"),
        ({"base_url": "https://h/x", "model_name": "m" * 129}, "model_name"),
        ({"base_url": "https://h/x", "model_name": "m", "llm_config": "hot"}, "llm_config"),
        ({"base_url": "https://h/x", "model_name": "m", "client_param": {"timeout": 1}}, "client_param"),
    ],
)
def test_constructor_limits(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ParameterError, match=fragment):
        Text2TextLLM(**kwargs)


def test_https_allowed_with_use_http() -> None:
    llm = Text2TextLLM(base_url="https://h.example/v1/chat/completions", model_name="m",
                       client_param=ClientParam(use_http=True))
    assert llm.base_url.startswith("https://")
