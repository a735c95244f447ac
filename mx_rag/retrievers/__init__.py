# SPDX-License-Identifier: Apache-2.0
"""Retrievers: LangChain ``BaseRetriever`` implementations over the SDK's stores."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mx_rag.retrievers.hybrid import FullTextRetriever, HybridRetriever
    from mx_rag.retrievers.multi_query_retriever import MultiQueryRetriever
    from mx_rag.retrievers.retriever import Retriever

_LAZY = {
    "Retriever": "mx_rag.retrievers.retriever",
    "MultiQueryRetriever": "mx_rag.retrievers.multi_query_retriever",
    "FullTextRetriever": "mx_rag.retrievers.hybrid",
    "HybridRetriever": "mx_rag.retrievers.hybrid",
}

__all__ = ["FullTextRetriever", "HybridRetriever", "MultiQueryRetriever", "Retriever"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mx_rag.retrievers' has no attribute {name!r}")
