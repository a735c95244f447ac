# SPDX-License-Identifier: Apache-2.0
"""``DocxLoader``: a Word (.docx) document as one text Document, with python-docx.

Paragraphs and tables are read in body order (content controls included). A table becomes one
text: each row as ``header: cell`` pairs joined with "，", rows joined with "；", ending with
"。"; a table with only a header row becomes the headers joined with "；". Headers and footers
(page furniture repeated on every page) are not read.
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import docx
from docx.document import Document as WordDocument
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph
from langchain_core.documents import Document
from lxml import etree

from mx_rag.document.loader import base_loader
from mx_rag.document.loader._images import caption_image, check_vlm
from mx_rag.document.loader.base_loader import BaseLoader, check_zip, clean_text
from mx_rag.errors import DocumentError

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["DocxLoader"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_IMAGE_REFS = etree.XPath(  # pictures (DrawingML) and legacy VML images, in document order
    ".//a:blip/@r:embed | .//v:imagedata/@r:id",
    namespaces={
        "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
        "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
        "v": "urn:schemas-microsoft-com:vml",
    },
)


class DocxLoader(BaseLoader):
    """Load a ``.docx`` file as one text Document (``metadata``: source, type "text").

    With ``vlm``, the pictures of the body are captioned in document order (each picture once)
    and yielded after the text as image Documents (``type`` "image", ``image_base64``,
    ``image_mime``); pictures with both sides under 256 pixels are skipped.

    Args:
        file_path: the ``.docx`` file (at most 100 MiB and 500,000 characters of text).
        vlm: an ``Img2TextLLM`` to caption pictures, or None to ignore them.

    Example:
        >>> from mx_rag.document.loader import DocxLoader
        >>> doc = DocxLoader("contract.docx").load()[0]  # doctest: +SKIP
        >>> doc.metadata["type"]  # doctest: +SKIP
        'text'
    """

    SUFFIXES = (".docx",)

    def __init__(self, file_path: str | os.PathLike[str], vlm: Img2TextLLM | None = None) -> None:
        super().__init__(file_path)
        self.vlm = check_vlm(vlm)

    def _load(self) -> Iterator[Document]:
        data = self._read_bytes()
        check_zip(data, self.file_path, ".docx")
        document = docx.Document(io.BytesIO(data))
        blocks = list(_body_blocks(document.element.body))
        text = self._collect_text(document, blocks)
        if text:
            yield self._text_document(text)
        if self.vlm is not None:
            yield from self._captions(document, blocks)

    def _collect_text(self, document: WordDocument, blocks: list[Any]) -> str:
        parts: list[str] = []
        total = 0
        for element in blocks:
            if element.tag == f"{_W}p":
                part = Paragraph(element, document).text.strip()
            else:
                part = table_text(Table(element, document))
            if part:
                total += len(part)
                if total > base_loader.MAX_WORD_NUM:
                    raise DocumentError(f"{self.file_path!r} holds more than {base_loader.MAX_WORD_NUM} "
                                        "characters of text")
                parts.append(part)
        return clean_text("\n\n".join(parts))

    def _captions(self, document: WordDocument, blocks: list[Any]) -> Iterator[Document]:
        assert self.vlm is not None
        seen: set[str] = set()
        for element in blocks:
            for rid in _IMAGE_REFS(element):
                part = document.part.related_parts.get(str(rid))
                if part is None or str(part.partname) in seen:
                    continue
                seen.add(str(part.partname))
                doc = caption_image(part.blob, self.vlm, source=self.file_path)
                if doc is not None:
                    yield doc


def _body_blocks(container: Any) -> Iterator[Any]:
    """Paragraph and table elements in order, descending into content controls (w:sdt)."""
    for child in container.iterchildren():
        if not isinstance(child.tag, str):  # comments, processing instructions
            continue
        if child.tag in (f"{_W}p", f"{_W}tbl"):
            yield child
        elif child.tag == f"{_W}sdt":
            for content in child.iterchildren(f"{_W}sdtContent"):
                yield from _body_blocks(content)


def _cell_text(cell: _Cell) -> str:
    parts = []
    for item in cell.iter_inner_content():
        parts.append(item.text if isinstance(item, Paragraph) else table_text(item))
    return " ".join(" ".join(part.split()) for part in parts if part.strip())


def table_text(table: Table) -> str:
    """The original SDK's table text: ``header: cell`` pairs, "，" between, "；" between rows, "。"."""
    rows = [[_cell_text(cell) for cell in row.cells] for row in table.rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    lines = []
    for row in body:
        pairs = [f"{name}: {cell}" if name else cell
                 for name, cell in itertools.zip_longest(header, row, fillvalue="") if cell]
        if pairs:
            lines.append("，".join(pairs))
    if not lines:
        return "；".join(name for name in header if name)
    return "；".join(lines) + "。"
