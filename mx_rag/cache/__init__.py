# SPDX-License-Identifier: Apache-2.0
"""Question-answer caches: ``MxRAGCache`` with ``CacheConfig`` (exact match) or
``SimilarityCacheConfig`` (similar questions, over an embedding, a vector store and an optional
reranker), ``EvictPolicy``, and ``CacheChainChat`` in front of a chain. ``MarkDownParser`` and
``QAGenerate`` write question-answer pairs from documents to fill a cache before users ask.

Names are resolved on first access, so ``import mx_rag.cache`` imports no faiss or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.cache.cache_chain import CacheChainChat
    from mx_rag.cache.config import CacheConfig, EvictPolicy, SimilarityCacheConfig
    from mx_rag.cache.markdown_parser import MarkDownParser
    from mx_rag.cache.mxrag_cache import MxRAGCache
    from mx_rag.cache.qa_generate import QAGenerate, QAGenerationConfig

__all__ = ["CacheChainChat", "CacheConfig", "EvictPolicy", "MarkDownParser", "MxRAGCache", "QAGenerate",
           "QAGenerationConfig", "SimilarityCacheConfig"]

__getattr__, __dir__ = lazy_package(globals())
