# SPDX-License-Identifier: Apache-2.0
"""``ChatText2Text``: a LangChain chat model (``BaseChatModel``) over a ``Text2TextLLM``.

``Text2TextLLM`` is a LangChain ``LLM``: a ``ChatPromptTemplate`` given to it is flattened into
one user message. Wrapped in ``ChatText2Text`` the messages keep their roles (system, user,
assistant, tool), so prompt templates, chat history and LangChain agents work as written:
``bind_tools`` sends OpenAI tools and reads the server's tool calls, and ``with_structured_output``
works through them (the server must support tools: vLLM, OpenAI, llama.cpp with ``--jinja``). The
HTTP client, TLS settings, retries and default ``llm_config`` are the wrapped LLM's.

Example:
    >>> from langchain_core.prompts import ChatPromptTemplate
    >>> chat = ChatText2Text(llm=Text2TextLLM(base_url=url, model_name="qwen"))     # doctest: +SKIP
    >>> prompt = ChatPromptTemplate.from_messages([("system", "Answer in French."), ("human", "{q}")])
    >>> (prompt | chat).invoke({"q": "What is the capital of Italy?"}).content          # doctest: +SKIP
    'Rome.'
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LangSmithParams, LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ChatMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, SecretStr

from mx_rag.errors import ParameterError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.utils.validated import ParameterErrorInit, instance_field

__all__ = ["ChatText2Text", "to_openai_messages"]

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}
_SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")
_TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")  # request fields ``bind_tools`` sets


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as OpenAI chat messages (``{"role", "content"}``), roles kept.

    An ai message's tool calls and a tool message's ``tool_call_id`` go in OpenAI's fields.

    Raises:
        ParameterError: a message of another type (function, remove), or no message at all.
    """
    if not messages:
        raise ParameterError("messages must hold at least one message")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            out.append({"role": "tool", "content": message.content, "tool_call_id": message.tool_call_id})
            continue
        role = message.role if isinstance(message, ChatMessage) else _ROLES.get(message.type)
        if role is None:
            raise ParameterError(f"messages[{i}] is a {message.type!r} message: ChatText2Text sends system, "
                                 "human, ai and tool messages")
        entry: dict[str, Any] = {"role": role, "content": message.content}
        calls = getattr(message, "tool_calls", None)
        if calls:
            entry["content"] = message.content or None
            entry["tool_calls"] = [{"id": call["id"], "type": "function",
                                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])}}
                                   for call in calls]
        out.append(entry)
    return out


def _ai_message(text: str, raw_calls: list[dict[str, Any]]) -> AIMessage:
    """The server's answer as an ``AIMessage``: tool calls parsed, unreadable ones kept as invalid."""
    calls, invalid = [], []
    for raw in raw_calls:
        try:
            parsed = parse_tool_call(raw, return_id=True)
        except Exception as exc:  # arguments that are not JSON: LangChain's invalid tool call
            invalid.append(make_invalid_tool_call(raw, str(exc)))
        else:
            if parsed is not None:
                calls.append(parsed)
    return AIMessage(content=text, tool_calls=calls, invalid_tool_calls=invalid)


