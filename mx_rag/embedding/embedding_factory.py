# SPDX-License-Identifier: Apache-2.0
"""``EmbeddingFactory``: an embedder chosen by name (``embedding_type``) and built from keywords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from mx_rag.utils.factory import Factory

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

__all__ = ["EmbeddingFactory"]


class EmbeddingFactory(Factory):
    """Builds ``TextEmbedding``, ``ImageEmbedding`` or ``TEIEmbedding``, named by ``embedding_type``
    (see ``mx_rag.utils.factory.Factory``).

    Example:
        >>> from mx_rag.embedding import EmbeddingFactory
        >>> emb = EmbeddingFactory.create_embedding(embedding_type="local_text_embedding",
        ...                                         model_path="/models/bge-large-zh-v1.5", dev_id=0)  # doctest: +SKIP
    """

    KIND = "embedding_type"
    NPU_SUPPORT_EMB: ClassVar[dict[str, str]] = {
        "local_images_embedding": "mx_rag.embedding.local.img_embedding:ImageEmbedding",
        "local_text_embedding": "mx_rag.embedding.local.text_embedding:TextEmbedding",
        "tei_embedding": "mx_rag.embedding.service.tei_embedding:TEIEmbedding",
    }

    @classmethod
    def create_embedding(cls, **kwargs: Any) -> Embeddings:
        """A new embedder: ``embedding_type`` (one of ``NPU_SUPPORT_EMB``) plus its class's parameters."""
        return cls._create(cls.NPU_SUPPORT_EMB, kwargs)
