# SPDX-License-Identifier: Apache-2.0
"""``RerankerFactory``: a reranker chosen by name (``similarity_type``) and built from keywords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from mx_rag.utils.factory import create_from

if TYPE_CHECKING:
    from mx_rag.reranker.reranker import Reranker

__all__ = ["RerankerFactory"]


class RerankerFactory:
    """Builds ``LocalReranker`` or ``TEIReranker`` from keyword arguments.

    ``similarity_type`` picks the class; the other keywords go to its ``create`` (its constructor).
    The classes are imported on first use, so this module imports no torch.

    Example:
        >>> from mx_rag.reranker import RerankerFactory
        >>> reranker = RerankerFactory.create_reranker(similarity_type="local_reranker",
        ...                                            model_path="/models/bge-reranker-base")  # doctest: +SKIP

    Raises:
        ParameterError: ``similarity_type`` is missing or unknown, or the class refuses an argument.
    """

    _NPU_SUPPORT_RERANKER: ClassVar[dict[str, str]] = {
        "local_reranker": "mx_rag.reranker.local.reranker:LocalReranker",
        "tei_reranker": "mx_rag.reranker.service.tei_reranker:TEIReranker",
    }

    @classmethod
    def create_reranker(cls, **kwargs: Any) -> Reranker:
        """A new reranker: ``similarity_type`` (``local_reranker`` or ``tei_reranker``) plus its parameters."""
        reranker: Reranker = create_from(cls._NPU_SUPPORT_RERANKER, "similarity_type", kwargs)
        return reranker
