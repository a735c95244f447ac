# SPDX-License-Identifier: Apache-2.0
"""``DocxLoader``: a Word (.docx) document as one text Document, with python-docx.

Paragraphs and tables are read in body order (content controls included). A table becomes one
text: each row as ``header: cell`` pairs joined with "，", rows joined with "；", ending with
"。"; a table with only a header row becomes the headers joined with "；". A merged cell repeats
its text in every grid column (``gridSpan``) and row (``vMerge``) it covers. Headers and footers
(page furniture repeated on every page) are not read.

The layout grid is read from the XML directly, bounded: a row spans at most 1000 grid columns and
a document at most 2,000,000 grid cells (python-docx's ``_Row.cells`` repeats a cell once per
spanned column and follows vertical merges recursively, so a ``gridSpan`` of 10**8 or a
thousand-row vertical merge exhausted memory or the stack).
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import docx
from docx.document import Document as WordDocument
from docx.oxml.table import CT_Row
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph
from langchain_core.documents import Document
from lxml import etree

from mx_rag.document.loader import base_loader
from mx_rag.document.loader.base_loader import check_zip, clean_text
from mx_rag.document.loader.picture_loader import PictureLoader
from mx_rag.errors import DocumentError

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["DocxLoader"]

MAX_BLOCKS = 200_000         # paragraphs and tables of the body
MAX_ROW_COLUMNS = 1000       # grid columns of one table row (Word itself allows 63)
MAX_TABLE_CELLS = 2_000_000  # grid cells of all the tables of a document, nested ones included

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_IMAGE_REFS = etree.XPath(  # pictures (DrawingML) and legacy VML images, in document order
    ".//a:blip/@r:embed | .//v:imagedata/@r:id",
    namespaces={
        "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
        "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
        "v": "urn:schemas-microsoft-com:vml",
    },
)


class DocxLoader(PictureLoader):
    """Load a ``.docx`` file as one text Document (``metadata``: source, type "text").

    With ``vlm``, the pictures of the body are captioned in document order (each picture once)
    and yielded after the text as image Documents (``type`` "image", ``image_base64``,
    ``image_mime``); pictures with both sides under 256 pixels are skipped.

    Args:
        file_path: the ``.docx`` file (at most 100 MiB, 500,000 characters of text and 200,000
            paragraphs and tables).
        vlm: an ``Img2TextLLM`` to caption pictures, or None.
        enable_ocr: without ``vlm``, read the pictures' text by OCR into text Documents (``ocr``
            and ``image`` True; needs ``mxrag[ocr]``).

    Example:
        >>> from mx_rag.document.loader import DocxLoader
        >>> doc = DocxLoader("contract.docx").load()[0]  # doctest: +SKIP
        >>> doc.metadata["type"]  # doctest: +SKIP
        'text'
    """

    SUFFIXES = (".docx",)

    def __init__(self, file_path: str | os.PathLike[str], vlm: Img2TextLLM | None = None, *,
                 enable_ocr: bool = False) -> None:  # the reference's signature: no lang
        super().__init__(file_path, vlm, enable_ocr=enable_ocr)

    def _load(self) -> Iterator[Document]:
        data = self._read_bytes()
        check_zip(data, self.file_path, ".docx")
        document = docx.Document(io.BytesIO(data))
        text = self._collect_text(document, _body_blocks(document.element.body))
        if text:
            yield self._text_document(text)
        if self.vlm is not None or self.enable_ocr:
            yield from self._pictures(document, _body_blocks(document.element.body))

    def _collect_text(self, document: WordDocument, blocks: Iterator[Any]) -> str:
        parts: list[str] = []
        total = 0
        tables = _TableReader(self.file_path)
        for count, element in enumerate(blocks, 1):
            if count > MAX_BLOCKS:
                raise DocumentError(f"{self.file_path!r} holds more than {MAX_BLOCKS} paragraphs and tables")
            if element.tag == f"{_W}p":
                part = Paragraph(element, document).text.strip()
            else:
                part = tables.text(Table(element, document))
            if part:
                total += len(part)
                if total > base_loader.MAX_WORD_NUM:
                    raise DocumentError(f"{self.file_path!r} holds more than {base_loader.MAX_WORD_NUM} "
                                        "characters of text")
                parts.append(part)
        return clean_text("\n\n".join(parts))

    def _pictures(self, document: WordDocument, blocks: Iterator[Any]) -> Iterator[Document]:
        """Captions (with ``vlm``) or OCR text (``enable_ocr``) of the body's pictures, each once."""
        seen: set[str] = set()
        for element in blocks:
            for rid in _IMAGE_REFS(element):
                part = document.part.related_parts.get(str(rid))
                if part is None or str(part.partname) in seen:
                    continue
                seen.add(str(part.partname))
                doc = self._picture_document(part.blob, f"a picture in {self.file_path!r}")
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


def table_text(table: Table, source: str = "") -> str:
    """The original SDK's table text: ``header: cell`` pairs, "，" between, "；" between rows, "。"."""
    return _TableReader(source).text(table)


class _TableReader:
    """Table text within the limits of one document (grid cells, characters of each table)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.cells = 0

    def text(self, table: Table) -> str:
        header: list[str] | None = None
        lines: list[str] = []
        size = 0
        above: dict[int, str] = {}
        for tr in table._tbl.tr_lst:
            row, above = self._row(tr, table, above)
            if not any(row):
                continue
            if header is None:
                header = row
                continue
            pairs = []
            for name, cell in itertools.zip_longest(header, row, fillvalue=""):
                if cell:
                    size += len(name) + len(cell) + 3
                    if size > base_loader.MAX_WORD_NUM:
                        raise DocumentError(f"{self.source!r} holds a table of more than {base_loader.MAX_WORD_NUM} "
                                            "characters of text")
                    pairs.append(f"{name}: {cell}" if name else cell)
            if pairs:
                lines.append("，".join(pairs))
        if header is None:
            return ""
        if not lines:
            return "；".join(name for name in header if name)
        return "；".join(lines) + "。"

    def _row(self, tr: CT_Row, table: Table, above: dict[int, str]) -> tuple[list[str], dict[int, str]]:
        """The row's text per grid column, and its texts by grid offset (for the row below)."""
        texts: list[str] = []
        by_offset: dict[int, str] = {}
        offset = tr.grid_before
        for tc in tr.tc_lst:
            span = max(1, min(tc.grid_span, MAX_ROW_COLUMNS - len(texts)))
            if len(texts) >= MAX_ROW_COLUMNS:
                break
            self.cells += span
            if self.cells > MAX_TABLE_CELLS:
                raise DocumentError(f"{self.source!r} has more than {MAX_TABLE_CELLS} table cells")
            # a vertically merged cell continues the cell above it: its text is repeated
            text = above.get(offset, "") if tc.vMerge == "continue" else self._cell(_Cell(tc, table))
            for column in range(offset, offset + span):
                by_offset[column] = text
            texts.extend([text] * span)
            offset += span
        return texts, by_offset

    def _cell(self, cell: _Cell) -> str:
        parts = []
        for item in cell.iter_inner_content():
            parts.append(item.text if isinstance(item, Paragraph) else self.text(item))
        return " ".join(" ".join(part.split()) for part in parts if part.strip())
