# SPDX-License-Identifier: Apache-2.0
"""What a chain needs of an LLM (``ChatLLM``), and how any LangChain model becomes one.

Chains, the multi-query retriever, the graph extractor and CoRAG take an ``llm`` through
``chat_llm``: our ``Text2TextLLM``, any object with the same ``chat`` and ``chat_streamly``
methods, or a LangChain chat model (``BaseChatModel``, e.g. ``ChatOpenAI``) or text model
(``BaseLLM``), which ``LangChainLLM`` adapts.

Example:
    >>> from langchain_core.language_models import FakeListChatModel
    >>> llm = chat_llm("llm", FakeListChatModel(responses=["faiss.index"]))
    >>> llm.chat("Where are vectors kept?", sys_messages=[{"role": "system", "content": "Be brief."}])
    'faiss.index'
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from langchain_core.language_models import BaseLanguageModel

from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.openai_wire import check_sys_messages
from mx_rag.utils.checks import check_str, fail
from mx_rag.utils.common import LLM_TEXT_MAX_LEN, MAX_ROLE_LEN

__all__ = ["ChatLLM", "LLMLike", "LangChainLLM", "chat_deltas", "chat_llm", "cumulative", "differences"]


@runtime_checkable
class ChatLLM(Protocol):
    """A chat model as chains call it (the methods of ``Text2TextLLM``)."""

    def chat(self, query: str, sys_messages: list[dict[str, Any]] | None = None, role: str = "user",
             llm_config: LLMParameterConfig | None = None) -> str:
        """The whole answer to ``sys_messages`` + ``{"role": role, "content": query}``."""
        ...

    def chat_streamly(self, query: str, sys_messages: list[dict[str, Any]] | None = None, role: str = "user",
                      llm_config: LLMParameterConfig | None = None) -> Iterator[str]:
        """The answer so far, growing with each item (cumulative text, not deltas)."""
        ...


LLMLike = ChatLLM | BaseLanguageModel
"""What an ``llm`` parameter takes: a ``ChatLLM`` or a LangChain ``BaseLanguageModel`` (checked by ``chat_llm``)."""


class LangChainLLM:
    """A LangChain ``BaseChatModel`` or ``BaseLLM`` as a ``ChatLLM``.

    Messages keep their roles (a text model sees them as LangChain renders a chat prompt).
    ``max_tokens``, ``temperature`` and ``top_p`` of the call's ``LLMParameterConfig`` go to the
    model as ``invoke`` keyword arguments, as ``ChatOpenAI`` takes them; with
    ``pass_config=False`` they are left out and the model's own settings apply (for models that
    refuse unknown arguments).

    Args:
        model: the LangChain model.
        pass_config: send the generation settings with each call. Default True.
    """

    def __init__(self, model: Any, pass_config: bool = True) -> None:
        if not isinstance(model, BaseLanguageModel):
            raise fail("model", model, "a LangChain BaseChatModel or BaseLLM")
        self.model, self.pass_config = model, pass_config

    def __repr__(self) -> str:
        return f"LangChainLLM({type(self.model).__name__})"

    def chat(self, query: str, sys_messages: list[dict[str, Any]] | None = None, role: str = "user",
             llm_config: LLMParameterConfig | None = None) -> str:
        messages, options = self._call(query, sys_messages, role, llm_config)
        return _text(self.model.invoke(messages, **options))

    def chat_streamly(self, query: str, sys_messages: list[dict[str, Any]] | None = None, role: str = "user",
                      llm_config: LLMParameterConfig | None = None) -> Iterator[str]:
        return cumulative(self.chat_deltas(query, sys_messages, role, llm_config))

    def chat_deltas(self, query: str, sys_messages: list[dict[str, Any]] | None = None, role: str = "user",
                    llm_config: LLMParameterConfig | None = None) -> Iterator[str]:
        messages, options = self._call(query, sys_messages, role, llm_config)
        pieces = (_text(chunk) for chunk in self.model.stream(messages, **options))
        return (piece for piece in pieces if piece)  # a role-only chunk adds nothing

    def _call(self, query: str, sys_messages: Any, role: str,
              llm_config: LLMParameterConfig | None) -> tuple[list[Any], dict[str, Any]]:
        from langchain_core.messages import convert_to_messages

        check_str("query", query, 1, LLM_TEXT_MAX_LEN)
        check_str("role", role, 1, MAX_ROLE_LEN)
        turns = [*check_sys_messages(sys_messages), {"role": role, "content": query}]
        options: dict[str, Any] = {}
        if self.pass_config and llm_config is not None:
            options = {"max_tokens": llm_config.max_tokens, "temperature": llm_config.temperature,
                       "top_p": llm_config.top_p}
        return convert_to_messages(turns), options


def chat_llm(name: str, value: Any, *, stream: bool = True) -> ChatLLM:
    """``value`` as a ``ChatLLM``: returned as it is when it has ``chat`` and ``chat_streamly`` (only
    ``chat`` with ``stream=False``, for callers that never stream), a LangChain model wrapped in
    ``LangChainLLM``; anything else is a ``ParameterError`` naming ``name``."""
    if isinstance(value, ChatLLM) or (not stream and callable(getattr(value, "chat", None))):
        return value
    if isinstance(value, BaseLanguageModel):
        return LangChainLLM(value)
    methods = "chat() and chat_streamly()" if stream else "chat()"
    raise fail(name, value, f"a Text2TextLLM, an object with {methods}, or a LangChain chat or text model")


def _text(output: Any) -> str:
    """The text of a chat model's message (or chunk) or of a text model's string."""
    if isinstance(output, str):
        return output
    text = getattr(output, "text", None)
    if isinstance(text, str):
        return str(text)
    return str(text()) if callable(text) else str(getattr(output, "content", ""))  # older langchain-core: a method


def chat_deltas(llm: ChatLLM, query: str, sys_messages: list[dict[str, Any]] | None = None, role: str = "user",
                llm_config: LLMParameterConfig | None = None) -> Iterator[str]:
    """The answer of ``llm`` as text deltas: its own ``chat_deltas`` where it has one (``Text2TextLLM``,
    ``LangChainLLM``), else the differences of its ``chat_streamly`` text (an item that does not
    extend the text so far adds nothing)."""
    own = getattr(llm, "chat_deltas", None)
    if callable(own):
        deltas: Iterator[str] = own(query, sys_messages=sys_messages, role=role, llm_config=llm_config)
        return deltas
    return differences(llm.chat_streamly(query, sys_messages=sys_messages, role=role, llm_config=llm_config))


def differences(texts: Iterator[str]) -> Iterator[str]:
    """Growing texts turned into the deltas between them (the inverse of ``cumulative``)."""
    sent = ""
    for text in texts:
        if text.startswith(sent) and len(text) > len(sent):
            yield text[len(sent):]
            sent = text


def cumulative(pieces: Iterator[str]) -> Iterator[str]:
    """Deltas turned into the growing text (what ``chat_streamly`` yields)."""
    text = ""
    for piece in pieces:
        text += piece
        yield text
