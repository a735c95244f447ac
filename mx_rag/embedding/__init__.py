# SPDX-License-Identifier: Apache-2.0
"""Embedding models: local encoders (``mx_rag.embedding.local``) and services (``mx_rag.embedding.service``).

Every embedder is a LangChain ``Embeddings`` (``embed_documents``, ``embed_query``) returning
L2-normalised vectors (services return what the server sends). Names are resolved on first
access, so ``import mx_rag.embedding`` imports no torch, transformers or httpx.
``EmbeddingFactory`` builds one of them from its type name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.embedding.embedding_factory import EmbeddingFactory
    from mx_rag.embedding.local.img_embedding import ImageEmbedding
    from mx_rag.embedding.local.sparse_embedding import SparseEmbedding
    from mx_rag.embedding.local.text_embedding import TextEmbedding
    from mx_rag.embedding.service.clip_embedding import CLIPEmbedding
    from mx_rag.embedding.service.tei_embedding import TEIEmbedding

__all__ = [
    "CLIPEmbedding", "EmbeddingFactory", "ImageEmbedding", "SparseEmbedding", "TEIEmbedding", "TextEmbedding",
]

__getattr__, __dir__ = lazy_package(globals())
