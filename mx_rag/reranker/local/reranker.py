# SPDX-License-Identifier: Apache-2.0
"""``LocalReranker``: a cross-encoder from a local directory, on CPU, CUDA or NPU."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.checks import check_bool, check_int, check_str, fail
from mx_rag.utils.common import MAX_BATCH_SIZE, MAX_PROMPT_LENGTH
from mx_rag.utils.file_check import check_dir
from mx_rag.utils.lazy_value import LazyValue

__all__ = ["LocalReranker"]

MAX_TEXTS = 1_000_000


class LocalReranker(Reranker):
    """Scores (query, text) pairs with a sequence-classification model (e.g. bge-reranker).

    Args:
        model_path: a local transformers directory (safetensors weights).
        dev_id: accelerator index, in [0, 63]; the first of CUDA, NPU, MPS, CPU that exists is used.
        k: items kept by ``rerank_top_k``.
        use_fp16: half precision on accelerators (never on the CPU).

    The model loads on first use. Scores are the raw logits (higher is more relevant).

    Example:
        >>> reranker = LocalReranker("/models/bge-reranker-base", k=3)              # doctest: +SKIP
        >>> reranker.rerank("what is faiss?", ["a vector index", "a fruit"])      # doctest: +SKIP
    """

    def __init__(self, model_path: str, dev_id: int = 0, k: int = 1, use_fp16: bool = True) -> None:
        super().__init__(k)
        self.model_path = check_dir("model_path", model_path)
        self.dev_id = check_int("dev_id", dev_id, 0, 63)
        self.use_fp16 = check_bool("use_fp16", use_fp16)
        self._load: Callable[[], tuple[Any, Any, Any]] = LazyValue(self._build).get

    def _build(self) -> tuple[Any, Any, Any]:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from mx_rag.embedding.device import select_device, use_half

        device = select_device(self.dev_id)
        tokenizer = AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(
            str(self.model_path), local_files_only=True, use_safetensors=True
        )
        if use_half(device, self.use_fp16):
            model = model.half()
        return tokenizer, model.to(device).eval(), device

    def rerank(self, query: str, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        check_str("query", query, 1, MAX_PROMPT_LENGTH)
        if not isinstance(texts, (list, tuple)) or not 1 <= len(texts) <= MAX_TEXTS:
            raise fail("texts", texts, f"a list of 1 to {MAX_TEXTS} strings")
        for i, text in enumerate(texts):
            check_str(f"texts[{i}]", text, 1, MAX_PROMPT_LENGTH)
        check_int("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        import torch

        tokenizer, model, device = self._load()
        scores: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = list(texts[start : start + batch_size])
                inputs = tokenizer([query] * len(batch), batch, padding=True, truncation=True, return_tensors="pt")
                logits = model(**inputs.to(device)).logits
                scores.extend(logits.view(-1, logits.shape[-1])[:, -1].float().cpu().tolist())
        return np.asarray(scores, dtype=np.float64)
