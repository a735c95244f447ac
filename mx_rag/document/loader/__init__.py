# SPDX-License-Identifier: Apache-2.0
"""File loaders that turn PDF, Word, PowerPoint, Excel, Markdown, text, HTML and image files
into LangChain ``Document`` objects.

Names are resolved on first access: ``from mx_rag.document.loader import PdfLoader`` imports
pypdf, and nothing else. A missing parsing library raises ``ExtraNotInstalledError`` naming
``pip install "mxrag[loaders]"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

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

# the import names of the parsing libraries that the ``loaders`` extra installs
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

__getattr__, __dir__ = lazy_package(globals(), extra="loaders", extra_modules=_EXTRA_MODULES)
