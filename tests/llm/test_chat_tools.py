"""``ChatText2Text`` tool calling and structured output, against the scripted OpenAI server: what
is sent (tools, tool_choice, tool results) and how the server's tool calls come back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from mx_rag.errors import ParameterError
from mx_rag.llm import Text2TextLLM
from mx_rag.llm.chat_model import ChatText2Text
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam


class Answer(BaseModel):
    """The answer and the file it came from."""

    answer: str = Field(description="the answer")
    source: str = Field(description="the file")


@tool
def lookup(path: str) -> str:
    """Read a file of the knowledge base."""
    return path


def completion(content: str | None, calls: list[dict[str, Any]]) -> Reply:
    message = {"role": "assistant", "content": content, "tool_calls": calls}
    return Reply.json({"id": "c1", "object": "chat.completion", "model": "scripted",
                       "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})


def call(name: str, args: str, ident: str = "call_1") -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": args}}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def chat(server: ScriptedServer) -> ChatText2Text:
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                       client_param=ClientParam(use_http=True, retries=0))
    return ChatText2Text(llm=llm)


def test_bound_tools_are_sent_and_tool_calls_parsed(chat: ChatText2Text, server: ScriptedServer) -> None:
    server.enqueue(completion(None, [call("lookup", '{"path": "guide.md"}')]))
    message = chat.bind_tools([lookup], tool_choice="lookup").invoke("Open the guide.")
    assert isinstance(message, AIMessage)
    assert message.tool_calls == [{"name": "lookup", "args": {"path": "guide.md"}, "id": "call_1",
                                   "type": "tool_call"}]
    body = server.requests[0].json
    assert body["tools"][0]["function"]["name"] == "lookup"
    assert body["tools"][0]["function"]["parameters"]["properties"]["path"]["type"] == "string"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


def test_a_tool_result_goes_back_in_openai_fields(chat: ChatText2Text, server: ScriptedServer) -> None:
    asked = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"path": "a.md"}, "id": "call_9"}])
    server.enqueue(Reply.chat("It says hello."))
    reply = chat.bind_tools([lookup]).invoke([HumanMessage("Read a.md"), asked,
                                              ToolMessage("hello", tool_call_id="call_9")])
    assert reply.content == "It says hello."
    sent = server.requests[0].json["messages"]
    assert sent[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": '{"path": "a.md"}'}}]}
    assert sent[2] == {"role": "tool", "content": "hello", "tool_call_id": "call_9"}


def test_structured_output_through_a_forced_tool(chat: ChatText2Text, server: ScriptedServer) -> None:
    server.enqueue(completion(None, [call("Answer", json.dumps({"answer": "faiss.index", "source": "guide.md"}))]))
    result = chat.with_structured_output(Answer).invoke("Where are vectors kept?")
    assert result == Answer(answer="faiss.index", source="guide.md")
    assert server.requests[0].json["tool_choice"] == "required"


def test_arguments_that_are_not_json_are_an_invalid_tool_call(chat: ChatText2Text, server: ScriptedServer) -> None:
    server.enqueue(completion("", [call("lookup", "{path: guide")]))
    message = chat.bind_tools([lookup]).invoke("Open the guide.")
    assert isinstance(message, AIMessage)
    assert message.tool_calls == [] and message.invalid_tool_calls[0]["name"] == "lookup"


def test_streaming_with_tools_is_one_chunk_with_the_calls(chat: ChatText2Text, server: ScriptedServer) -> None:
    server.enqueue(completion(None, [call("lookup", '{"path": "b.md"}')]))
    chunks = list(chat.bind_tools([lookup]).stream("Open b.md"))
    assert chunks[0].tool_calls[0]["args"] == {"path": "b.md"}
    assert all(not c.content and not c.tool_call_chunks for c in chunks[1:])  # LangChain's own end marker
    assert server.requests[0].json["stream"] is False


def test_malformed_tool_calls_and_choices_are_refused(chat: ChatText2Text, server: ScriptedServer) -> None:
    from mx_rag.errors import RemoteResponseError

    server.enqueue(Reply.json({"choices": [{"message": {"content": "", "tool_calls": "lookup"}}]}))
    with pytest.raises(RemoteResponseError, match="malformed tool_calls"):
        chat.bind_tools([lookup]).invoke("x")
    with pytest.raises(ParameterError, match="tool_choice must be"):
        chat.bind_tools([lookup], tool_choice="search")
