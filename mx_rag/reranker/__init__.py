# SPDX-License-Identifier: Apache-2.0
"""Rerankers: ``Reranker`` base, ``RerankerFactory``; ``local.LocalReranker``, ``local.MixRetrieveReranker``
and ``service.TEIReranker``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.reranker.reranker_factory import RerankerFactory

__all__ = ["Reranker", "RerankerFactory"]

__getattr__, __dir__ = lazy_package(globals())
