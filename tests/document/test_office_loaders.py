"""DocxLoader, PowerPointLoader and ExcelLoader on real Office files."""

import datetime as dt
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from pptx.util import Inches

from mx_rag.document.loader import DocxLoader, ExcelLoader, PowerPointLoader, excel_loader
from mx_rag.document.loader import base_loader as base
from mx_rag.errors import DocumentError, ParameterError, UnsupportedFileTypeError

# -- Word ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("fake.docx", "Lorem ipsum dolor sit amet."),
        ("docx-hdrftr.docx", "Main document"),  # headers and footers are page furniture: not read
    ],
)
def test_docx_text(docs: Path, name: str, expected: str) -> None:
    [doc] = DocxLoader(docs / name).load()
    assert doc.page_content == expected
    assert doc.metadata == {"source": str(docs / name), "type": "text"}


def test_docx_tables_in_body_order_with_the_original_table_format(docs: Path) -> None:
    [doc] = DocxLoader(docs / "docx-tables.docx").load()
    blocks = doc.page_content.split("\n\n")
    assert blocks[0] == "Simple uniform table"
    assert blocks[1] == "Header Col 1: Lorem ipsum，Header Col 2: A link example。"
    assert blocks[2] == "Nested Table"
    assert blocks[3].startswith("a: d，>b<: ")  # the nested table's text sits in its cell
    assert blocks[3].endswith("；a: j，>b<: k，c: l。")
    assert blocks[4] == "Table with merged cells"
    assert blocks[5] == "a: a，b: c，b: d；a: e，b: e，b: d。"  # merged cells repeat their text


def test_docx_header_only_table_and_headings(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Quarterly results", level=1)
    table = document.add_table(rows=1, cols=3)
    for cell, text in zip(table.rows[0].cells, ["Region", "Sales", "Margin"], strict=True):
        cell.text = text
    document.add_paragraph("Closing remarks.")
    path = tmp_path / "report.docx"
    document.save(str(path))
    [doc] = DocxLoader(path).load()
    assert doc.page_content == "Quarterly results\n\nRegion；Sales；Margin\n\nClosing remarks."


def test_docx_character_limit(monkeypatch: pytest.MonkeyPatch, docs: Path) -> None:
    monkeypatch.setattr(base, "MAX_WORD_NUM", 10)
    with pytest.raises(DocumentError, match="more than 10 characters"):
        DocxLoader(docs / "fake.docx").load()


def test_docx_that_is_another_office_file(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "cups.docx"
    path.write_bytes((docs / "stanley-cups.xlsx").read_bytes())
    with pytest.raises(DocumentError, match=r"cups\.docx.*DocxLoader") as info:
        DocxLoader(path).load()
    assert info.value.__cause__ is not None


# -- PowerPoint ------------------------------------------------------------------------------


def test_pptx_text_frames_in_shape_order(docs: Path) -> None:
    [slide] = PowerPointLoader(docs / "fake-power-point.pptx").load()
    assert slide.page_content.splitlines() == [
        "Adding a Bullet Slide",
        "Find the bullet slide layout",
        "Use _TextFrame.text for first bullet",
        "Use _TextFrame.add_paragraph() for subsequent bullets",
        "Here is a lot of text!",
        "Here is some text in a text box!",
    ]
    assert slide.metadata == {"source": str(docs / "fake-power-point.pptx"), "type": "text", "page": 1}


def test_pptx_table_cells_in_row_order(docs: Path) -> None:
    [slide] = PowerPointLoader(docs / "fake-power-point-table.pptx").load()
    assert slide.page_content.splitlines() == [
        "A Slide with a Table",
        "| Column 1 | Column 2 | Column 3 |",
        "| --- | --- | --- |",
        "| Red | Green | Blue |",
        "| Purple | Orange | Yellow |",
        "| Tangerine | Pink | Aqua |",
    ]


def test_pptx_the_unstructured_malformed_sample_still_loads(docs: Path) -> None:
    [slide] = PowerPointLoader(docs / "fake-power-point-malformed.pptx").load()
    assert slide.page_content == "Problem Date Placeholder\nTest Slide"


def test_pptx_slide_numbers_group_shapes_and_empty_slides(tmp_path: Path) -> None:
    deck = pptx.Presentation()
    blank = deck.slide_layouts[6]
    first = deck.slides.add_slide(blank)
    first.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Intro"
    deck.slides.add_slide(blank)  # empty: no Document
    third = deck.slides.add_slide(blank)
    group = third.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1)).text_frame.text = "grouped one"
    group.shapes.add_textbox(Inches(1), Inches(2), Inches(3), Inches(1)).text_frame.text = "grouped two"
    third.shapes.add_textbox(Inches(1), Inches(4), Inches(3), Inches(1)).text_frame.text = "after group"
    path = tmp_path / "deck.pptx"
    deck.save(str(path))
    slides = PowerPointLoader(path).load()
    assert [(s.metadata["page"], s.page_content) for s in slides] == [
        (1, "Intro"),
        (3, "grouped one\ngrouped two\nafter group"),
    ]


