# SPDX-License-Identifier: Apache-2.0
"""The server's answer cache (``[cache]`` settings, off by default): ``MxRAGCache`` per user and knowledge base.

A cache belongs to one user, one knowledge base, one chain and ``k``, and to the knowledge base's
current documents: its name holds a digest of their ids and states, so once a document is added,
replaced or deleted the old answers are never served again. Questions with a conversation history,
and the graph and CoRAG chains, are never cached. A cached answer comes back with ``"cached": true``.
The files live in ``<data_dir>/cache/``; every worker shares them (``MxRAGCache`` locks its folder).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

from mx_rag.cache import CacheChainChat, CacheConfig, MxRAGCache, SimilarityCacheConfig

__all__ = ["AnswerCaches"]

OPEN_CACHES = 64  # caches kept open per process (the least recently used is closed first)


def _mark(data: Any) -> Any:
    if isinstance(data, dict):
        data["cached"] = True
    return data


class AnswerCaches:
    """The answer caches of one ``Answerer``."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.settings = service.settings.cache
        self.folder = (service.settings.data_dir / "cache").resolve()
        self._open: OrderedDict[str, MxRAGCache] = OrderedDict()
        self._lock = threading.Lock()

    def wrap(self, who: Any, kb: str, chain_name: str, k: int | None, chain: Any) -> Any:
        """``chain`` behind the cache of (user, knowledge base, chain, k, documents)."""
        knowledge = self.service.open(who, kb)
        documents = sorted((row.document_id, row.status) for row in knowledge.get_all_documents())
        key = json.dumps([who.user_id, kb, knowledge.knowledge_id, chain_name, k, documents])
        name = "a_" + hashlib.sha256(key.encode()).hexdigest()[:40]
        return CacheChainChat(cache=self._cache(name), chain=chain, convert_data_to_user=_mark)

    def _cache(self, name: str) -> MxRAGCache:
        with self._lock:
            cache = self._open.get(name)
            if cache is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                cache = MxRAGCache(name, self._config())
                self._open[name] = cache
                while len(self._open) > OPEN_CACHES:
                    self._open.popitem(last=False)
            self._open.move_to_end(name)
            return cache

    def _config(self) -> CacheConfig:
        common = {"cache_size": self.settings.size, "data_save_folder": str(self.folder), "auto_flush": 1}
        if self.settings.similarity_threshold is None:
            return CacheConfig(**common)
        return SimilarityCacheConfig(
            vector_config={"vector_type": "npu_faiss_db"}, cache_config="sqlite",
            emb_config={"embedding": self.service.embedding}, similarity_config={},
            similarity_threshold=self.settings.similarity_threshold, **common)
