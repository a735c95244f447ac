"""Ruled tables of PDFs with a text layer come out as Markdown tables; the rest of the text is pypdf's.

Files: tables-generated.pdf (our own HTML printed by Chromium: a bordered table with a wrapped
cell, a Chinese three-rule table, two columns of prose between three rules), a data paper's
numeric table, the Korean two-column brochure, and three pages of the Chinese Debian Reference
(two tables stacked with a caption between, a table with a note box above, three note boxes).
"""

from pathlib import Path

import pypdfium2
import pytest
from doc_helpers import DOCS

from mx_rag.document.loader import PdfLoader
from mx_rag.document.loader import pdf_loader as pdf_module
from mx_rag.document.loader._layout import markdown_table, read_markdown_tables
from mx_rag.document.loader._pdf_tables import Table, page_tables
from mx_rag.document.loader.pdf_loader import splice_tables


@pytest.fixture(scope="module")
def plain() -> dict[str, list[str]]:
    """The control: each file's pages as PdfLoader reads them with table detection switched off."""
    patch = pytest.MonkeyPatch()
    patch.setattr(pdf_module, "page_tables", lambda page: [])
    try:
        return {name: [d.page_content for d in PdfLoader(DOCS / name).load()] for name in _ALL}
    finally:
        patch.undo()


@pytest.fixture(scope="module")
def loaded() -> dict[str, list[str]]:
    return {name: [d.page_content for d in PdfLoader(DOCS / name).load()] for name in _ALL}


_WITH_TABLES = ["tables-generated.pdf", "embedded-images-tables.pdf", "korean-text-with-tables.pdf",
                "debian-reference-zh-cn-tables.pdf"]
_WITHOUT = ["layout-parser-paper-fast.pdf", "debian-reference-zh-cn-p81.pdf", "embedded-images.pdf",
            "copy-protected.pdf", "pdf-bad-color-space.pdf"]
_ALL = _WITH_TABLES + _WITHOUT


def test_bordered_and_three_rule_tables(loaded: dict[str, list[str]]) -> None:
    [page] = loaded["tables-generated.pdf"]
    region, cities = read_markdown_tables(page)
    assert region == [
        ["Region", "Q1", "Q2", "Notes"],
        ["North", "120", "135", "Two new shops opened in the spring, one near the station and one by the harbour"],
        ["South", "98", "101", "Flat"],
        ["West", "77", "64", "The oven broke in May"],
    ]
    assert cities == [["城市", "分店数", "店长"], ["北京", "12", "王芳"], ["上海", "9", "李强"], ["广州", "7", "陈静"]]
    # in reading order, the caption above each table, the paragraph between them
    assert page.index("Table 1: Loaves sold by region\n| Region |") > page.index("Quarterly report")
    assert page.index("| West | 77 |") < page.index("Sales in the West fell") < page.index("| 城市 |")


def test_two_columns_of_prose_between_rules_stay_text(loaded: dict[str, list[str]],
                                                      plain: dict[str, list[str]]) -> None:
    [page], [control] = loaded["tables-generated.pdf"], plain["tables-generated.pdf"]
    tail = control[control.index("The first column of this part"):]
    assert page.endswith(tail)  # the prose below the tables, byte for byte as without tables
    assert "|" not in tail


def test_numeric_table_of_a_data_paper(loaded: dict[str, list[str]]) -> None:
    [page] = loaded["embedded-images-tables.pdf"]
    [table] = read_markdown_tables(page)
    assert table[0] == ["Inhibitor concentration (g)", "bc (V/dec)", "ba (V/dec)", "Ecorr (V)", "icorr (A/cm2 )",
                        "Polarization resistance (Ω)", "Corrosion rate (mm/year)"]
    assert [row[0] for row in table[1:]] == ["0", "2", "4", "6", "8", "10"]
    assert table[-1][1:3] == ["0.0382", "0.0086"] and table[-1][5:] == ["246.080", "0.0919"]
    assert table[1][3] == "\ufffd0.9393"  # a minus sign without a Unicode mapping is shown, not dropped
    assert page.index("Table 1\nPotentiodynamic polarization data") < page.index("| Inhibitor")


def test_two_column_brochure_gives_a_table_per_column_and_keeps_its_prose(
        loaded: dict[str, list[str]], plain: dict[str, list[str]]) -> None:
    [page], [control] = loaded["korean-text-with-tables.pdf"], plain["korean-text-with-tables.pdf"]
    left, right = read_markdown_tables(page)
    assert left == [["업종", "적립 대상"], ["할인점", "이마트, 이마트 트레이더스, 롯데마트, 홈플러스"],
                    ["주유", "모든 주유소"],
                    ["온라인쇼핑몰", "삼성카드 쇼핑, G마켓, 옥션, 11번가, 인터파크, 쿠팡, 티몬, 위메프"]]
    assert [row[0] for row in right] == ["업종", "커피전문점", "제과점", "편의점"]
    assert right[3] == ["편의점", "CU, GS25, 세븐일레븐, 미니스톱"]
    # every other line is pypdf's, in pypdf's order: only the tables' lines were replaced
    kept = [line for line in page.splitlines() if not line.startswith("|")]
    assert kept == [line for line in control.splitlines() if line in kept]
    assert len(control.splitlines()) - len(kept) == 11  # 5 + 6 lines of cells (wrapped ones too) became tables


