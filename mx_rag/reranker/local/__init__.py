# SPDX-License-Identifier: Apache-2.0
"""Local rerankers (loaded lazily: importing this package does not import torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mx_rag.reranker.local.reranker import LocalReranker

__all__ = ["LocalReranker"]


def __getattr__(name: str) -> Any:
    if name == "LocalReranker":
        from mx_rag.reranker.local.reranker import LocalReranker

        return LocalReranker
    raise AttributeError(f"module 'mx_rag.reranker.local' has no attribute {name!r}")
