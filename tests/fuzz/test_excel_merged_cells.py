"""ExcelLoader fills merged ranges: every row a range covers gets the range's top-left value.

Regression: the read-only workbook openpyxl gives does not expose merged ranges, so a category
merged down column A and a merged SUM cell were lost on every row below the range's first row.
The workbooks are real .xlsx files written by openpyxl; the formula cells get the cached value
Excel would have stored (openpyxl writes formulas without one).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import openpyxl
import pytest

from mx_rag.document import LoaderMng
from mx_rag.document.loader import ExcelLoader, excel_loader

SHEET = "xl/worksheets/sheet1.xml"


def _with_cached_values(path: Path, cached: dict[str, str]) -> None:
    """Store a cached result for each formula cell, as Excel does when it saves a workbook."""
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, content in members:
            if info.filename == SHEET:
                for formula, value in cached.items():
                    old = f"<f>{formula}</f><v></v>".encode()
                    assert old in content, formula
                    content = content.replace(old, f"<f>{formula}</f><v>{value}</v>".encode())
            archive.writestr(info, content)
    path.write_bytes(buffer.getvalue())


@pytest.fixture
def sales(tmp_path: Path) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sales"
    sheet.append(["Quarterly sales"])                      # a title merged across A1:D1
    sheet.append(["Category", "Item", "Amount", "Total"])
    sheet.append(["Fruit", "Apple", 10, "=SUM(C3:C5)"])      # Fruit merged A3:A5, its SUM D3:D5
    sheet.append([None, "Pear", 20, None])
    sheet.append([None, "Plum", 5, None])
    sheet.append(["Veg", "Leek", 7, "=SUM(C6:C6)"])
    sheet.append([None, None, None, None])
    sheet.append(["Note", "merged B8:C9", None, None])
    sheet.append([None, None, None, None])                 # blank but for the merged B8:C9
    for ref in ("A1:D1", "A3:A5", "D3:D5", "B8:C9"):
        sheet.merge_cells(ref)
    path = tmp_path / "sales.xlsx"
    book.save(str(path))
    _with_cached_values(path, {"SUM(C3:C5)": "35", "SUM(C6:C6)": "7"})
    return path


def test_merged_category_and_sum_fill_every_row_they_cover(sales: Path) -> None:
    rows = ExcelLoader(sales).load()
    assert [(row.metadata["row"], row.page_content) for row in rows] == [
        (3, "Category:Fruit;Item:Apple;Amount:10;Total:35;"),
        (4, "Category:Fruit;Item:Pear;Amount:20;Total:35;"),
        (5, "Category:Fruit;Item:Plum;Amount:5;Total:35;"),
        (6, "Category:Veg;Item:Leek;Amount:7;Total:7;"),
        (8, "Category:Note;Item:merged B8:C9;Amount:merged B8:C9;"),
        (9, "Item:merged B8:C9;Amount:merged B8:C9;"),
    ]
    # a title merged across the columns still counts as one cell: it is the sheet's title
    assert {row.metadata["title"] for row in rows} == {"Quarterly sales"}


def test_merged_rows_survive_load_and_split(sales: Path) -> None:
    chunks = LoaderMng.with_defaults().load_and_split(sales)
    assert "Category:Fruit;Item:Plum;Amount:5;Total:35;" in [chunk.page_content for chunk in chunks]


def test_merged_header_names_every_column_it_spans(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Region", "Sales", None])
    sheet.append([None, "Q1", "Q2"])
    sheet.append(["North", 1, 2])
    sheet.merge_cells("B1:C1")
    sheet.merge_cells("A1:A2")
    path = tmp_path / "header.xlsx"
    book.save(str(path))
    rows = ExcelLoader(path).load()
    assert [row.page_content for row in rows] == ["Region:Region;Sales:Q1;Sales:Q2;", "Region:North;Sales:1;Sales:2;"]


def test_single_row_sheet_with_a_merged_cell_lists_the_value_once(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    book.active.append(["Only", None, None, "row"])
    book.active.merge_cells("A1:C1")
    path = tmp_path / "one.xlsx"
    book.save(str(path))
    assert [row.page_content for row in ExcelLoader(path).load()] == ["Only;row"]


def test_hostile_merged_ranges_are_bounded(tmp_path: Path) -> None:
    """A range over the whole sheet is cut to the row and column limits; overlapping ranges (which
    Excel never writes) apply in file order."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["h1", "h2"])
    sheet.append(["a", "b"])
    path = tmp_path / "hostile.xlsx"
    book.save(str(path))
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    merges = b'<mergeCells count="2"><mergeCell ref="A2:XFD1048576"/><mergeCell ref="A1:B2"/></mergeCells>'
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, content in members:
            if info.filename == SHEET:
                content = content.replace(b"</sheetData>", b"</sheetData>" + merges)
            archive.writestr(info, content)
    path.write_bytes(buffer.getvalue())
    rows = ExcelLoader(path).load()
    # A2:XFD1048576 is cut to the 1000 columns of the limit on the rows read
    assert [row.metadata["row"] for row in rows] == [2]
    assert rows[0].page_content.startswith("h1:h1;h1:h1;C:a;D:a;")  # A1:B2's "h1" fills A2:B2 last
    assert rows[0].page_content.endswith("ALL:a;")  # column 1000, the column limit


def test_merges_beyond_the_fill_budget_are_left_unfilled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    book = openpyxl.Workbook()
    for row in (["Category", "Item"], ["Fruit", "Apple"], [None, "Pear"], [None, "Plum"]):
        book.active.append(row)
    book.active.merge_cells("A2:A4")
    path = tmp_path / "budget.xlsx"
    book.save(str(path))
    monkeypatch.setattr(excel_loader, "MAX_MERGED_CELLS", 2)
    rows = ExcelLoader(path).load()
    assert [row.page_content for row in rows] == ["Category:Fruit;Item:Apple;", "Item:Pear;", "Item:Plum;"]
    assert "merges more than 2 cells" in caplog.text
