# SPDX-License-Identifier: Apache-2.0
"""RAG evaluation: ``RAGEvaluator`` (the RAGAS 0.1 metrics with an LLM judge), and ``TestsetGenerator``
(questions, reference answers and source passages written by an LLM from a knowledge base's documents).

Names are resolved on first access, so ``import mx_rag.evaluate`` imports no torch or HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.evaluate.rag_evaluator import RAGEvaluator

__all__ = ["RAGEvaluator"]

__getattr__, __dir__ = lazy_package(globals())
