# SPDX-License-Identifier: Apache-2.0
"""``Chain``: the base of every chain (one ``query`` method, plus ``aquery`` for servers)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import Any

from mx_rag.llm.llm_parameter import LLMParameterConfig


class Chain(ABC):
    """A question-answering pipeline around an LLM.

    ``query`` returns a dict, or an iterator of dicts when streaming; ``aquery`` does the same
    for asyncio code without blocking the event loop.
    """

    @abstractmethod
    def query(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """Answer ``text``."""

    async def aquery(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """``query`` run in a worker thread; a streamed answer becomes an async iterator."""
        result = await asyncio.to_thread(self.query, text, llm_config, *args, **kwargs)
        if isinstance(result, dict):
            return result
        return _aiter_in_thread(result)


async def _aiter_in_thread(items: Iterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    done = object()
    while True:
        item = await asyncio.to_thread(next, items, done)
        if item is done:
            return
        yield item  # type: ignore[misc]
