# SPDX-License-Identifier: Apache-2.0
"""Question-answer caches: ``MxRAGCache`` with ``CacheConfig`` (exact match) or
``SimilarityCacheConfig`` (similar questions, over an embedding, a vector store and an optional
reranker), ``EvictPolicy``, and ``CacheChainChat`` in front of a chain.

Names are resolved on first access, so ``import mx_rag.cache`` imports no faiss or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.cache.cache_chain import CacheChainChat
    from mx_rag.cache.config import CacheConfig, EvictPolicy, SimilarityCacheConfig
    from mx_rag.cache.mxrag_cache import MxRAGCache

__all__ = ["CacheChainChat", "CacheConfig", "EvictPolicy", "MxRAGCache", "SimilarityCacheConfig"]

__getattr__, __dir__ = lazy_package(globals())
