# SPDX-License-Identifier: Apache-2.0
"""Embedding-model fine-tuning: generate (question, passage) pairs from a user's documents with an
LLM and a reranker (``generator``), fine-tune an embedding model on them and measure its recall
(``trainer``), on the CPU, a CUDA GPU or an NPU.

Names load on first access; training needs ``pip install "mxrag[finetune]"`` (sentence-transformers).

Example:
    >>> from mx_rag.tools.finetune import TrainDataGenerator, DataProcessConfig, finetune_embedding
    >>> gen = TrainDataGenerator(llm, "/data/ft", reranker)                              # doctest: +SKIP
    >>> gen.generate_train_data(gen.generate_origin_document("/data/docs", loader_mng), DataProcessConfig())
    >>> finetune_embedding("/models/bge", "/data/ft/train_data.jsonl", "/models/bge-ft")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.tools.finetune.generator.eval_data_generator import EvalDataGenerator
    from mx_rag.tools.finetune.generator.train_data_generator import DataProcessConfig, TrainDataGenerator
    from mx_rag.tools.finetune.trainer import evaluate_embedding, finetune_embedding

__all__ = ["DataProcessConfig", "EvalDataGenerator", "TrainDataGenerator", "evaluate_embedding", "finetune_embedding"]

__getattr__, __dir__ = lazy_package(globals())
