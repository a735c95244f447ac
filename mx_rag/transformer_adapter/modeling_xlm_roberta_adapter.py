# SPDX-License-Identifier: Apache-2.0
"""``enable_xlm_roberta_speed``: the original's switch for fused NPU kernels in XLM-RoBERTa models; a no-op here.

Importing this module changes nothing (see ``mx_rag.transformer_adapter``).
"""

from __future__ import annotations

from mx_rag.transformer_adapter import note_switch

__all__ = ["enable_xlm_roberta_speed"]

enable_xlm_roberta_speed: bool = True  # the original's flag: set when its kernels were installed

note_switch("xlm_roberta")
