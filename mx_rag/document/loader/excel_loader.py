# SPDX-License-Identifier: Apache-2.0
"""``ExcelLoader``: each data row of an Excel (.xlsx) workbook as one Document, with openpyxl.

Per sheet, the first non-blank row is the header; when it holds a single cell and the next row
holds more, it is a sheet title (kept in ``metadata["title"]``) and the next row is the header.
Every later non-blank row becomes ``"header:value;"`` for each non-empty cell (a column without
a header is named by its letter). A sheet with a single non-blank row yields that row's values.
Legacy ``.xls`` files are not supported (no xlrd): save them as ``.xlsx``.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import logging
import os
from collections.abc import Iterator
from typing import Any

from langchain_core.documents import Document
from openpyxl import load_workbook
from openpyxl.utils import get_column_letter

from mx_rag.document.loader import base_loader
from mx_rag.document.loader.base_loader import BaseLoader, check_zip
from mx_rag.errors import DocumentError, UnsupportedFileTypeError
from mx_rag.utils.checks import check_str

__all__ = ["ExcelLoader"]

logger = logging.getLogger(__name__)

MAX_ROW_NUM = 10_000
MAX_COL_NUM = 1_000

Row = tuple[int, list[str]]  # (1-based sheet row, cell texts)


class ExcelLoader(BaseLoader):
    """Load a ``.xlsx`` workbook: one text Document per data row.

    ``metadata``: source, sheet (its name), row (1-based row in the sheet), type "text", and
    title when the sheet starts with a title row. Sheets above 10,000 rows or 1,000 columns are
    skipped with a warning; a workbook may hold at most 1000 sheets. Formulas give their cached
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
        check_zip(data, self.file_path, ".xlsx")
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            sheets = workbook.worksheets
            if len(sheets) > base_loader.MAX_PAGE_NUM:
                raise DocumentError(f"{self.file_path!r} has {len(sheets)} sheets, more than the limit of "
                                    f"{base_loader.MAX_PAGE_NUM}")
            for sheet in sheets:
                rows = self._sheet_rows(sheet)
                if rows:
                    yield from self._row_documents(str(sheet.title), rows)
        finally:
            workbook.close()

    def _sheet_rows(self, sheet: Any) -> list[Row] | None:
        """The non-blank rows of a sheet, or None when it is over the row or column limit."""
        rows: list[Row] = []
        limit = MAX_ROW_NUM + 1
        for number, values in enumerate(itertools.islice(sheet.iter_rows(min_row=1, values_only=True), limit), 1):
            if number > MAX_ROW_NUM or len(values) > MAX_COL_NUM:
                logger.warning("skipped sheet %r of %r: more than %d rows or %d columns",
                               sheet.title, self.file_path, MAX_ROW_NUM, MAX_COL_NUM)
                return None
            cells = [_cell_text(value) for value in values]
            if any(cells):
                rows.append((number, cells))
        return rows

    def _row_documents(self, sheet: str, rows: list[Row]) -> Iterator[Document]:
        extra: dict[str, Any] = {"sheet": sheet}
        if len(rows) >= 2 and _filled(rows[0][1]) == 1 and _filled(rows[1][1]) > 1:
            extra["title"] = next(cell for cell in rows[0][1] if cell)
            rows = rows[1:]
        header_row, header = rows[0]
        if len(rows) == 1:
            yield self._text_document(";".join(cell for cell in header if cell), row=header_row, **extra)
            return
        names = [name or get_column_letter(index) for index, name in enumerate(header, 1)]
        for number, cells in rows[1:]:
            names += [get_column_letter(index) for index in range(len(names) + 1, len(cells) + 1)]
            text = "".join(f"{name}:{cell};" for name, cell in zip(names, cells, strict=False) if cell)
            yield self._text_document(text, row=number, **extra)


def _filled(cells: list[str]) -> int:
    return sum(1 for cell in cells if cell)


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
