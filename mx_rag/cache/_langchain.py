# SPDX-License-Identifier: Apache-2.0
"""``LangChainCache``: an ``MxRAGCache`` chain as a LangChain LLM cache (what ``get_obj`` returns)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.caches import BaseCache
from langchain_core.outputs import Generation

if TYPE_CHECKING:
    from mx_rag.cache.mxrag_cache import MxRAGCache

__all__ = ["LangChainCache"]


class LangChainCache(BaseCache):
    """``langchain_core.globals.set_llm_cache(cache.get_obj())`` answers repeated prompts from ``cache``.

    Entries are looked up by prompt; one cached for another model (``llm_string``) is a miss.
    """

    def __init__(self, cache: MxRAGCache) -> None:
        self.cache = cache

    def lookup(self, prompt: str, llm_string: str) -> Sequence[Generation] | None:
        data = self.cache.search_json(prompt)
        if not isinstance(data, dict) or data.get("llm_string") != llm_string:
            return None
        return [Generation(text=str(text)) for text in data.get("generations", [])]

    def update(self, prompt: str, llm_string: str, return_val: Sequence[Generation]) -> None:
        data: dict[str, Any] = {"llm_string": llm_string, "generations": [g.text for g in return_val]}
        self.cache.update(prompt, json.dumps(data, ensure_ascii=False))

    def clear(self, **kwargs: Any) -> None:
        self.cache.clear()
