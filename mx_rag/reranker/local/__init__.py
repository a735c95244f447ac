# SPDX-License-Identifier: Apache-2.0
"""Local rerankers (loaded lazily: importing this package does not import torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.reranker.local.mix_retrieve_reranker import MixRetrieveReranker
    from mx_rag.reranker.local.reranker import LocalReranker

__all__ = ["LocalReranker", "MixRetrieveReranker"]

__getattr__, __dir__ = lazy_package(globals())
