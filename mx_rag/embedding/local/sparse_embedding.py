# SPDX-License-Identifier: Apache-2.0
"""``SparseEmbedding``: BGE-M3-style lexical weights, ``{token_id: weight}`` per text.

A BGE-M3 model directory holds the encoder (transformers) and ``sparse_linear.pt``, a
``Linear(hidden_size, 1)`` head. Each token's weight is ``relu(head(hidden_state))``; special
tokens (CLS, EOS, PAD, UNK) and zero weights are dropped, and a token id that occurs several
times keeps its largest weight. The dict is what Milvus's ``SPARSE_FLOAT_VECTOR`` takes and
what a hybrid search multiplies: the score of a query and a text is the sum over shared tokens
of the products of their weights.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from mx_rag.embedding.inputs import check_batch_size, check_text, check_texts
from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_bool, check_int
from mx_rag.utils.common import MAX_DEVICE_ID
from mx_rag.utils.factory import Creatable
from mx_rag.utils.file_check import check_dir
from mx_rag.utils.lazy import extra_import
from mx_rag.utils.lazy_value import LazyValue

logger = logging.getLogger(__name__)

__all__ = ["HEAD_FILES", "SparseEmbedding"]

HEAD_FILES = ("sparse_linear.safetensors", "sparse_linear.pt")  # looked for in this order
CHARS_PER_TOKEN = 128  # a text is cut to max_length * this many characters before tokenizing


@dataclass(frozen=True)
class _Loaded:
    tokenizer: Any
    model: Any
    head: Any
    device: Any
    skip: frozenset[int]
    max_length: int


class SparseEmbedding(Embeddings, Creatable):
    """Lexical (sparse) weights of texts from a local BGE-M3-style model.

    Args:
        model_path: a local model directory: transformers encoder weights (safetensors preferred)
            plus the sparse head, ``sparse_linear.safetensors`` or ``sparse_linear.pt`` (loaded
            weights-only).
        dev_id: accelerator index, 0 to 63 (CUDA, then NPU, then MPS; ignored on the CPU).
        use_fp16: float16 on an accelerator (never on the CPU).

    The model loads on first use.

    Example:
        >>> from mx_rag.embedding.local import SparseEmbedding
        >>> embed = SparseEmbedding.create(model_path="/models/bge-m3", dev_id=0)    # doctest: +SKIP
        >>> embed.embed_query("abc")                                                  # doctest: +SKIP
        {37114: 0.27}

    Raises:
        ParameterError: an argument is out of range, or the directory lacks the sparse head.
        ExtraNotInstalledError: torch or transformers is missing (``mxrag[embed]``).
    """

    def __init__(self, model_path: str | os.PathLike[str], dev_id: int = 0, use_fp16: bool = True) -> None:
        self._path = check_dir("model_path", model_path)
        self._dev_id = check_int("dev_id", dev_id, 0, MAX_DEVICE_ID)
        self._use_fp16 = check_bool("use_fp16", use_fp16)
        self._head_file = self._find_head(self._path)
        self._model: Callable[[], _Loaded] = LazyValue(self._load).get

    @staticmethod
    def _find_head(path: Path) -> Path:
        for name in HEAD_FILES:
            if (path / name).is_file():
                return path / name
        raise ParameterError(f"model_path {str(path)!r} has no sparse head: expected one of {list(HEAD_FILES)} "
                             "(a BGE-M3 model directory)")

    def embed_documents(self, texts: list[str], batch_size: int = 32) -> list[dict[int, float]]:  # type: ignore[override]
        """One ``{token_id: weight}`` dict per text, in input order.

        Args:
            texts: 1 to 1,000,000 strings of 1 to 128 Mi characters.
            batch_size: texts per forward pass, 1 to 1024 (default 32).
        """
        texts = check_texts("texts", texts)
        check_batch_size(batch_size)
        return self._encode(texts, batch_size)

    def embed_query(self, text: str) -> dict[int, float]:  # type: ignore[override]
        """The ``{token_id: weight}`` dict of one text."""
        check_text("text", text)
        return self._encode([text], 1)[0]

    # -- model -------------------------------------------------------------------------------

    def _load(self) -> _Loaded:
        with extra_import("embed", "torch", "transformers"):
            import torch
            import transformers
        from mx_rag.embedding.device import select_device, use_half
        from mx_rag.embedding.local.model_info import read_model_info, resolve_max_length

        info = read_model_info(self._path)
        device = select_device(self._dev_id)
        weights = [p for p in info.path.glob("*.safetensors") if p.name not in HEAD_FILES]
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(self._path), local_files_only=True)
        model = transformers.AutoModel.from_pretrained(str(info.path), local_files_only=True,
                                                       use_safetensors=bool(weights))
        hidden = int(model.config.hidden_size)
        head = torch.nn.Linear(hidden, 1)
        if self._head_file.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(self._head_file))
        else:
            state = torch.load(str(self._head_file), map_location="cpu", weights_only=True)
        try:
            head.load_state_dict(state)
        except RuntimeError as exc:
            raise ParameterError(f"{self._head_file} is not a Linear({hidden}, 1) head for this model: {exc}") from exc
        dtype = torch.float16 if use_half(device, self._use_fp16) else torch.float32
        model = model.to(device=device, dtype=dtype).eval()
        head = head.to(device=device, dtype=dtype).eval()
        skip = frozenset(i for i in (tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id,
                                     tokenizer.unk_token_id, tokenizer.sep_token_id, tokenizer.bos_token_id)
                         if i is not None)
        logger.info("loaded sparse model %s on %s", self._path, device)
        return _Loaded(tokenizer, model, head, device, skip, resolve_max_length(info, None))

    def _encode(self, texts: list[str], batch_size: int) -> list[dict[int, float]]:
        import torch

        loaded = self._model()
        cap = loaded.max_length * CHARS_PER_TOKEN
        out: list[dict[int, float]] = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = [text[:cap] for text in texts[start:start + batch_size]]
                encoded = loaded.tokenizer(batch, padding=True, truncation=True, max_length=loaded.max_length,
                                           return_tensors="pt").to(loaded.device)
                hidden = loaded.model(**encoded, return_dict=True).last_hidden_state
                weights = torch.relu(loaded.head(hidden)).squeeze(-1).float().cpu().tolist()
                ids = encoded["input_ids"].cpu().tolist()
                mask = encoded["attention_mask"].cpu().tolist()
                for row_ids, row_weights, row_mask in zip(ids, weights, mask, strict=True):
                    out.append(self._lexical(row_ids, row_weights, row_mask, loaded.skip))
        return out

    @staticmethod
    def _lexical(ids: list[int], weights: list[float], mask: list[int], skip: frozenset[int]) -> dict[int, float]:
        result: dict[int, float] = {}
        for token, weight, keep in zip(ids, weights, mask, strict=True):
            if keep and weight > 0 and token not in skip and weight > result.get(token, 0.0):
                result[token] = weight
        return result
