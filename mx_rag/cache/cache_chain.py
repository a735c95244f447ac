# SPDX-License-Identifier: Apache-2.0
"""``CacheChainChat``: answer from an ``MxRAGCache`` when it can, else from a chain (and cache that answer)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

from mx_rag.cache.mxrag_cache import MAX_QUERY_LEN, MxRAGCache
from mx_rag.chain.base import Chain
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.utils.checks import check_instance, check_str, fail

__all__ = ["CacheChainChat"]

logger = logging.getLogger(__name__)


def _check_callable(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise fail(name, value, "None or a callable")
    return value


class CacheChainChat(Chain):
    """A chain in front of which sits a cache.

    Args:
        cache: the ``MxRAGCache`` (or the first of a joined chain of caches).
        chain: any mx_rag ``Chain`` (``SingleText2TextChain``, the image chains, ...).
        convert_data_to_cache: turns the chain's result into something JSON can store; default as is.
        convert_data_to_user: turns a stored value back into the caller's form; default as is.

    A hit returns the stored result with ``"query"`` set to this question; with
    ``llm_config.stream`` it is an iterator of that one result. A streamed miss is cached when
    the stream ends (its last item).

    Example:
        >>> # chat = CacheChainChat(cache=cache, chain=SingleText2TextChain(llm=llm, retriever=retriever))
        >>> # chat.query("What is FAISS?")["result"]
    """

    def __init__(
        self,
        cache: MxRAGCache,
        chain: Chain,
        convert_data_to_cache: Callable[[Any], Any] | None = None,
        convert_data_to_user: Callable[[Any], Any] | None = None,
    ) -> None:
        self.cache = check_instance("cache", cache, MxRAGCache)
        self.chain = check_instance("chain", chain, Chain)
        self.convert_data_to_cache = _check_callable("convert_data_to_cache", convert_data_to_cache)
        self.convert_data_to_user = _check_callable("convert_data_to_user", convert_data_to_user)

    def query(
        self, text: str, llm_config: LLMParameterConfig | None = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """The cached answer to ``text`` (1 to 128 Mi characters), or the chain's, which is then cached."""
        check_str("text", text, 1, MAX_QUERY_LEN)
        stream = bool(llm_config is not None and llm_config.stream)
        cached = self._lookup(text)
        if cached is not None:
            return iter([cached]) if stream else cached
        result = self.chain.query(text, llm_config, *args, **kwargs)
        if isinstance(result, dict):
            self._store(text, result)
            return result
        return self._stream_and_store(text, result)

    def _lookup(self, text: str) -> Any:
        data = self.cache.search_json(text)
        if data is None:
            return None
        if isinstance(data, dict) and "query" in data:
            data["query"] = text
        return self.convert_data_to_user(data) if self.convert_data_to_user else data

    def _store(self, text: str, result: Any) -> None:
        data = self.convert_data_to_cache(result) if self.convert_data_to_cache else result
        try:
            encoded = json.dumps(data, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            logger.warning("the chain's result cannot be cached (%s); pass convert_data_to_cache", exc)
            return
        self.cache.update(text, encoded)

    def _stream_and_store(self, text: str, items: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        last = None
        for item in items:
            last = item
            yield item
        if last is not None:
            self._store(text, last)
