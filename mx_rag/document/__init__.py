# SPDX-License-Identifier: Apache-2.0
"""Document loading: ``LoaderMng`` (suffix → loader and splitter) and the loaders in ``loader``.

Names are resolved on first access, so ``import mx_rag.document`` imports no parsing library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.document.doc_loader_mng import LoaderInfo, LoaderMng, SplitterInfo

__all__ = ["LoaderInfo", "LoaderMng", "SplitterInfo"]

__getattr__, __dir__ = lazy_package(globals())
