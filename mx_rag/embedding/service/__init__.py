# SPDX-License-Identifier: Apache-2.0
"""Embedding services over HTTP: ``TEIEmbedding`` (Hugging Face TEI and OpenAI-style endpoints).

Names are resolved on first access, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mx_rag.embedding.service.tei_embedding import TEIEmbedding

_LAZY = {"TEIEmbedding": "mx_rag.embedding.service.tei_embedding"}

__all__ = ["TEIEmbedding"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mx_rag.embedding.service' has no attribute {name!r}")
