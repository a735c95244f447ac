# SPDX-License-Identifier: Apache-2.0
"""Fine-tune a chat model on the CoRAG samples written by ``SampleGenerator``.

:class:`FineTuneArguments` names the model, the JSONL training file and the maximum sequence
length (the SDK's three fields and defaults) plus mx_rag's optional LoRA settings.
:class:`SubqueryFineTuner` trains with ``transformers.Trainer`` and the caller's
``TrainingArguments``, on whatever hardware is present:

* Ascend NPU when ``torch_npu`` is importable and reports a device (the SDK's example imports
  ``torch_npu`` and calls ``torch.npu.set_device(0)`` first, which keeps working);
* otherwise CUDA (or another accelerator transformers knows: XPU, MPS);
* otherwise the CPU (``use_cpu=True`` is set on a copy of the arguments).

Device index: in a single process, constructing ``TrainingArguments`` already makes device 0
current (transformers calls ``set_device(0)``). To train on chip ``k``, either expose only that
chip (``ASCEND_RT_VISIBLE_DEVICES=k`` / ``CUDA_VISIBLE_DEVICES=k``) or call
``torch.npu.set_device(k)`` / ``torch.cuda.set_device(k)`` after building the
``TrainingArguments``: the tuner then keeps device ``k`` instead of going back to 0. Several
processes (``torchrun``) are left entirely to transformers/accelerate.

Each sample is rendered with the tokenizer's own chat template (ChatML if it has none) and the
loss is computed on the assistant messages only. With ``use_lora=True`` the model is wrapped in a
peft LoRA adapter; the output directory then receives either the merged model (default, loadable
with ``AutoModelForCausalLM.from_pretrained``) or, with ``merge_lora=False``, the adapter alone.
The tokenizer is always saved next to it.

Importing this module imports neither torch nor transformers.

Example:
    >>> from transformers import TrainingArguments  # doctest: +SKIP
    >>> from mx_rag.corag import FineTuneArguments, SubqueryFineTuner  # doctest: +SKIP
    >>> args = FineTuneArguments(model_name_or_path="/models/Qwen2.5-0.5B-Instruct",
    ...                          train_file="results/corag_train_samples.jsonl", max_len=1024,
    ...                          use_lora=True)  # doctest: +SKIP
    >>> train = TrainingArguments(output_dir="./output", per_device_train_batch_size=4,
    ...                           num_train_epochs=1, learning_rate=2e-4, report_to="none")  # doctest: +SKIP
    >>> SubqueryFineTuner(args, train).train()  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mx_rag.corag._sft_data import ChatCollator, encode_chat, load_chat_samples
from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_bool, check_choice, check_int, check_number, check_str
from mx_rag.utils.lazy import check_extra

__all__ = ["FineTuneArguments", "SubqueryFineTuner"]

logger = logging.getLogger(__name__)

MAX_LEN_LIMIT = 1 << 20
DTYPES = ("float32", "bfloat16", "float16", "auto")
_DISTRIBUTED_ENV = ("LOCAL_RANK", "RANK")


def _check_path(name: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    check_str(name, value, 1, 4096)


@dataclass
class FineTuneArguments:
    """What to fine-tune and on which data.

    Attributes:
        model_name_or_path: a local model directory, or the id of a model already in the Hugging
            Face cache (nothing is downloaded). Default ``"Qwen/Qwen2.5-7B-Instruct"``.
        train_file: the JSONL file of ``SampleGenerator`` (one ``{"type", "messages"}`` sample, or
            one bare list of messages, per line). Default ``"data/aligned_train.jsonl"``.
        max_len: the maximum number of tokens per sample after the chat template; longer samples
            are cut on the right, and a sample left without any assistant token is skipped.
            Default 2048.
        use_lora: train a LoRA adapter (peft) instead of every weight. Default False (full
            fine-tuning, as the SDK does).
        lora_r, lora_alpha, lora_dropout: the LoRA rank, scaling and dropout (8, 16, 0.05).
        lora_target_modules: module names (or one peft regex / ``"all-linear"``) to adapt; None
            lets peft choose for known architectures (``q_proj``/``v_proj`` for Llama and Qwen).
        merge_lora: with LoRA, save the merged full model (True, default) or only the adapter.
        dtype: the dtype the weights are loaded in: ``"float32"`` (default; mixed precision is a
            ``TrainingArguments`` setting), ``"bfloat16"``, ``"float16"`` or ``"auto"``.
        sample_types: train only on these sample types (e.g. ``["subquery_generation"]``); None,
            the default, trains on every sample.

    Raises:
        ParameterError: a field is out of range; the message names it.

    Example:
        >>> FineTuneArguments(model_name_or_path="/models/qwen", train_file="train.jsonl", max_len=1024).max_len
        1024
        >>> FineTuneArguments(max_len=0)
        Traceback (most recent call last):
        ...
        mx_rag.errors.ParameterError: max_len must be in [2, 1048576], got 0
    """

    model_name_or_path: str = "Qwen/Qwen2.5-7B-Instruct"
    train_file: str | None = "data/aligned_train.jsonl"
    max_len: int = 2048
    use_lora: bool = False
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_target_modules: Sequence[str] | str | None = None
    merge_lora: bool = True
    dtype: str = "float32"
    sample_types: Sequence[str] | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field again (fields may be reassigned after construction)."""
        _check_path("model_name_or_path", self.model_name_or_path, optional=False)
        _check_path("train_file", self.train_file, optional=True)
        check_int("max_len", self.max_len, 2, MAX_LEN_LIMIT)
        check_bool("use_lora", self.use_lora)
        check_int("lora_r", self.lora_r, 1, 4096)
        check_int("lora_alpha", self.lora_alpha, 1, 1 << 16)
        check_number("lora_dropout", self.lora_dropout, 0.0, 0.99)
        modules = self.lora_target_modules
        if modules is not None and not isinstance(modules, str):
            if not isinstance(modules, Sequence) or not modules:
                raise ParameterError(f"lora_target_modules must be None, a str or a non-empty list of str, "
                                     f"got {modules!r}")
            for module in modules:
                check_str("lora_target_modules item", module, 1, 256)
        elif isinstance(modules, str):
            check_str("lora_target_modules", modules, 1, 1024)
        check_bool("merge_lora", self.merge_lora)
        check_choice("dtype", self.dtype, DTYPES)
        if self.sample_types is not None:
            if isinstance(self.sample_types, str) or not isinstance(self.sample_types, Sequence) \
                    or not self.sample_types:
                raise ParameterError(f"sample_types must be None or a non-empty list of str, got {self.sample_types!r}")
            for kind in self.sample_types:
                check_str("sample_types item", kind, 1, 256)


