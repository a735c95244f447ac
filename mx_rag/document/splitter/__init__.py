# SPDX-License-Identifier: Apache-2.0
"""Text splitters: ``MarkdownTextSplitter`` (header-aware Markdown chunks).

Names are resolved on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.document.splitter.markdown_splitter import MarkdownTextSplitter

__all__ = ["MarkdownTextSplitter"]

__getattr__, __dir__ = lazy_package(globals())
