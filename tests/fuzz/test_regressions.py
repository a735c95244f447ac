"""Regression tests for the crashes, hangs and blow-ups the fuzz suite and the hostile inputs found.

Each test builds a real file (python-docx, openpyxl, zipfile) or a real text and loads it with
the real loader; the pytest-timeout limit turns a hang into a failure.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import docx
import openpyxl
import pytest
from fuzz_helpers import build_zip, check_message, read_members, seed

from mx_rag.document import LoaderMng
from mx_rag.document.loader import DocxLoader, ExcelLoader, HtmlLoader, MarkdownLoader, PowerPointLoader, excel_loader
from mx_rag.document.loader import base_loader as base
from mx_rag.errors import DocumentError
from mx_rag.graphrag.json_repair import loads_tolerant

pytestmark = pytest.mark.timeout(120)

# -- Word tables ---------------------------------------------------------------------------------------


def _word_table(tmp_path: Path, rows: list[list[str]]) -> tuple[docx.document.Document, docx.table.Table, Path]:
    document = docx.Document()
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for row, texts in zip(table.rows, rows, strict=True):
        for cell, text in zip(row.cells, texts, strict=True):
            cell.text = text
    return document, table, tmp_path / "table.docx"


def test_docx_cell_spanning_thirty_million_columns_is_cut_to_the_row_limit(tmp_path: Path) -> None:
    """python-docx's _Row.cells repeated the cell 3e7 times: minutes and gigabytes."""
    document, table, path = _word_table(tmp_path, [["Name", "Score"], ["Ada", "3"]])
    table.rows[0].cells[0]._tc.grid_span = 30_000_000
    document.save(str(path))
    [doc] = DocxLoader(path).load()
    assert doc.page_content == "Name: Ada，Name: 3。"  # the header cell names the columns it spans


def test_docx_vertical_merge_over_1200_rows_repeats_the_text(tmp_path: Path) -> None:
    """python-docx follows a vertical merge row by row recursively: RecursionError after 100 s."""
    rows = [["Team", "Player"]] + [["Red" if i == 1 else "", f"p{i}"] for i in range(1, 1201)]
    document, table, path = _word_table(tmp_path, rows)
    for index, row in enumerate(table.rows):
        if index:
            row.cells[0]._tc.vMerge = "restart" if index == 1 else "continue"
    document.save(str(path))
    [doc] = DocxLoader(path).load()
    lines = doc.page_content.rstrip("。").split("；")
    assert len(lines) == 1200
    assert lines[0] == "Team: Red，Player: p1" and lines[-1] == "Team: Red，Player: p1200"


def test_docx_vertical_merge_continued_from_nothing_is_read(tmp_path: Path) -> None:
    """A first row marked as continuing a merge made python-docx raise (no row above)."""
    document, table, path = _word_table(tmp_path, [["a", "b"], ["c", "d"]])
    table.rows[0].cells[0]._tc.vMerge = "continue"
    document.save(str(path))
    [doc] = DocxLoader(path).load()
    assert doc.page_content == "c，b: d。"  # the header's first cell is empty: its column has no name


def test_docx_body_block_limit(monkeypatch: pytest.MonkeyPatch, docs_dir: Path) -> None:
    from mx_rag.document.loader import docx_loader

    monkeypatch.setattr(docx_loader, "MAX_BLOCKS", 2)
    with pytest.raises(DocumentError, match="more than 2 paragraphs and tables"):
        DocxLoader(docs_dir / "docx-tables.docx").load()


def test_pptx_shape_limit(monkeypatch: pytest.MonkeyPatch, docs_dir: Path) -> None:
    from mx_rag.document.loader import ppt_loader

    monkeypatch.setattr(ppt_loader, "MAX_SHAPES", 1)
    with pytest.raises(DocumentError, match="more than 1 shapes"):
        PowerPointLoader(docs_dir / "fake-power-point.pptx").load()


# -- messages ------------------------------------------------------------------------------------------


