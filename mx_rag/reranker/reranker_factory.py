# SPDX-License-Identifier: Apache-2.0
"""``RerankerFactory``: a reranker chosen by name (``similarity_type``) and built from keywords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from mx_rag.utils.factory import Factory

if TYPE_CHECKING:
    from mx_rag.reranker.reranker import Reranker

__all__ = ["RerankerFactory"]


class RerankerFactory(Factory):
    """Builds ``LocalReranker`` or ``TEIReranker``, named by ``similarity_type`` (see
    ``mx_rag.utils.factory.Factory``).

    Example:
        >>> from mx_rag.reranker import RerankerFactory
        >>> reranker = RerankerFactory.create_reranker(similarity_type="local_reranker",
        ...                                            model_path="/models/bge-reranker-base")  # doctest: +SKIP
    """

    KIND = "similarity_type"
    _NPU_SUPPORT_RERANKER: ClassVar[dict[str, str]] = {
        "local_reranker": "mx_rag.reranker.local.reranker:LocalReranker",
        "tei_reranker": "mx_rag.reranker.service.tei_reranker:TEIReranker",
    }

    @classmethod
    def create_reranker(cls, **kwargs: Any) -> Reranker:
        """A new reranker: ``similarity_type`` (``local_reranker`` or ``tei_reranker``) plus its parameters."""
        return cls._create(cls._NPU_SUPPORT_RERANKER, kwargs)
