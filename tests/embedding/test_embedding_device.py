# SPDX-License-Identifier: Apache-2.0
"""Device selection: CUDA, then NPU, then MPS, then CPU; fp16 only on accelerators."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from mx_rag.embedding.device import select_device, use_half
from mx_rag.errors import ParameterError


def _has_accelerator() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or hasattr(torch, "npu") or bool(mps and mps.is_available())


@pytest.mark.skipif(_has_accelerator(), reason="this machine has an accelerator")
def test_cpu_when_no_accelerator() -> None:
    assert select_device(0) == torch.device("cpu")
    assert select_device(63) == torch.device("cpu")  # dev_id is ignored on the CPU, as in the original


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_device_index() -> None:
    assert select_device(0) == torch.device("cuda", 0)
    with pytest.raises(ParameterError, match="dev_id must be below"):
        select_device(torch.cuda.device_count())


@pytest.mark.parametrize("dev_id", [-1, 64, True, "0", 1.0, None])
def test_dev_id_is_validated(dev_id: Any) -> None:
    with pytest.raises(ParameterError, match=r"^dev_id"):
        select_device(dev_id)


def test_fp16_only_on_accelerators() -> None:
    assert use_half(torch.device("cpu"), True) is False
    assert use_half(torch.device("cuda", 0), True) is True
    assert use_half(torch.device("npu", 0) if hasattr(torch, "npu") else torch.device("mps"), True) is True
    assert use_half(torch.device("cuda", 0), False) is False
    with pytest.raises(ParameterError, match=r"^use_fp16"):
        use_half(torch.device("cpu"), 1)  # type: ignore[arg-type]


def test_default_batch_size_per_device() -> None:
    from mx_rag.embedding.device import BATCH_SIZES, default_batch_size

    assert default_batch_size(torch.device("cpu")) == BATCH_SIZES["cpu"]
    assert default_batch_size(torch.device("cuda", 0)) == BATCH_SIZES["cuda"]
    assert default_batch_size(torch.device("meta")) == 32  # a device type without a measured figure
    assert all(1 <= size <= 1024 for size in BATCH_SIZES.values())
