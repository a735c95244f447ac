# SPDX-License-Identifier: Apache-2.0
"""int8 inference on a CPU for ``TextEmbedding``: the model exported to ONNX from its own directory
and its weights quantised to int8 by ONNX Runtime (dynamic quantisation: per-channel int8 weights,
activations quantised per batch).

The exported file is built once per model directory and cached, atomically and under a file lock
(``_cache.build_once``): next to the converted model for a model in the cache
(``$MXRAG_HOME/models/multilingual-e5-small.int8``), else under ``$MXRAG_HOME/models/int8/``.
Nothing is downloaded. Needs the ``int8`` extra: ``pip install "mxrag[int8]"``.

Why ONNX Runtime and not ``torch.ao.quantization.quantize_dynamic``: on the machine measured both
run about 1.3x to 1.45x the float32 model, but torch's moves the vectors much further (cosine to
float32 0.974 median against 0.996; docs/benchmarks.md, "int8 embedding"; ``bench/int8_variants.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import warnings
from pathlib import Path
from typing import Any

from mx_rag.utils.lazy import extra_import
from mx_rag.utils.model_cache import build_once, models_home

__all__ = ["INT8_FILE", "Int8Encoder", "ensure_int8_model", "int8_available", "int8_dir"]

INT8_FILE = "model_int8.onnx"
INT8_VERSION = 2  # bump when the export or the quantisation changes: cached files are rebuilt
OPSET = 17
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def int8_available() -> bool:
    """Whether ONNX Runtime and onnx (the ``int8`` extra) are installed (found without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def int8_dir(model_dir: Path) -> Path:
    """Where the int8 file of ``model_dir`` is cached: beside it when it sits in the models cache,
    else under ``$MXRAG_HOME/models/int8`` by name and a hash of its path (a user's model folder
    may be read-only)."""
    home = models_home()
    resolved = model_dir.resolve()
    if resolved.parent == home.resolve():
        return home / f"{resolved.name}.int8"
    digest = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:12]
    return home / "int8" / f"{resolved.name}-{digest}"


def _marker(model_dir: Path) -> dict[str, Any]:
    with extra_import("int8", "onnxruntime"):
        import onnxruntime
    files = sorted(p for p in model_dir.iterdir() if p.suffix in _WEIGHT_SUFFIXES or p.name == "config.json")
    return {
        "int8_version": INT8_VERSION, "source": str(model_dir.resolve()), "onnxruntime": onnxruntime.__version__,
        "files": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files],
    }


def ensure_int8_model(model_dir: Path) -> Path:
    """The cached int8 ONNX file for the transformers model in ``model_dir``, built on first use
    (export and quantisation take about a minute for multilingual-e5-small on two cores)."""
    target = int8_dir(model_dir)
    return build_once(target, lambda out: _export_int8(model_dir, out), _marker(model_dir)) / INT8_FILE


def _export_int8(model_dir: Path, out: Path) -> None:
    with extra_import("int8", "onnxruntime", "onnx"):
        from onnxruntime.quantization import QuantType, quantize_dynamic
    import torch
    import transformers

    has_safetensors = any(model_dir.glob("*.safetensors"))
    model = transformers.AutoModel.from_pretrained(str(model_dir), local_files_only=True,
                                                   use_safetensors=has_safetensors)
    model.eval()
    fp32 = out / "model_fp32.onnx"
    example = (torch.ones((2, 8), dtype=torch.long), torch.ones((2, 8), dtype=torch.long))
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shapes it keeps dynamic through dynamic_axes
        torch.onnx.export(
            _Encoder(model), example, str(fp32), input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"], opset_version=OPSET, dynamo=False,
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
        )
    # 7-bit weights (reduce_range): on CPUs without VNNI, ONNX Runtime's u8 x s8 products can saturate
    # at 8 bits; measured on multilingual-e5-small, the lowest cosine to float32 rose from 0.993 to 0.994
    quantize_dynamic(str(fp32), str(out / INT8_FILE), per_channel=True, reduce_range=True,
                     weight_type=QuantType.QInt8)
    for leftover in out.iterdir():  # the float32 export (with any external data) is not kept
        if leftover.name != INT8_FILE:
            leftover.unlink()


class _Encoder:
    """Wraps the model so that the exporter passes the inputs by keyword (positionally, the
    installed transformers takes the mask for another argument)."""

    def __new__(cls, model: Any) -> Any:
        import torch

        class Encoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                return self.model(input_ids=input_ids, attention_mask=attention_mask)[0]

        return Encoder()


class Int8Encoder:
    """Runs the int8 file: called like a transformers model, returns ``(last_hidden_state,)``.

    ``threads`` is ONNX Runtime's intra-op thread count (``TextEmbedding`` passes torch's, so both
    paths use the same cores)."""

    def __init__(self, path: Path, threads: int) -> None:
        with extra_import("int8", "onnxruntime"):
            import onnxruntime
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: Any, attention_mask: Any, **_: Any) -> tuple[Any]:
        import torch

        hidden = self.session.run(None, {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
        return (torch.from_numpy(hidden[0]),)