def test_a_library_message_over_several_lines_becomes_one_line(tmp_path: Path) -> None:
    """openpyxl's 'could not read manifest' error spans three lines; it was quoted as is."""
    path = tmp_path / "broken.xlsx"
    members = read_members(seed("stanley-cups.xlsx"))
    path.write_bytes(build_zip([(name, content[1:] if name == "[Content_Types].xml" else content)
                                for name, content in members]))
    for load in (lambda: ExcelLoader(path).load(), lambda: LoaderMng.with_defaults().load_and_split(path)):
        with pytest.raises(DocumentError, match=r"cannot load .*broken\.xlsx.* with ExcelLoader") as info:
            load()
        check_message(info.value)


# -- zip structure -------------------------------------------------------------------------------------


def _local(name: bytes, data: bytes, crc: int, size: int) -> bytes:
    return struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), size, len(name), 0) + name


def _central(name: bytes, data: bytes, crc: int, size: int, offset: int) -> bytes:
    return struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data), size,
                       len(name), 0, 0, 0, 0, 0, offset) + name


def _end(count: int, directory: bytes, offset: int) -> bytes:
    return struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(directory), offset, 0)


def test_entries_sharing_one_stream_are_refused(tmp_path: Path) -> None:
    """Many directory entries pointing at one deflate stream: each would inflate it again."""
    content = b"<x/>" * 1000
    data = zlib.compress(content)[2:-4]
    crc = zlib.crc32(content)
    names = [b"[Content_Types].xml", b"word/document.xml", b"_rels/.rels"]
    head = _local(names[0], data, crc, len(content)) + data
    directory = b"".join(_central(name, data, crc, len(content), 0) for name in names)
    path = tmp_path / "overlap.docx"
    path.write_bytes(head + directory + _end(len(names), directory, len(head)))
    with pytest.raises(DocumentError, match=r"zip bomb: entry .* overlaps the next entry") as info:
        DocxLoader(path).load()
    check_message(info.value)


def test_a_directory_larger_than_the_entry_limit_allows_is_refused_before_parsing(tmp_path: Path) -> None:
    """zipfile builds an object per directory entry, whatever the count the end record gives."""
    content = b"<x/>"
    data = zlib.compress(content)[2:-4]
    head = _local(b"a.xml", data, zlib.crc32(content), len(content)) + data
    directory = _central(b"a.xml", data, zlib.crc32(content), len(content), 0) * 200_000
    path = tmp_path / "directory.xlsx"
    path.write_bytes(head + directory + _end(3, directory, len(head)))  # the record claims 3 entries
    with pytest.raises(DocumentError, match=r"zip bomb: 3 entries in a directory of \d+ bytes"):
        ExcelLoader(path).load()


def test_more_xml_than_a_tree_can_hold_is_refused(monkeypatch: pytest.MonkeyPatch, docs_dir: Path) -> None:
    monkeypatch.setattr(base, "MAX_XML_PARSED", 12_000)  # stanley-cups: 14,003 bytes, 3,625 in worksheets
    with pytest.raises(DocumentError, match=r"holds 817894 bytes of XML to parse, more than the limit of 12000"):
        DocxLoader(docs_dir / "fake.docx").load()
    rows = ExcelLoader(docs_dir / "stanley-cups.xlsx").load()  # worksheets are streamed: not counted
    assert len(rows) == 6


# -- Excel sheets out of proportion -------------------------------------------------------------------


def _sheet_with(tmp_path: Path, replace: tuple[bytes, bytes]) -> Path:
    book = openpyxl.Workbook()
    book.active.append(["h1", "h2"])
    book.active.append(["a", "b"])
    buffer = io.BytesIO()
    book.save(buffer)
    members = read_members(buffer.getvalue())
    path = tmp_path / "sheet.xlsx"
    path.write_bytes(build_zip([(name, content.replace(*replace) if name == "xl/worksheets/sheet1.xml" else content)
                                for name, content in members]))
    return path


