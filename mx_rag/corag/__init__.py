# SPDX-License-Identifier: Apache-2.0
"""CoRAG: chain-of-retrieval question answering, training-sample generation, fine-tuning, evaluation.

Names resolve on first access; importing ``mx_rag.corag`` imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.corag.config import CoRagBaseConfig
    from mx_rag.corag.corag_agent import CoRagAgent, ReasoningPath
    from mx_rag.corag.evaluator import CoRagEvaluator
    from mx_rag.corag.sample_generator import SampleGenerator
    from mx_rag.corag.subquery_finetuner import FineTuneArguments, SubqueryFineTuner

__all__ = [
    "CoRagAgent",
    "CoRagBaseConfig",
    "CoRagEvaluator",
    "FineTuneArguments",
    "ReasoningPath",
    "SampleGenerator",
    "SubqueryFineTuner",
]

__getattr__, __dir__ = lazy_package(globals())