def test_stacked_tables_note_boxes_and_a_table_below_a_note(loaded: dict[str, list[str]]) -> None:
    stacked, below_note, notes = loaded["debian-reference-zh-cn-tables.pdf"]
    first, second = read_markdown_tables(stacked)
    assert first[0] == ["软件包", "流行度", "大小", "说明"] and first[2] == ["sudo", "V:638, I:823", "5990",
                                                                       "给普通用户授予部分 root 权限的程序"]
    assert second[-1] == ["debian-faq I:850", "790", "Debian 常见问题"]
    assert "Table 1.1: 有趣的文本模式程序包列表\n您也可以考虑阅读一些其他的信息文档。\n| 软件包" in stacked
    [keys] = read_markdown_tables(below_note)
    assert keys[:3] == [["快捷键", "描述"], ["Ctrl-U", "删除光标前到行首的字符"], ["Ctrl-H", "删除光标前的一个字符"]]
    assert "提示" in below_note and not any("提示" in cell for row in keys for cell in row)
    assert read_markdown_tables(notes) == []


@pytest.mark.parametrize("name", _WITHOUT)
def test_pdfs_without_tables_read_as_before(name: str, loaded: dict[str, list[str]],
                                            plain: dict[str, list[str]]) -> None:
    assert loaded[name] == plain[name]


def test_table_is_left_as_text_when_its_lines_are_not_found() -> None:
    table = Table(0, 0, 1, 1, [[["Name", "Age"], ["Ann", "41"], ["Bob", "37"]]])
    text = "Intro\nName Age\nAnn 41\nBob 37\nOutro"
    assert splice_tables(text, [table]) == "Intro\n| Name | Age |\n| --- | --- |\n| Ann | 41 |\n| Bob | 37 |\nOutro"
    assert splice_tables("Intro\nsomething else\nOutro", [table]) == "Intro\nsomething else\nOutro"
    # a line of other text inside the run stops it: that line is never swallowed
    assert splice_tables("Name Age\nAnn 41\nA long sentence of other words\nBob 37", [table]).count("|") == 0


def test_markdown_tables_read_back_as_written() -> None:
    first, second = [["Name", "a|b"], ["Ann", "41"]], [["Key"], ["x"]]
    text = f"Intro\n{markdown_table(first)}\nbetween\n{markdown_table(second)}"
    assert read_markdown_tables(text) == [first, second]


def test_page_tables_on_a_page_without_rules(docs: Path) -> None:
    document = pypdfium2.PdfDocument(docs / "layout-parser-paper-fast.pdf")
    try:
        assert page_tables(document[0]) == []
    finally:
        document.close()


def test_a_pdf_table_is_one_chunk_with_its_caption() -> None:
    from mx_rag.document.doc_loader_mng import LoaderMng

    chunks = LoaderMng.with_defaults(chunk_size=300, chunk_overlap=0).load_and_split(DOCS / "tables-generated.pdf")
    tables = [chunk.page_content for chunk in chunks if chunk.metadata.get("table")]
    assert tables[0].startswith("Table 1: Loaves sold by region\n| Region | Q1 | Q2 | Notes |\n| --- |")
    assert tables[0].endswith("| West | 77 | 64 | The oven broke in May |")
    assert tables[1] == ("表  2 ：三座城市的分店\n| 城市 | 分店数 | 店长 |\n| --- | --- | --- |\n"  # caption: pypdf's
                         "| 北京 | 12 | 王芳 |\n| 上海 | 9 | 李强 |\n| 广州 | 7 | 陈静 |")
    assert all(chunk.metadata["page"] == 1 for chunk in chunks)


def test_ocr_layout_reads_aligned_columns_of_prose_down_not_as_a_table() -> None:
    """``page_text`` (the layout of OCRed lines), fed the generated page's lines: the two columns of
    prose that its page-wide gutter test misses (a one-column top half) are not a table."""
    from mx_rag.document.loader._layout import page_text
    from mx_rag.document.loader._pdf_tables import _pieces

    document = pypdfium2.PdfDocument(DOCS / "tables-generated.pdf")
    try:
        page = document[0]
        width, height = page.get_size()
        text = page_text([piece for piece, _ in _pieces(page, height)], width)
    finally:
        document.close()
    prose = text[text.index("The first column of this part"):]
    assert "|" not in prose
    lines = prose.splitlines()
    # within the rows the columns share, the left column's lines come first, then the right's
    assert lines.index("before the right one. Nothing here is a table,") < lines.index(
        "running text about the bakery. Flour prices")
    assert "| Region | Q1 | Q2 | Notes |" in text  # the bordered table is still one


def test_tables_read_in_parallel_threads_match(loaded: dict[str, list[str]]) -> None:
    """Ingestion parses files in threads; PDFium is not thread-safe, so the loader serializes it."""
    from concurrent.futures import ThreadPoolExecutor

    names = ["korean-text-with-tables.pdf", "embedded-images-tables.pdf", "tables-generated.pdf"] * 2
    with ThreadPoolExecutor(max_workers=4) as pool:
        pages = list(pool.map(lambda name: [d.page_content for d in PdfLoader(DOCS / name).load()], names))
    assert pages == [loaded[name] for name in names]
