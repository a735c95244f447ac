# SPDX-License-Identifier: Apache-2.0
"""Document loading: ``LoaderMng`` (suffix → loader and splitter) and the loaders in ``loader``.

Names are resolved on first access, so ``import mx_rag.document`` imports no parsing library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mx_rag.document.doc_loader_mng import LoaderInfo, LoaderMng, SplitterInfo

_LAZY = {
    "LoaderMng": "mx_rag.document.doc_loader_mng",
    "LoaderInfo": "mx_rag.document.doc_loader_mng",
    "SplitterInfo": "mx_rag.document.doc_loader_mng",
}

__all__ = ["LoaderInfo", "LoaderMng", "SplitterInfo"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mx_rag.document' has no attribute {name!r}")
