# SPDX-License-Identifier: Apache-2.0
"""Rerankers: ``Reranker`` base; ``local.LocalReranker`` and ``service.TEIReranker``."""

from mx_rag.reranker.reranker import Reranker

__all__ = ["Reranker"]