def test_a_sheet_row_of_too_many_cells_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert ExcelLoader(_sheet_with(tmp_path, (b"</row>", b"<c/>" * 1001 + b"</row>"))).load() == []
    assert "sheet.xlsx': row element 1 holds more than 1000 cells" in caplog.text


@pytest.mark.parametrize(("replace", "problem"), [
    ((b"</row>", b"<c/>" * 50_001 + b"</row>"), "has a row of more than 50000 XML elements"),
    ((b"</sheetData>", b"</sheetData><hyperlinks>" + b'<hyperlink ref="A1"/>' * 10 + b"</hyperlinks>"),
     "has more than 5 XML elements outside its rows"),
    ((b"</sheetData>", b"<row/>" * 11 + b"</sheetData>"), "has more than 10 rows"),
], ids=["wide-row", "outside-rows", "rows"])
def test_a_worksheet_out_of_proportion_is_refused_before_openpyxl_opens_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, replace: tuple[bytes, bytes], problem: str) -> None:
    """openpyxl holds a whole row, the rows it read looking for the sheet's size, and everything
    outside the rows as objects: a row of 10 million cells took 60 s and 940 MiB to open."""
    monkeypatch.setattr(excel_loader, "MAX_OTHER_ELEMENTS", 5 if b"hyperlink" in replace[1] else 200_000)
    monkeypatch.setattr(excel_loader, "MAX_XML_ROWS", 10 if b"<row/>" in replace[1] else 100_000)
    with pytest.raises(DocumentError, match=r"out of proportion to be read: its worksheet "
                                            r"'xl/worksheets/sheet1\.xml' " + problem) as info:
        ExcelLoader(_sheet_with(tmp_path, replace)).load()
    check_message(info.value)


# -- text formats ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "![" * 100_000,            # each "![" rescanned the line for "]": 44 s for 40,000 of them
    "![a](" * 40_000,          # each target rescanned: 126 s for 20,000
    "`" * 100_000,             # a backtick run retried at every length: 18 s for 40,000
    "```" + "`" * 100_000,     # a fence opener without a line break
    "![![" * 20_000 + "a](" + "x" * 50_000,
], ids=["image-openers", "image-targets", "backticks", "fence-without-newline", "shared-target"])
def test_markdown_scan_is_linear_on_pathological_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "slow.md"
    path.write_text(text, encoding="utf-8")
    [doc] = MarkdownLoader(path).load()
    assert doc.page_content == text  # no image: nothing replaced


def test_html_nested_5000_deep_is_read(tmp_path: Path) -> None:
    """The tree walk was recursive: RecursionError from about 1000 levels (100,000: hostile cases)."""
    path = tmp_path / "deep.html"
    path.write_text("<html><body>" + "<div><span>x" * 5_000, encoding="utf-8")
    [doc] = HtmlLoader(path).load()
    assert doc.page_content.count("x") == 5_000


# -- JSON repair ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' * 50_000, "[" * 150 + "x"])
def test_json_nested_too_deep_is_a_value_error(text: str) -> None:
    """json.loads and the tolerant reader both recursed: RecursionError escaped graph extraction."""
    with pytest.raises(ValueError, match="nested deeper than 100 levels"):
        loads_tolerant(text)


def test_json_scalar_is_not_an_object_or_list() -> None:
    """loads_tolerant('0') returned 0, though it promises an object or a list."""
    with pytest.raises(ValueError, match="no JSON object or list"):
        loads_tolerant("0")
    assert loads_tolerant('0 then {"a": 1}') == {"a": 1}


def test_json_integer_of_5000_digits_is_kept_as_written() -> None:
    """Python refuses to convert integers of more than 4300 digits: ValueError from a number."""
    assert loads_tolerant("{'n': " + "9" * 5000 + ", 'm': 1}") == {"n": "9" * 5000, "m": 1}


def test_json_string_full_of_quotes_is_read() -> None:
    """Each quote inside a string copied the rest of the text: quadratic time."""
    inner = 'say "hi" ' * 20_000
    assert loads_tolerant('{"a": "' + inner + '"}') == {"a": inner}
