# SPDX-License-Identifier: Apache-2.0
"""``Text2TextLLM``: chat with any OpenAI-compatible server (vLLM, MindIE, TGI, llama.cpp, Ollama)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.outputs import GenerationChunk

from mx_rag.llm._chat import ChatModel
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.openai_wire import build_messages, check_sys_messages
from mx_rag.llm.protocol import cumulative
from mx_rag.utils.checks import check_str
from mx_rag.utils.common import LLM_TEXT_MAX_LEN

__all__ = ["Text2TextLLM", "_check_sys_messages"]

# The original exposes this name; chains import it to validate their own sys_messages.
_check_sys_messages = check_sys_messages


class Text2TextLLM(ChatModel):
    """A text chat model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    One pooled HTTP client per instance is reused across calls and threads. Nothing passed in
    is modified: every call builds a new message list.

    Args:
        base_url: the full chat-completions URL, e.g. ``https://host:port/v1/chat/completions``.
        model_name: the model name sent in each request (1 to 128 characters).
        llm_config: default ``LLMParameterConfig`` when a call passes none (own copy per instance).
        client_param: ``ClientParam`` for TLS, API key, headers, timeouts and retries.

    Example:
        >>> from mx_rag.llm import Text2TextLLM, LLMParameterConfig
        >>> from mx_rag.utils import ClientParam
        >>> llm = Text2TextLLM(base_url="http://127.0.0.1:8080/v1/chat/completions",
        ...                    model_name="smollm2", client_param=ClientParam(use_http=True))
        >>> # llm.chat("What is RAG?", llm_config=LLMParameterConfig(max_tokens=64))

    Raises:
        ParameterError: an argument is out of range (also a ``ValueError``).
        RemoteError: the server could not be reached, answered an error, or sent a broken answer.
    """

    def chat(
        self,
        query: str,
        sys_messages: list[dict[str, Any]] | None = None,
        role: str = "user",
        llm_config: LLMParameterConfig | None = None,
    ) -> str:
        """Send ``sys_messages`` + ``{"role": role, "content": query}`` and return the answer.

        An answer cut at ``max_tokens`` ends with ``"......"`` (as in the original).
        """
        return self._complete(*self._request(query, sys_messages, role, llm_config))

    def chat_streamly(
        self,
        query: str,
        sys_messages: list[dict[str, Any]] | None = None,
        role: str = "user",
        llm_config: LLMParameterConfig | None = None,
    ) -> Iterator[str]:
        """Stream the answer: each item is the whole answer so far (not a delta)."""
        return cumulative(self.chat_deltas(query, sys_messages, role, llm_config))

    def chat_deltas(
        self,
        query: str,
        sys_messages: list[dict[str, Any]] | None = None,
        role: str = "user",
        llm_config: LLMParameterConfig | None = None,
    ) -> Iterator[str]:
        """Stream the answer as text deltas, in order (what an SSE relay sends on).

        Raises ``RemoteResponseError`` after the deltas received if the stream breaks off before
        the answer is finished; an answer cut at ``max_tokens`` ends with a ``"......"`` delta.
        """
        return self._deltas(*self._request(query, sys_messages, role, llm_config))

    def _request(
        self, query: str, sys_messages: Any, role: str, llm_config: Any
    ) -> tuple[list[dict[str, Any]], LLMParameterConfig]:
        """The messages and generation settings of one ``chat``/``chat_deltas`` call."""
        check_str("query", query, 1, LLM_TEXT_MAX_LEN)
        messages, config = self._resolve(role, sys_messages, llm_config)
        return build_messages(messages, role, query), config

    # -- LangChain ---------------------------------------------------------------------------

    def _prompt_messages(self, prompt: str) -> list[dict[str, Any]]:
        check_str("prompt", prompt, 1, LLM_TEXT_MAX_LEN)
        return build_messages([], "user", prompt)

    def _stream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[GenerationChunk]:
        """LangChain streams deltas (``chat_streamly`` keeps the documented cumulative text)."""
        for delta in self._deltas(self._prompt_messages(prompt), self.llm_config, stop):
            if run_manager is not None:
                run_manager.on_llm_new_token(delta)
            yield GenerationChunk(text=delta)