def _require(module: str) -> None:
    check_extra("finetune", module)


def _distributed() -> bool:
    """Launched by torchrun/accelerate (one process per device)?"""
    return any(os.environ.get(name, "") != "" for name in _DISTRIBUTED_ENV) \
        or os.environ.get("WORLD_SIZE", "1") not in ("", "1")


def _npu_index() -> int | None:
    """The current NPU when ``torch_npu`` is importable and sees a device, else None."""
    if importlib.util.find_spec("torch_npu") is None:
        return None
    import torch

    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        if torch.npu.is_available():  # type: ignore[attr-defined]
            return int(torch.npu.current_device())  # type: ignore[attr-defined]
    except Exception as exc:  # a broken CANN install: say so and fall back
        logger.warning("torch_npu is installed but unusable (%s); not using an NPU", exc)
    return None


def detect_accelerator() -> tuple[str, int] | None:
    """``("npu", index)``, ``("cuda", index)`` (the current device), another accelerator torch
    knows (``("xpu"|"mps", -1)``: left to transformers) or None for the CPU."""
    import torch

    index = _npu_index()
    if index is not None:  # before CUDA: transfer_to_npu makes torch.cuda answer for the NPU
        return "npu", index
    if torch.cuda.is_available():
        return "cuda", int(torch.cuda.current_device())
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu", -1
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps", -1
    return None


