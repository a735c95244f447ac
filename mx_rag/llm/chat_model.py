# SPDX-License-Identifier: Apache-2.0
"""``ChatText2Text``: a LangChain chat model (``BaseChatModel``) over a ``Text2TextLLM``.

``Text2TextLLM`` is a LangChain ``LLM``: a ``ChatPromptTemplate`` given to it is flattened into
one user message. Wrapped in ``ChatText2Text`` the messages keep their roles (system, user,
assistant), so prompt templates, chat history and LangChain agents work as written. The HTTP
client, TLS settings, retries and default ``llm_config`` are the wrapped LLM's.

Example:
    >>> from langchain_core.prompts import ChatPromptTemplate
    >>> chat = ChatText2Text(llm=Text2TextLLM(base_url=url, model_name="qwen"))     # doctest: +SKIP
    >>> prompt = ChatPromptTemplate.from_messages([("system", "Answer in French."), ("human", "{q}")])
    >>> (prompt | chat).invoke({"q": "What is the capital of Italy?"}).content          # doctest: +SKIP
    'Rome.'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LangSmithParams
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ChatMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, SecretStr, ValidationError, field_validator

from mx_rag.errors import ParameterError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.utils.checks import as_parameter_error, check_instance

__all__ = ["ChatText2Text", "to_openai_messages"]

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}
_SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as OpenAI chat messages (``{"role", "content"}``), roles kept.

    Raises:
        ParameterError: a tool message, a tool call, or no message at all.
    """
    if not messages:
        raise ParameterError("messages must hold at least one message")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = message.role if isinstance(message, ChatMessage) else _ROLES.get(message.type)
        if role is None or getattr(message, "tool_calls", None):
            raise ParameterError(f"messages[{i}] is a {message.type!r} message: ChatText2Text sends system, "
                                 "human and ai messages (tool calling is not supported)")
        out.append({"role": role, "content": message.content})
    return out


class ChatText2Text(BaseChatModel):
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
    ``stop`` is LangChain's. Streaming yields deltas. Tool calling and structured output are
    not offered.
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

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise as_parameter_error(exc) from exc

    @field_validator("llm", mode="before")
    @classmethod
    def _check_llm(cls, value: Any) -> Any:
        return check_instance("llm", value, Text2TextLLM)

    @field_validator("llm_config", mode="before")
    @classmethod
    def _check_config(cls, value: Any) -> Any:
        return None if value is None else check_instance("llm_config", value, LLMParameterConfig)

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
        text = self.llm._complete(to_openai_messages(messages), self._config(kwargs), self._stop(stop))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for delta in self.llm._deltas(to_openai_messages(messages), self._config(kwargs), self._stop(stop)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=delta))
            if run_manager is not None:
                run_manager.on_llm_new_token(delta, chunk=chunk)
            yield chunk
