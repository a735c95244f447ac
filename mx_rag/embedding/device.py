# SPDX-License-Identifier: Apache-2.0
"""Where local models run: a CUDA GPU, an Ascend NPU, Apple MPS, or the CPU.

``dev_id`` keeps the original's meaning, the index of the accelerator to use; the original only
knew Ascend NPUs and otherwise stayed on the CPU. Here the first available kind wins, in the
order CUDA, NPU (``torch_npu``), MPS, CPU. On the CPU ``dev_id`` is ignored, as in the original.

Example:
    >>> from mx_rag.embedding.device import select_device, use_half
    >>> device = select_device(0)  # device(type='cpu') on a machine without accelerators
    >>> use_half(device, True)  # fp16 only on accelerators
    False
    >>> default_batch_size(device)  # texts per forward pass of a local embedding model
    8
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any

import torch

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_bool, check_int
from mx_rag.utils.common import MAX_DEVICE_ID

logger = logging.getLogger(__name__)

__all__ = ["BATCH_SIZES", "default_batch_size", "select_device", "use_half"]

# Texts per forward pass of a local embedding model, by device type. The CPU figure is the best of
# bench/embed_sweep.py's batch-size sweep (docs/benchmarks.md, "Ingestion"): on the CPU throughput
# falls off past small batches. The accelerator figures are not measured here (no GPU or NPU
# was at hand): 32 is sentence-transformers' default, bigger batches may pay on a big device.
BATCH_SIZES = {"cpu": 8, "cuda": 32, "npu": 32, "mps": 32}


def _npu() -> Any | None:
    """``torch.npu`` when ``torch_npu`` is installed and an NPU is visible, else None."""
    if importlib.util.find_spec("torch_npu") is None:
        return None
    try:
        importlib.import_module("torch_npu")  # registers torch.npu
        npu = getattr(torch, "npu", None)
        return npu if npu is not None and npu.is_available() else None
    except Exception as exc:  # a broken driver install must not stop CPU use
        logger.warning("torch_npu is installed but unusable, not using the NPU: %r", exc)
        return None


def _check_index(kind: str, dev_id: int, count: int) -> None:
    if dev_id >= count:
        raise ParameterError(f"dev_id must be below the number of {kind} devices ({count}), got {dev_id}")


def select_device(dev_id: int = 0) -> torch.device:
    """The device for ``dev_id`` (0 to 63): ``cuda:N``, ``npu:N``, ``mps`` or ``cpu``.

    Raises:
        ParameterError: ``dev_id`` is not an int in [0, 63], or names an accelerator that is not there.
    """
    check_int("dev_id", dev_id, 0, MAX_DEVICE_ID)
    if torch.cuda.is_available():
        _check_index("CUDA", dev_id, torch.cuda.device_count())
        return torch.device("cuda", dev_id)
    npu = _npu()
    if npu is not None:
        _check_index("NPU", dev_id, int(npu.device_count()))
        return torch.device("npu", dev_id)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        _check_index("MPS", dev_id, 1)
        return torch.device("mps")
    if dev_id:
        logger.debug("no accelerator found: running on the CPU, dev_id=%d ignored", dev_id)
    return torch.device("cpu")


def use_half(device: torch.device, use_fp16: bool) -> bool:
    """Whether to run in float16: only when asked for and only on an accelerator (never the CPU)."""
    check_bool("use_fp16", use_fp16)
    return use_fp16 and device.type != "cpu"


def default_batch_size(device: torch.device) -> int:
    """Texts per forward pass on ``device`` when the caller does not say (``BATCH_SIZES``; 32 elsewhere)."""
    return BATCH_SIZES.get(device.type, 32)
