# SPDX-License-Identifier: Apache-2.0
"""Shared base of the chat clients: fields, validation, one pooled HTTP client, request loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.llms import LLM
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from mx_rag.llm import _openai
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.utils.checks import check_instance, check_str, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import (
    LLM_TEXT_MAX_LEN,
    MAX_MESSAGE_KEY_LEN,
    MAX_MESSAGE_KEYS,
    MAX_MODEL_NAME_LENGTH,
    MAX_ROLE_LEN,
    MAX_SYS_MESSAGES,
)
from mx_rag.utils.http import HttpClient, check_url
from mx_rag.utils.validated import ParameterErrorInit


def check_sys_messages(sys_messages: Any) -> list[dict[str, Any]]:
    """None or a list of at most 16 dicts, each with at most 16 keys of at most 16 characters and
    str values of at most 4 MiB (non-str values, such as content-part lists, are passed through)."""
    if sys_messages is None:
        return []
    if not isinstance(sys_messages, list):
        raise fail("sys_messages", sys_messages, "None or a list of dicts")
    if len(sys_messages) > MAX_SYS_MESSAGES:
        raise fail("sys_messages", f"<{len(sys_messages)} messages>", f"at most {MAX_SYS_MESSAGES} messages")
    for i, message in enumerate(sys_messages):
        if not isinstance(message, dict):
            raise fail(f"sys_messages[{i}]", message, "a dict")
        if len(message) > MAX_MESSAGE_KEYS:
            raise fail(f"sys_messages[{i}]", f"<{len(message)} keys>", f"at most {MAX_MESSAGE_KEYS} keys")
        for key, value in message.items():
            check_str(f"sys_messages[{i}] key", key, 1, MAX_MESSAGE_KEY_LEN)
            if isinstance(value, str):
                check_str(f"sys_messages[{i}][{key!r}]", value, 0, LLM_TEXT_MAX_LEN)
    return sys_messages


class ChatModel(ParameterErrorInit, LLM):
    """Fields and transport shared by ``Text2TextLLM`` and ``Img2TextLLM``."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    base_url: str
    model_name: str
    llm_config: LLMParameterConfig = Field(default_factory=LLMParameterConfig)
    client_param: ClientParam = Field(default_factory=ClientParam)

    _http: HttpClient = PrivateAttr()

    @field_validator("llm_config", mode="before")
    @classmethod
    def _exact_config(cls, value: Any) -> Any:
        return check_instance("llm_config", value, LLMParameterConfig)

    @field_validator("client_param", mode="before")
    @classmethod
    def _exact_param(cls, value: Any) -> Any:
        return check_instance("client_param", value, ClientParam)

    def model_post_init(self, context: Any, /) -> None:
        check_str("model_name", self.model_name, 1, MAX_MODEL_NAME_LENGTH)
        check_url("base_url", self.base_url, self.client_param)
        self._http = HttpClient(self.client_param)

    def close(self) -> None:
        """Close the pooled connections; the object cannot make calls afterwards."""
        self._http.close()

    @property
    def _llm_type(self) -> str:
        return self.model_name

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model_name": self.model_name}

    def _resolve(self, role: str, sys_messages: Any, llm_config: Any) -> tuple[list[dict], LLMParameterConfig]:
        check_str("role", role, 1, MAX_ROLE_LEN)
        messages = check_sys_messages(sys_messages)
        if llm_config is None:
            return messages, self.llm_config
        return messages, check_instance("llm_config", llm_config, LLMParameterConfig)

    def _complete(self, messages: list[dict], config: LLMParameterConfig, stop: list[str] | None = None) -> str:
        return self._complete_message(messages, config, stop)[0]

    def _complete_message(self, messages: list[dict], config: LLMParameterConfig, stop: list[str] | None = None,
                          extra: dict[str, Any] | None = None) -> tuple[str, list[dict[str, Any]]]:
        """The answer and its tool calls; ``extra`` adds request fields (``tools``, ``tool_choice``)."""
        body = {**_openai.chat_body(self.model_name, messages, config, stream=False, stop=stop), **(extra or {})}
        response = self._http.post_json(self.base_url, body)
        return _openai.parse_message(response.json(), self.base_url)

    def _deltas(
        self, messages: list[dict], config: LLMParameterConfig, stop: list[str] | None = None
    ) -> Iterator[str]:
        body = _openai.chat_body(self.model_name, messages, config, stream=True, stop=stop)
        return _openai.stream_deltas(self._http.stream_lines(self.base_url, body), self.base_url)

