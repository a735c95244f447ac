# SPDX-License-Identifier: Apache-2.0
"""Shared base of the chat clients: fields, validation, one pooled HTTP client, request loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.llms import LLM
from pydantic import ConfigDict, Field, PrivateAttr

from mx_rag.llm import openai_wire
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.openai_wire import check_sys_messages
from mx_rag.utils.checks import check_instance, check_str
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import (
    MAX_MODEL_NAME_LENGTH,
    MAX_ROLE_LEN,
)
from mx_rag.utils.http import HttpClient, check_url
from mx_rag.utils.validated import ParameterErrorInit, instance_field


class ChatModel(ParameterErrorInit, LLM):
    """Fields and transport shared by ``Text2TextLLM`` and ``Img2TextLLM``."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    base_url: str
    model_name: str
    llm_config: LLMParameterConfig = Field(default_factory=LLMParameterConfig)
    client_param: ClientParam = Field(default_factory=ClientParam)

    _http: HttpClient = PrivateAttr()

    _exact_config = instance_field("llm_config", LLMParameterConfig)
    _exact_param = instance_field("client_param", ClientParam)

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

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        """LangChain entry: one user turn made of ``prompt`` (see ``_prompt_messages``)."""
        return self._complete(self._prompt_messages(prompt), self.llm_config, stop)

    def _prompt_messages(self, prompt: str) -> list[dict[str, Any]]:
        """The messages a LangChain ``prompt`` is sent as (each model checks it its own way)."""
        raise NotImplementedError

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
        body = {**openai_wire.chat_body(self.model_name, messages, config, stream=False, stop=stop), **(extra or {})}
        response = self._http.post_json(self.base_url, body)
        return openai_wire.parse_message(response.json(), self.base_url)

    def _deltas(
        self, messages: list[dict], config: LLMParameterConfig, stop: list[str] | None = None
    ) -> Iterator[str]:
        body = openai_wire.chat_body(self.model_name, messages, config, stream=True, stop=stop)
        return openai_wire.stream_deltas(self._http.stream_lines(self.base_url, body), self.base_url)

