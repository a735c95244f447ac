# SPDX-License-Identifier: Apache-2.0
"""File loaders that turn PDF, Word, PowerPoint, Excel, Markdown, text, HTML and image files
into LangChain ``Document`` objects.

Names are resolved on first access: ``from mx_rag.document.loader import PdfLoader`` imports
pypdf, and nothing else. A missing parsing library raises ``ExtraNotInstalledError`` naming
``pip install "mxrag[loaders]"``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mx_rag.errors import ExtraNotInstalledError

if TYPE_CHECKING:
    from mx_rag.document.loader.base_loader import BaseLoader
    from mx_rag.document.loader.docx_loader import DocxLoader
    from mx_rag.document.loader.excel_loader import ExcelLoader
    from mx_rag.document.loader.html_loader import HtmlLoader
    from mx_rag.document.loader.image_loader import ImageLoader
    from mx_rag.document.loader.md_loader import MarkdownLoader
    from mx_rag.document.loader.pdf_loader import PdfLoader
    from mx_rag.document.loader.ppt_loader import PowerPointLoader
    from mx_rag.document.loader.text_loader import TextLoader

_LAZY = {
    "BaseLoader": "mx_rag.document.loader.base_loader",
    "DocxLoader": "mx_rag.document.loader.docx_loader",
    "ExcelLoader": "mx_rag.document.loader.excel_loader",
    "HtmlLoader": "mx_rag.document.loader.html_loader",
    "ImageLoader": "mx_rag.document.loader.image_loader",
    "MarkdownLoader": "mx_rag.document.loader.md_loader",
    "PdfLoader": "mx_rag.document.loader.pdf_loader",
    "PowerPointLoader": "mx_rag.document.loader.ppt_loader",
    "TextLoader": "mx_rag.document.loader.text_loader",
}

# import name of each parsing library -> the extra that installs it
_EXTRA_MODULES = {"pypdf", "docx", "pptx", "openpyxl", "PIL", "bs4", "charset_normalizer"}

__all__ = [
    "BaseLoader",
    "DocxLoader",
    "ExcelLoader",
    "HtmlLoader",
    "ImageLoader",
    "MarkdownLoader",
    "PdfLoader",
    "PowerPointLoader",
    "TextLoader",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'mx_rag.document.loader' has no attribute {name!r}")
    try:
        module = importlib.import_module(_LAZY[name])
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in _EXTRA_MODULES:
            raise ExtraNotInstalledError(top, "loaders") from exc
        raise
    return getattr(module, name)
