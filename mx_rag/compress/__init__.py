# SPDX-License-Identifier: Apache-2.0
"""Prompt compression: keep the parts of a long context that matter to a question.

``PromptCompressor`` (the base), ``RerankCompressor`` (a reranker scores the pieces),
``ClusterCompressor`` (embeddings clustered by a function you give; the least similar pieces of
each cluster go). Names are resolved on first access, so ``import mx_rag.compress`` is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.compress.base_compressor import PromptCompressor
    from mx_rag.compress.cluster_compressor import ClusterCompressor
    from mx_rag.compress.rerank_compressor import RerankCompressor

__all__ = ["ClusterCompressor", "PromptCompressor", "RerankCompressor"]

__getattr__, __dir__ = lazy_package(globals())
