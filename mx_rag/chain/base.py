# SPDX-License-Identifier: Apache-2.0
"""``Chain``: the base of every chain (one ``query`` method, plus ``aquery`` for servers)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import Any

from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.protocol import differences


class Chain(ABC):
    """A question-answering pipeline around an LLM.

    ``query`` returns a dict, or an iterator of dicts when streaming (each holding the answer so
    far, as in the original); ``aquery`` does the same for asyncio code without blocking the event
    loop. ``stream`` is the one streaming shape for new code: the answer's deltas, then the result.
    """

    @abstractmethod
    def query(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """Answer ``text``."""

    def stream(self, text: str, llm_config: LLMParameterConfig | None = None) -> Iterator[tuple[str, Any]]:
        """The answer as it comes: ``("delta", text)`` items, then one ``("result", result)`` with
        the whole result as ``query`` returns it. This default reads ``query`` with ``stream=True``
        (a chain that returns one dict gives it as one delta); the text chains send the LLM's
        deltas as they arrive."""
        config = (llm_config or LLMParameterConfig()).replace(stream=True)
        result = self.query(text, config)
        items = iter([result]) if isinstance(result, dict) else result
        last: dict[str, Any] = {}

        def answers() -> Iterator[str]:
            nonlocal last
            for item in items:
                last = item
                yield str(item.get("result", ""))

        for delta in differences(answers()):
            yield "delta", delta
        yield "result", last

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
