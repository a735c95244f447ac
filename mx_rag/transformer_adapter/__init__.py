# SPDX-License-Identifier: Apache-2.0
"""The original's NPU speed-up switches for transformers models, kept so that programs importing them run.

On Ascend NPUs the original SDK replaced the attention and output layers of BERT, RoBERTa,
XLM-RoBERTa and CLIP models with fused NPU kernels when a program imported
``mx_rag.transformer_adapter.modeling_<family>_adapter`` and set ``ENABLE_BOOST``. mx_rag ships
no NPU kernels: importing these modules changes nothing, on any device, and models run with
transformers' own layers (SDPA attention, float16 on accelerators with ``use_fp16``).
``boost_requested()`` tells whether ``ENABLE_BOOST`` asks for the speed-up; when it does, the
first import logs once that the switch has no effect here.

>>> from mx_rag.transformer_adapter.modeling_bert_adapter import enable_bert_speed
>>> enable_bert_speed
True
"""

from __future__ import annotations

import logging
import os
import threading

__all__ = ["BOOST_VALUES", "boost_requested", "note_switch"]

logger = logging.getLogger(__name__)

BOOST_VALUES = ("true", "1")  # ENABLE_BOOST values that ask for the speed-up (case-insensitive)
_noted: set[str] = set()
_lock = threading.Lock()


def boost_requested() -> bool:
    """Whether the environment variable ``ENABLE_BOOST`` is ``True``, ``true`` or ``1``."""
    return os.environ.get("ENABLE_BOOST", "false").strip().lower() in BOOST_VALUES


def note_switch(family: str) -> None:
    """Log once per model family that its NPU speed-up switch does nothing in mx_rag."""
    with _lock:
        if family in _noted:
            return
        _noted.add(family)
    level = logging.INFO if boost_requested() else logging.DEBUG
    logger.log(level, "enable_%s_speed: mx_rag has no fused NPU kernels; %s models run with transformers' "
               "own layers (ENABLE_BOOST=%r changes nothing)", family, family, os.environ.get("ENABLE_BOOST"))
