# SPDX-License-Identifier: Apache-2.0
"""``MxRAGCache``: a question -> answer cache, exact (memory) or semantic (similarity), chained with ``join``.

A lookup tries this cache, then each joined one in turn; a hit further down is copied into the
caches above it. An update goes to every cache of the chain.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import weakref
from typing import Any, ClassVar

from mx_rag.cache._memory import MemoryStore
from mx_rag.cache._similarity import SimilarityStore
from mx_rag.cache.config import CacheConfig, SimilarityCacheConfig
from mx_rag.utils.checks import check_bool, check_int, check_pattern, check_str, fail

__all__ = ["MxRAGCache"]

logger = logging.getLogger(__name__)

MAX_QUERY_LEN = 128 * 1024 * 1024
MAX_ANSWER_LEN = 1_000_000
MAX_JOIN_DEPTH = 6
NAME_PATTERN = r"[0-9A-Za-z_]{1,63}"


def _flush_at_exit(ref: weakref.ReferenceType[MxRAGCache]) -> None:
    cache = ref()
    if cache is not None and isinstance(cache._store, MemoryStore) and cache._store.dirty:
        try:
            cache._store.flush()
        except Exception as exc:
            logger.warning("cache %s: flush at exit failed: %s", cache.cache_name, exc)


class MxRAGCache:
    """A cache of answers by question, kept on disk in ``config.data_save_folder``.

    Args:
        cache_name: 1 to 63 letters, digits or underscores; names the cache's files.
        config: ``CacheConfig`` (exact match) or ``SimilarityCacheConfig`` (similar questions
            hit too; with ``vector_config`` and ``cache_config`` None it is an exact-match cache).

    A memory cache is written every ``auto_flush`` updates, on ``flush()`` and at exit; a
    similarity cache writes every update through. Several processes may share one folder (each
    change holds ``<folder>/<cache_name>.lock``); an answer one process flushed is found by the others.

    Example:
        >>> from mx_rag.cache import CacheConfig, MxRAGCache
        >>> cache = MxRAGCache("qa", CacheConfig(cache_size=100, data_save_folder="/tmp/qa_cache"))
        >>> cache.update("Who wrote Hamlet?", "Shakespeare")
        >>> cache.search("Who wrote Hamlet?")
        'Shakespeare'
    """

    cache_limit: ClassVar[int] = MAX_ANSWER_LEN
    verbose: ClassVar[bool] = False

    def __init__(self, cache_name: str, config: CacheConfig) -> None:
        self.cache_name = check_pattern("cache_name", cache_name, NAME_PATTERN)
        if not isinstance(config, CacheConfig):
            raise fail("config", config, "a CacheConfig or a SimilarityCacheConfig")
        self.config = config
        self._store: MemoryStore | SimilarityStore
        if isinstance(config, SimilarityCacheConfig) and config.is_similarity:
            self._store = SimilarityStore(cache_name, config)
        else:
            self._store = MemoryStore(cache_name, config)
            atexit.register(_flush_at_exit, weakref.ref(self))
        self._next: MxRAGCache | None = None
        self._lock = threading.Lock()

    # -- class-wide settings -------------------------------------------------------------------

    @classmethod
    def set_cache_limit(cls, cache_limit: int) -> None:
        """Answers longer than ``cache_limit`` characters (in [1, 1000000]) are not cached."""
        MxRAGCache.cache_limit = check_int("cache_limit", cache_limit, 1, MAX_ANSWER_LEN)

    @classmethod
    def set_verbose(cls, verbose: bool) -> None:
        """Log each hit and miss (at INFO, without the question's text)."""
        MxRAGCache.verbose = check_bool("verbose", verbose)

    # -- chain -----------------------------------------------------------------------------------

    def join(self, next_cache: MxRAGCache) -> None:
        """Put ``next_cache`` after this one (at the end of this cache's chain); no cycles, at most 6 deep."""
        if not isinstance(next_cache, MxRAGCache):
            raise fail("next_cache", next_cache, "an MxRAGCache")
        if next_cache is self:
            raise fail("next_cache", next_cache.cache_name, "another cache (a cache cannot join itself)")
        chain = self._chain()
        if any(cache is next_cache for cache in chain) or any(cache is self for cache in next_cache._chain()):
            raise fail("next_cache", next_cache.cache_name, "a cache not already in this chain (no cycles)")
        if len(chain) + len(next_cache._chain()) > MAX_JOIN_DEPTH:
            raise fail("next_cache", next_cache.cache_name, f"a chain of at most {MAX_JOIN_DEPTH} caches in all")
        chain[-1]._next = next_cache

    def _chain(self) -> list[MxRAGCache]:
        chain: list[MxRAGCache] = []
        cache: MxRAGCache | None = self
        while cache is not None:
            chain.append(cache)
            cache = cache._next
        return chain

    # -- operations --------------------------------------------------------------------------------

    def search(self, query: str) -> str | None:
        """The cached answer to ``query`` (or to a similar question), or None on a miss.

        Args:
            query: 1 to 128 Mi characters.
        """
        check_str("query", query, 1, MAX_QUERY_LEN)
        above: list[MxRAGCache] = []
        for cache in self._chain():
            answer = cache._store.get(query)
            if answer is not None:
                if MxRAGCache.verbose:
                    logger.info("cache %s: hit", cache.cache_name)
                for upper in above:
                    upper._store.put(query, answer)
                return answer
            if MxRAGCache.verbose:
                logger.info("cache %s: miss", cache.cache_name)
            above.append(cache)
        return None

    def search_json(self, query: str) -> Any:
        """``search(query)`` decoded from JSON (how the chain and LangChain caches store answers);
        None on a miss or when the stored answer is not JSON (logged)."""
        found = self.search(query)
        if found is None:
            return None
        try:
            return json.loads(found)
        except ValueError:
            logger.warning("cache %s holds an answer that is not JSON: treated as a miss", self.cache_name)
            return None

    def update(self, query: str, answer: str) -> None:
        """Store ``answer`` for ``query`` in every cache of the chain (skipped when longer than the cache limit).

        Args:
            query: 1 to 128 Mi characters.
            answer: 1 to ``cache_limit`` characters (longer ones are not cached).
        """
        check_str("query", query, 1, MAX_QUERY_LEN)
        if not isinstance(answer, str) or not answer:
            raise fail("answer", answer, "a non-empty str")
        if len(answer) > min(MAX_ANSWER_LEN, MxRAGCache.cache_limit):
            logger.info("cache %s: an answer of %d characters is over the cache limit (%d); not cached",
                        self.cache_name, len(answer), MxRAGCache.cache_limit)
            return
        for cache in self._chain():
            cache._store.put(query, answer)

    def flush(self) -> None:
        """Write every cache of the chain to disk now.

        Raises:
            StorageError: less than ``min_free_space`` is free in a cache's folder.
        """
        for cache in self._chain():
            cache._store.flush()

    def clear(self) -> None:
        """Remove every entry of every cache of the chain, in memory and on disk."""
        for cache in self._chain():
            cache._store.clear()

    def get_obj(self) -> Any:
        """A LangChain ``BaseCache`` backed by this cache chain (``set_llm_cache(cache.get_obj())``)."""
        from mx_rag.cache._langchain import LangChainCache

        return LangChainCache(self)

    def __len__(self) -> int:
        """Entries in this cache (not the caches joined to it)."""
        return len(self._store)

    def __repr__(self) -> str:
        kind = "similarity" if isinstance(self._store, SimilarityStore) else "memory"
        return f"MxRAGCache({self.cache_name!r}, {kind}, {str(self.config.data_save_folder)!r})"

