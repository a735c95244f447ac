# SPDX-License-Identifier: Apache-2.0
"""``ExcelLoader``: each data row of an Excel (.xlsx) workbook as one Document, with openpyxl.

Per sheet, the first non-blank row is the header; when it holds a single cell and the next row
holds more, it is a sheet title (kept in ``metadata["title"]``) and the next row is the header.
Every later non-blank row becomes ``"header:value;"`` for each non-empty cell (a column without
a header is named by its letter). A sheet with a single non-blank row yields that row's values.
Merged cells take the value of their range's top-left cell, as in the original SDK: a category
merged down a column, or a merged total, appears in every row the range covers (a range merged
across columns counts as one cell for the title-row rule). Legacy ``.xls`` files are not
supported (no xlrd): save them as ``.xlsx``.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import logging
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from langchain_core.documents import Document
from lxml import etree
from openpyxl import load_workbook
from openpyxl.utils import get_column_letter, range_boundaries

from mx_rag.document.loader import base_loader
from mx_rag.document.loader.base_loader import BaseLoader, check_zip
from mx_rag.errors import DocumentError, UnsupportedFileTypeError
from mx_rag.utils.checks import check_str

__all__ = ["ExcelLoader"]

logger = logging.getLogger(__name__)

MAX_ROW_NUM = 10_000
MAX_COL_NUM = 1_000
MAX_MERGED_CELLS = 1_000_000  # cells a sheet's merged ranges may fill; the rest are left as stored
# A sheet is streamed, but openpyxl holds a whole row, every row element it has read (while
# looking for the sheet's size, as soon as the workbook opens) and every part of the sheet
# outside its rows (merged ranges, hyperlinks, validations...) as objects: a workbook whose
# worksheet XML goes beyond these is refused before openpyxl opens it.
MAX_XML_ROWS = 10 * MAX_ROW_NUM      # <row> elements of a worksheet
MAX_ROW_ELEMENTS = 50 * MAX_COL_NUM  # XML elements in one row (cells, values, rich-text runs)
MAX_OTHER_ELEMENTS = 200_000         # XML elements outside the rows
WORKSHEETS = "xl/worksheets/"
_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_ROW, _CELL, _SHEET_DATA, _MERGE_CELL = f"{_MAIN}row", f"{_MAIN}c", f"{_MAIN}sheetData", f"{_MAIN}mergeCell"


@dataclass
class _SheetScan:
    """What a streaming pass over a worksheet's XML found: why to refuse the workbook (``fatal``)
    or skip the sheet (``skip``), and its merged ranges."""

    fatal: str = ""
    skip: str = ""
    merges: list[str] = field(default_factory=list)


@dataclass
class Row:
    """A sheet row: its 1-based number, its cell texts, and the 0-based columns that only repeat a
    value merged across from a cell on their left (not counted as filled for the title rule)."""

    number: int
    cells: list[str]
    copies: set[int] = field(default_factory=set)

    def filled(self) -> list[str]:
        return [cell for index, cell in enumerate(self.cells) if cell and index not in self.copies]


class ExcelLoader(BaseLoader):
    """Load a ``.xlsx`` workbook: one text Document per data row.

    ``metadata``: source, sheet (its name), row (1-based row in the sheet), type "text", and
    title when the sheet starts with a title row. Sheets above 10,000 rows or 1,000 columns are
    skipped with a warning; a workbook whose worksheet XML is out of proportion (more than
    100,000 rows, a row of more than 50,000 elements, more than 200,000 elements outside the rows)
    is refused before openpyxl opens it; a workbook may hold at most 1000 sheets. Formulas give their cached
    values. Password-protected workbooks are refused with ``DocumentError``.

    Args:
        file_path: the ``.xlsx`` file (at most 100 MiB).
        line_sep: accepted for compatibility (1 to 1024 characters); unused, as in the original.

    Example:
        >>> from mx_rag.document.loader import ExcelLoader
        >>> rows = ExcelLoader("cups.xlsx").load()  # doctest: +SKIP
        >>> rows[0].page_content  # doctest: +SKIP
        'Team:Blues;Location:STL;Stanley Cups:1;'
    """

    SUFFIXES = (".xlsx",)

    def __init__(self, file_path: str | os.PathLike[str], line_sep: str = "**;") -> None:
        if isinstance(file_path, (str, os.PathLike)) and str(os.fspath(file_path)).lower().endswith(".xls"):
            raise UnsupportedFileTypeError(
                f"legacy .xls files are not supported (no xlrd): {os.fspath(file_path)!r}; save it as .xlsx"
            )
        super().__init__(file_path)
        self.line_sep = check_str("line_sep", line_sep, 1, 1024)

    def _load(self) -> Iterator[Document]:
        data = self._read_bytes()
        check_zip(data, self.file_path, ".xlsx", streamed=(WORKSHEETS,))
        scans = self._scan_worksheets(data)
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            sheets = workbook.worksheets
            if len(sheets) > base_loader.MAX_PAGE_NUM:
                raise DocumentError(f"{self.file_path!r} has {len(sheets)} sheets, more than the limit of "
                                    f"{base_loader.MAX_PAGE_NUM}")
            for sheet in sheets:
                rows = self._sheet_rows(sheet, scans.get(str(getattr(sheet, "_worksheet_path", "")), _SheetScan()))
                if rows:
                    yield from self._row_documents(str(sheet.title), rows)
        finally:
            workbook.close()

    def _scan_worksheets(self, data: bytes) -> dict[str, _SheetScan]:
        """Each worksheet part's scan; ``DocumentError`` when one is out of proportion."""
        scans = {}
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for name in archive.namelist():
                if name.startswith(WORKSHEETS) and name.endswith(".xml") and "/_rels/" not in name:
                    with archive.open(name) as source:
                        scans[name] = scan = _scan_sheet(source)
                    if scan.fatal:
                        raise DocumentError(f"{self.file_path!r} is out of proportion to be read: its worksheet "
                                            f"{name!r} has {scan.fatal}")
        return scans

    def _sheet_rows(self, sheet: Any, scan: _SheetScan) -> list[Row] | None:
        """The non-blank rows of a sheet (merged ranges filled in), or None when it is over the
        row or column limit."""
        if scan.skip:
            logger.warning("skipped sheet %r of %r: %s", sheet.title, self.file_path, scan.skip)
            return None
        rows: list[Row] = []
        limit = MAX_ROW_NUM + 1
        for number, values in enumerate(itertools.islice(sheet.iter_rows(min_row=1, values_only=True), limit), 1):
            if number > MAX_ROW_NUM or len(values) > MAX_COL_NUM:
                logger.warning("skipped sheet %r of %r: more than %d rows or %d columns",
                               sheet.title, self.file_path, MAX_ROW_NUM, MAX_COL_NUM)
                return None
            rows.append(Row(number, [_cell_text(value) for value in values]))
        if any(any(row.cells) for row in rows):
            self._fill_merged(rows, scan.merges, str(sheet.title))
        return [row for row in rows if any(row.cells)]

    def _fill_merged(self, rows: list[Row], ranges: list[str], sheet: str) -> None:
        """Copy each merged range's top-left value into every cell of the range (within the limits)."""
        budget = MAX_MERGED_CELLS
        for ref in ranges:
            try:
                col1, row1, col2, row2 = range_boundaries(ref)
            except (TypeError, ValueError):
                logger.debug("ignored merged range %r of sheet %r: not a cell range", ref, sheet)
                continue
            if None in (col1, row1, col2, row2):  # whole rows or columns: not a cell merge
                continue
            top, bottom = min(row1, row2), min(max(row1, row2), MAX_ROW_NUM)
            left, right = min(col1, col2), min(max(col1, col2), MAX_COL_NUM)
            if top > len(rows) or left > len(rows[top - 1].cells):  # rows[i] is sheet row i + 1
                continue
            value = rows[top - 1].cells[left - 1]
            if not value:
                continue
            covered = rows[top - 1:bottom]
            budget -= len(covered) * (right - left + 1)
            if budget < 0:
                logger.warning("sheet %r of %r merges more than %d cells: the rest are left unfilled",
                               sheet, self.file_path, MAX_MERGED_CELLS)
                return
            for row in covered:
                if len(row.cells) < right:
                    row.cells.extend([""] * (right - len(row.cells)))
                row.cells[left - 1:right] = [value] * (right - left + 1)
                row.copies.update(range(left, right))

    def _row_documents(self, sheet: str, rows: list[Row]) -> Iterator[Document]:
        extra: dict[str, Any] = {"sheet": sheet}
        if len(rows) >= 2 and len(rows[0].filled()) == 1 and len(rows[1].filled()) > 1:
            extra["title"] = rows[0].filled()[0]
            rows = rows[1:]
        header = rows[0]
        if len(rows) == 1:
            yield self._text_document(";".join(header.filled()), row=header.number, **extra)
            return
        names = [name or get_column_letter(index) for index, name in enumerate(header.cells, 1)]
        for row in rows[1:]:
            names += [get_column_letter(index) for index in range(len(names) + 1, len(row.cells) + 1)]
            text = "".join(f"{name}:{cell};" for name, cell in zip(names, row.cells, strict=False) if cell)
            yield self._text_document(text, row=row.number, **extra)