def test_pptx_truncated_file_is_refused(tmp_path: Path, docs: Path) -> None:
    data = (docs / "fake-power-point.pptx").read_bytes()
    path = tmp_path / "cut.pptx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DocumentError, match=r"cut\.pptx.*not a valid \.pptx"):
        PowerPointLoader(path).load()


# -- Excel -----------------------------------------------------------------------------------


def test_xlsx_rows_with_title_row_and_header(docs: Path) -> None:
    rows = ExcelLoader(docs / "stanley-cups.xlsx").load()
    assert [r.page_content for r in rows[:3]] == [
        "Team:Blues;Location:STL;Stanley Cups:1;",
        "Team:Flyers;Location:PHI;Stanley Cups:2;",
        "Team:Maple Leafs;Location:TOR;Stanley Cups:13;",
    ]
    assert rows[0].metadata == {"source": str(docs / "stanley-cups.xlsx"), "type": "text", "sheet": "Stanley Cups",
                                "row": 3, "title": "Stanley Cups"}
    assert [r.metadata["sheet"] for r in rows] == ["Stanley Cups"] * 3 + ["Stanley Cups Since 67"] * 3
    assert rows[-1].page_content == "Team:Maple Leafs;Location:TOR;Stanley Cups:0;"


def test_xlsx_single_row_sheet_and_emoji(docs: Path) -> None:
    [row] = ExcelLoader(docs / "emoji.xlsx").load()
    assert row.page_content == "🤠😅"
    assert row.metadata["row"] == 2


def test_xlsx_empty_workbook_has_no_documents(docs: Path) -> None:
    assert ExcelLoader(docs / "empty.xlsx").load() == []


def test_xlsx_password_protected_is_refused(docs: Path) -> None:
    with pytest.raises(DocumentError, match=r"encrypted or not a \.xlsx"):
        ExcelLoader(docs / "password_protected.xlsx").load()


def test_xls_is_not_supported(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "old.xls"
    path.write_bytes((docs / "password_protected.xlsx").read_bytes())
    with pytest.raises(UnsupportedFileTypeError, match="xls files are not supported"):
        ExcelLoader(path)


def _workbook(tmp_path: Path, rows: list[list[object]], name: str = "book.xlsx") -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Data"
    for row in rows:
        sheet.append(row)
    path = tmp_path / name
    book.save(str(path))
    return path


def test_xlsx_values_blank_rows_and_headerless_columns(tmp_path: Path) -> None:
    path = _workbook(tmp_path, [
        ["Name", "Born", None, "Score"],
        [None, None, None, None],
        ["Ada", dt.datetime(1815, 12, 10), "extra", 3.5],
        ["Alan", dt.datetime(1912, 6, 23, 8, 30), None, 2.0],
    ])
    rows = ExcelLoader(path).load()
    assert [(r.metadata["row"], r.page_content) for r in rows] == [
        (3, "Name:Ada;Born:1815-12-10;C:extra;Score:3.5;"),
        (4, "Name:Alan;Born:1912-06-23 08:30:00;Score:2;"),
    ]
    assert "title" not in rows[0].metadata


def test_xlsx_formulas_give_cached_values_only(tmp_path: Path) -> None:
    path = _workbook(tmp_path, [["a", "b", "sum"], [1, 2, "=A2+B2"]])
    [row] = ExcelLoader(path).load()
    assert row.page_content == "a:1;b:2;"  # openpyxl wrote no cached value for the formula


def test_xlsx_oversized_sheet_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(excel_loader, "MAX_ROW_NUM", 3)
    path = _workbook(tmp_path, [["h"], [1], [2], [3]])
    assert ExcelLoader(path).load() == []
    assert "skipped sheet 'Data'" in caplog.text


def test_xlsx_sheet_limit(monkeypatch: pytest.MonkeyPatch, docs: Path) -> None:
    monkeypatch.setattr(base, "MAX_PAGE_NUM", 1)
    with pytest.raises(DocumentError, match="2 sheets"):
        ExcelLoader(docs / "stanley-cups.xlsx").load()


@pytest.mark.parametrize("line_sep", ["", 5, "x" * 1025])
def test_xlsx_line_sep_is_validated(docs: Path, line_sep: object) -> None:
    with pytest.raises(ParameterError, match="line_sep"):
        ExcelLoader(docs / "stanley-cups.xlsx", line_sep=line_sep)  # type: ignore[arg-type]
