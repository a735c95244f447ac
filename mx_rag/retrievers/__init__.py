# SPDX-License-Identifier: Apache-2.0
"""Retrievers: LangChain ``BaseRetriever`` implementations over the SDK's stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.retrievers.bm_retriever import BMRetriever
    from mx_rag.retrievers.full_text_retriever import FullTextRetriever
    from mx_rag.retrievers.hybrid import HybridRetriever
    from mx_rag.retrievers.multi_query_retriever import MultiQueryRetriever
    from mx_rag.retrievers.retriever import Retriever

__all__ = ["BMRetriever", "FullTextRetriever", "HybridRetriever", "MultiQueryRetriever", "Retriever"]

__getattr__, __dir__ = lazy_package(globals())