def _scan_sheet(source: IO[bytes]) -> _SheetScan:
    """Stream a worksheet's XML once, before openpyxl opens the workbook: check its proportions,
    collect its merged ranges (openpyxl's read-only mode, kept for its bounded memory, does not
    give them). One row, or one element outside the rows, is held at a time."""
    scan = _SheetScan()
    rows = cells = row_elements = other = 0
    in_rows = in_row = False
    for event, element in etree.iterparse(source, events=("start", "end"), resolve_entities=False,
                                          no_network=True, huge_tree=False, remove_comments=True):
        tag = element.tag
        if event == "start":
            if in_row:
                row_elements += 1
                cells += tag == _CELL
                if row_elements > MAX_ROW_ELEMENTS:
                    scan.fatal = f"a row of more than {MAX_ROW_ELEMENTS} XML elements (row element {rows})"
                    return scan
                if cells > MAX_COL_NUM and not scan.skip:
                    scan.skip = f"row element {rows} holds more than {MAX_COL_NUM} cells"
            elif tag == _ROW and in_rows:
                in_row, cells, row_elements = True, 0, 0
                rows += 1
                if rows > MAX_XML_ROWS:
                    scan.fatal = f"more than {MAX_XML_ROWS} rows"
                    return scan
                if rows > MAX_ROW_NUM and not scan.skip:
                    scan.skip = f"more than {MAX_ROW_NUM} rows"
            elif tag == _SHEET_DATA:
                in_rows = True
            else:
                other += 1
                if other > MAX_OTHER_ELEMENTS:
                    scan.fatal = f"more than {MAX_OTHER_ELEMENTS} XML elements outside its rows"
                    return scan
            continue
        if tag == _MERGE_CELL and element.get("ref") and not scan.skip:
            scan.merges.append(str(element.get("ref")))
        elif tag == _ROW:
            in_row = False
        elif tag == _SHEET_DATA:
            in_rows = False
        if not in_row:  # drop what was read (inside a row, the row goes at its end)
            element.clear(keep_tail=False)
            parent = element.getparent()
            if parent is not None:
                while element.getprevious() is not None:
                    del parent[0]
    return scan


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return " ".join(str(value).split())
