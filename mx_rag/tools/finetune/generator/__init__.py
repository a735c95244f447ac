# SPDX-License-Identifier: Apache-2.0
"""Fine-tuning data from documents: ``TrainDataGenerator`` (+ ``DataProcessConfig``) and ``EvalDataGenerator``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.tools.finetune.generator.eval_data_generator import EvalDataGenerator
    from mx_rag.tools.finetune.generator.train_data_generator import DataProcessConfig, TrainDataGenerator

__all__ = ["DataProcessConfig", "EvalDataGenerator", "TrainDataGenerator"]

__getattr__, __dir__ = lazy_package(globals())