def prepare_training_args(train_args: Any, accelerator: tuple[str, int] | None) -> Any:
    """A copy of ``train_args`` bound to the device to train on; the caller's object is untouched.

    * No accelerator: ``use_cpu=True``.
    * One process on an NPU or CUDA device other than 0 (chosen by the caller with
      ``torch.npu.set_device(k)`` / ``torch.cuda.set_device(k)``): transformers would move the
      run to device 0, so the copy is pinned to device ``k`` (one device, no DataParallel).
    * Otherwise (device 0, several processes, or ``use_cpu`` already set): transformers decides.
    """
    import torch

    if accelerator is None and not train_args.use_cpu:
        return dataclasses.replace(train_args, use_cpu=True)
    args = dataclasses.replace(train_args)
    if accelerator is None or args.use_cpu or _distributed():
        return args
    kind, index = accelerator
    if kind not in ("npu", "cuda") or index <= 0:
        return args
    chosen = torch.device(kind, index)
    _ = args.device  # let transformers set up accelerate's state (it selects device 0) ...
    getattr(torch, kind).set_device(chosen)  # ... then restore the caller's device
    args.__dict__["_setup_devices"] = chosen  # the cached_property behind TrainingArguments.device
    args._n_gpu = 1
    return args


class SubqueryFineTuner:
    """Fine-tunes ``finetune_args.model_name_or_path`` on ``finetune_args.train_file``.

    Args:
        finetune_args: what to train (:class:`FineTuneArguments`).
        train_args: ``transformers.TrainingArguments`` (output directory, batch size, epochs or
            ``max_steps``, learning rate, logging, checkpointing...). ``do_train`` and
            ``remove_unused_columns`` do not matter here: :meth:`train` always trains and the
            samples carry only model inputs.

    Raises:
        ParameterError: an argument has the wrong type or a field is invalid, ``train_file`` is
            None or does not exist.
        ExtraNotInstalledError: transformers is missing (extra ``finetune``).

    Example:
        >>> tuner = SubqueryFineTuner(FineTuneArguments(model_name_or_path="/models/smollm2",
        ...                                             train_file="train.jsonl", max_len=512),
        ...                           TrainingArguments(output_dir="out", max_steps=100))  # doctest: +SKIP
        >>> tuner.train()  # doctest: +SKIP
        >>> tuner.trainer.state.log_history[-1]["train_loss"]  # doctest: +SKIP
    """

    def __init__(self, finetune_args: FineTuneArguments, train_args: Any) -> None:
        if not isinstance(finetune_args, FineTuneArguments):
            raise ParameterError(f"finetune_args must be a FineTuneArguments, got {type(finetune_args).__name__}")
        finetune_args.validate()
        _require("transformers")
        from transformers import TrainingArguments

        if not isinstance(train_args, TrainingArguments):
            raise ParameterError(
                f"train_args must be a transformers.TrainingArguments, got {type(train_args).__name__}")
        if finetune_args.train_file is None:
            raise ParameterError("train_file is None: set FineTuneArguments.train_file to the JSONL training file")
        if not os.path.isfile(finetune_args.train_file):
            raise ParameterError(f"train_file {os.fspath(finetune_args.train_file)!r} does not exist or is not a file "
                                 "(expected the JSONL file written by SampleGenerator)")
        self.finetune_args = finetune_args
        self.train_args = train_args
        self.trainer: Any = None  # the transformers.Trainer of the last train() call

    def train(self) -> None:
        """Prepare the model and the data, train, and save the model and tokenizer to ``output_dir``.

        Raises:
            ParameterError: the model cannot be loaded from ``model_name_or_path`` (only local
                models), the training file is malformed, or no sample keeps an assistant token
                within ``max_len``.
            ExtraNotInstalledError: torch, transformers, accelerate or (with LoRA) peft is missing.
        """
        fa = self.finetune_args
        fa.validate()
        for module in ("torch", "transformers", "accelerate") + (("peft",) if fa.use_lora else ()):
            _require(module)
        from transformers import Trainer

        accelerator = detect_accelerator()
        args = prepare_training_args(self.train_args, accelerator)
        logger.info("fine-tuning %s on %s", fa.model_name_or_path, "CPU" if args.use_cpu else args.device)

        tokenizer = self._load_tokenizer()
        dataset = self._encode(tokenizer)
        model = self._load_model(checkpointing=bool(args.gradient_checkpointing))
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=ChatCollator(int(pad_id)))
        self.trainer = trainer
        trainer.train()
        self._save(trainer, tokenizer, args.output_dir)

    def _load_tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        path = self.finetune_args.model_name_or_path
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ParameterError(f"model_name_or_path {path!r}: cannot load the tokenizer (only local models "
                                 f"are supported: a directory or a model in the Hugging Face cache): {exc}") from exc
        if tokenizer.pad_token is None:
            if tokenizer.eos_token is None:
                raise ParameterError(f"model_name_or_path {path!r}: the tokenizer has neither a pad nor an eos token")
            tokenizer.pad_token = tokenizer.eos_token
        return tokenizer

    def _encode(self, tokenizer: Any) -> list[dict[str, list[int]]]:
        fa = self.finetune_args
        assert fa.train_file is not None  # checked in __init__
        samples = load_chat_samples(fa.train_file, fa.sample_types)
        dataset: list[dict[str, list[int]]] = []
        for messages in samples:
            encoded = encode_chat(tokenizer, messages, fa.max_len)
            if encoded is not None:
                dataset.append({"input_ids": encoded.input_ids, "labels": encoded.labels})
        dropped = len(samples) - len(dataset)
        if dropped:
            logger.warning("%d of %d samples have no assistant token within max_len=%d and are skipped",
                           dropped, len(samples), fa.max_len)
        if not dataset:
            raise ParameterError(f"max_len={fa.max_len}: no sample of train_file {fa.train_file!r} keeps an "
                                 "assistant token within max_len (or no sample has an assistant message)")
        return dataset

    def _load_model(self, *, checkpointing: bool) -> Any:
        import torch
        from transformers import AutoModelForCausalLM

        fa = self.finetune_args
        dtype: Any = fa.dtype if fa.dtype == "auto" else getattr(torch, fa.dtype)
        try:
            model = AutoModelForCausalLM.from_pretrained(fa.model_name_or_path, local_files_only=True, dtype=dtype)
        except (OSError, ValueError) as exc:
            raise ParameterError(f"model_name_or_path {fa.model_name_or_path!r}: cannot load the model (only local "
                                 f"models are supported: a directory or a model in the Hugging Face cache): "
                                 f"{exc}") from exc
        if checkpointing:
            model.config.use_cache = False  # incompatible with activation checkpointing
        if not fa.use_lora:
            return model
        from peft import LoraConfig, get_peft_model

        if checkpointing:
            model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks need an input grad
        target = fa.lora_target_modules
        config = LoraConfig(task_type="CAUSAL_LM", r=fa.lora_r, lora_alpha=fa.lora_alpha, lora_dropout=fa.lora_dropout,
                            target_modules=target if target is None or isinstance(target, str) else list(target))
        return get_peft_model(model, config)

    def _save(self, trainer: Any, tokenizer: Any, output_dir: str) -> None:
        fa = self.finetune_args
        model = trainer.model
        if hasattr(model, "config"):
            model.config.use_cache = True  # the saved model generates with a KV cache
        if fa.use_lora and fa.merge_lora:
            if trainer.is_world_process_zero():
                merged = trainer.accelerator.unwrap_model(model).merge_and_unload()
                merged.config.use_cache = True
                merged.save_pretrained(output_dir)
        else:
            trainer.save_model(output_dir)  # full model, or the adapter alone with LoRA
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(output_dir)
        logger.info("saved the %s and the tokenizer to %s",
                    "LoRA adapter" if fa.use_lora and not fa.merge_lora else "model", output_dir)