class ChatText2Text(ParameterErrorInit, BaseChatModel):
    """A LangChain chat model that sends its messages, roles kept, through a ``Text2TextLLM``.

    Args:
        llm: the ``Text2TextLLM`` (its URL, model, client and default ``llm_config`` are used).
        llm_config: generation settings of every call; None uses the LLM's own.
        temperature, max_tokens: LangChain's standard parameters, overriding ``llm_config``.
        stop: stop sequences of every call (a call's own ``stop`` replaces them).
        timeout, max_retries, api_key: LangChain's standard client parameters; when given,
            the LLM is copied with its ``ClientParam``'s ``timeout``, ``retries`` and
            ``api_key`` replaced (the object passed in is not changed).
        streaming: ``invoke`` streams from the server (LangChain's standard flag).

    A call may override ``max_tokens``, ``temperature``, ``top_p``, ``seed``,
    ``presence_penalty`` and ``frequency_penalty`` (``chat.invoke(messages, max_tokens=64)``);
    ``stop`` is LangChain's. Streaming yields deltas; with tools bound, a stream is one chunk
    (the whole answer and its tool calls, from one non-streaming request).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    llm: Text2TextLLM
    llm_config: LLMParameterConfig | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    timeout: float | None = None
    max_retries: int | None = None
    api_key: SecretStr | None = None
    streaming: bool = False

    def model_post_init(self, context: Any, /) -> None:
        changes: dict[str, Any] = {}
        if self.timeout is not None:
            changes["timeout"] = self.timeout
        if self.max_retries is not None:
            changes["retries"] = self.max_retries
        if self.api_key is not None:
            changes["api_key"] = self.api_key.get_secret_value()
        if changes:
            llm = self.llm
            param = dataclasses.replace(llm.client_param, **changes)
            self.llm = Text2TextLLM(base_url=llm.base_url, model_name=llm.model_name, llm_config=llm.llm_config,
                                    client_param=param)

    _check_llm = instance_field("llm", Text2TextLLM)
    _check_config = instance_field("llm_config", LLMParameterConfig, optional=True)

    @property
    def _llm_type(self) -> str:
        return "mx_rag-text2text"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"base_url": self.llm.base_url, "model_name": self.llm.model_name}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        config = self._config({k: v for k, v in kwargs.items() if k in _SETTINGS})
        params = LangSmithParams(ls_provider="mx_rag", ls_model_name=kwargs.get("model", self.llm.model_name),
                                 ls_model_type="chat", ls_temperature=config.temperature,
                                 ls_max_tokens=config.max_tokens)
        stops = stop if stop is not None else self.stop
        if stops:
            params["ls_stop"] = stops
        return params

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | bool | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offer ``tools`` (LangChain tools, pydantic models, functions or OpenAI tool dicts).

        ``tool_choice``: ``"auto"``, ``"none"``, ``"any"``/``"required"``/``True`` (some tool), a
        tool's name, or an OpenAI ``tool_choice`` dict.
        """
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = _tool_choice(tool_choice, formatted)
        return super().bind(tools=formatted, **kwargs)

    def _config(self, kwargs: dict[str, Any]) -> LLMParameterConfig:
        unknown = sorted(set(kwargs) - set(_SETTINGS))
        if unknown:
            raise ParameterError(f"ChatText2Text got unknown keyword argument(s) {unknown}: "
                                 f"the per-call settings it takes are {list(_SETTINGS)}")
        base = self.llm_config or self.llm.llm_config
        fields = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        changes = {**{k: v for k, v in fields.items() if v is not None}, **kwargs}
        return base.replace(**changes) if changes else base

    def _stop(self, stop: list[str] | None) -> list[str] | None:
        stops = stop if stop is not None else self.stop
        return list(stops) if stops else None

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        extra = _split_tool_fields(kwargs)
        text, calls = self.llm._complete_message(to_openai_messages(messages), self._config(kwargs),
                                                 self._stop(stop), extra)
        return ChatResult(generations=[ChatGeneration(message=_ai_message(text, calls))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        if any(kwargs.get(name) for name in _TOOL_FIELDS):
            message = self._generate(messages, stop, **kwargs).generations[0].message
            assert isinstance(message, AIMessage)
            chunks = [tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
                      for i, c in enumerate(message.tool_calls)]
            yield ChatGenerationChunk(message=AIMessageChunk(content=message.content, tool_call_chunks=chunks))
            return
        _split_tool_fields(kwargs)
        for delta in self.llm._deltas(to_openai_messages(messages), self._config(kwargs), self._stop(stop)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=delta))
            if run_manager is not None:
                run_manager.on_llm_new_token(delta, chunk=chunk)
            yield chunk


def _split_tool_fields(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the tool fields (and LangChain's tracing hint) out of a call's keyword arguments."""
    kwargs.pop("ls_structured_output_format", None)
    return {name: kwargs.pop(name) for name in _TOOL_FIELDS if kwargs.get(name) is not None}


def _tool_choice(choice: str | bool | dict[str, Any], tools: list[dict[str, Any]]) -> str | dict[str, Any]:
    names = [tool["function"]["name"] for tool in tools]
    if isinstance(choice, dict):
        return choice
    if choice is True or choice in ("any", "required"):
        return "required"
    if choice in ("auto", "none"):
        return str(choice)
    if isinstance(choice, str) and choice in names:
        return {"type": "function", "function": {"name": choice}}
    raise ParameterError(f"tool_choice must be 'auto', 'none', 'any', 'required', True, a tool name {names} "
                         f"or an OpenAI tool_choice dict, got {choice!r}")
