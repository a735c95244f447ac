"""OCR of scans: pages rendered at test time from the text below with Debian's fonts, read back
by the real engine (RapidOCR's packaged PP-OCR models). The engine loads once per process."""

import io
from pathlib import Path

import pytest
from PIL import Image

from mx_rag.document.loader import ImageLoader, PdfLoader, PowerPointLoader, _ocr
from mx_rag.document.loader._layout import drop_running_lines
from mx_rag.errors import DocumentError, ExtraNotInstalledError, OcrUnavailableError
from mx_rag.testing.scans import Columns, Table, cer, find_font, render_page, save_image_pdf

pytestmark = [
    pytest.mark.skipif(not _ocr.ocr_available(), reason='the OCR engine is not installed: pip install "mxrag[ocr]"'),
    pytest.mark.skipif(find_font(cjk=True) is None, reason="no CJK font: run scripts/ensure_fonts.sh (as root)"),
]

EN = [
    "Quarterly report of the Northwind harbour authority. Cargo volume rose to 41,250 containers in March, "
    "up 7 percent from February, while tanker calls fell to 18.",
    "The new crane on pier four lifts 65 tonnes; it was delivered by Kestrel Engineering on 12 January "
    "and certified by the port surveyor two weeks later.",
]
ZH = [
    "北风港务局第一季度报告。三月份集装箱吞吐量达到四万一千二百五十箱，比二月份增长百分之七，油轮靠港十八艘。",
    "四号码头的新起重机可以吊起六十五吨货物，由红隼工程公司于一月十二日交付，两周后通过港口检验员的认证。",
]
LEFT = ["The orchard cooperative in the upper valley picked apples and pears from late August until the first frost."]
RIGHT = ["River barges carried the fruit downstream to the market at Ellsworth every Thursday morning."]
TABLE = [["Item", "Quantity", "Price"], ["Copper wire", "120", "3.40"], ["Steel bolts", "5000", "0.12"],
         ["Oak planks", "36", "18.75"]]


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> list:
    """An image-only PDF: English upright, Chinese turned 90 degrees, two columns upside down,
    a table turned 270 degrees; loaded once."""
    pages = [
        render_page(EN, dpi=200),
        render_page(ZH, dpi=200).rotate(90, expand=True),
        render_page(["Fruit trade notes", Columns(LEFT, RIGHT)], dpi=200).rotate(180, expand=True),
        render_page(["Table 3: parts ordered in May", Table(TABLE)], dpi=200).rotate(270, expand=True),
    ]
    path = save_image_pdf(pages, tmp_path_factory.mktemp("scan") / "scan.pdf")
    return PdfLoader(path).load()


def test_scanned_pdf_pages_are_read_with_their_page_numbers(scan: list) -> None:
    assert [d.metadata["page"] for d in scan] == [1, 2, 3, 4]
    assert all(d.metadata["ocr"] is True and d.metadata["type"] == "text" for d in scan)
    assert [d.metadata["rotation"] for d in scan] == [0, 270, 180, 90]


def test_character_error_rate_english_and_chinese(scan: list) -> None:
    assert cer("\n".join(EN), scan[0].page_content) <= 0.02, scan[0].page_content
    assert cer("\n".join(ZH), scan[1].page_content) <= 0.04, scan[1].page_content


def test_two_columns_are_read_left_then_right(scan: list) -> None:
    text = scan[2].page_content
    assert cer("Fruit trade notes" + LEFT[0] + RIGHT[0], text) <= 0.02, text
    assert text.index("Fruit trade") < text.index("orchard") < text.index("frost") < text.index("River barges")


def test_table_cells_stay_in_their_rows(scan: list) -> None:
    text = scan[3].page_content
    assert text.startswith("Table 3: parts ordered in May\n| Item | Quantity | Price |\n| --- | --- | --- |\n"), text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == ["| " + " | ".join(row) + " |" for row in TABLE]


@pytest.mark.parametrize(("fmt", "dpi", "suffix"), [("PNG", 300, ".png"), ("JPEG", 150, ".jpg")])
def test_image_loader_reads_text_without_a_vision_model(tmp_path: Path, fmt: str, dpi: int, suffix: str) -> None:
    image = render_page(ZH[:1] if fmt == "JPEG" else EN[:1], dpi=dpi)
    image = image.crop((0, 0, image.width, image.height // 4))  # the text block: a photographed label
    path = tmp_path / f"label{suffix}"
    image.save(path, fmt)
    doc = ImageLoader(path, enable_ocr=True).load()[0]
    assert doc.metadata["type"] == "text" and doc.metadata["ocr"] is True
    assert cer(ZH[0] if fmt == "JPEG" else EN[0], doc.page_content) <= (0.04 if fmt == "JPEG" else 0.02)


def test_powerpoint_pictures_are_read_when_enabled(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    image = render_page(EN[1:], dpi=200)
    buffer = io.BytesIO()
    image.crop((0, 0, image.width, image.height // 5)).save(buffer, "PNG")
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Crane delivery"
    slide.shapes.add_picture(io.BytesIO(buffer.getvalue()), Inches(0.5), Inches(2), width=Inches(9))
    deck.save(tmp_path / "deck.pptx")
    plain = PowerPointLoader(tmp_path / "deck.pptx").load()
    assert [d.page_content for d in plain] == ["Crane delivery"]
    read = PowerPointLoader(tmp_path / "deck.pptx", enable_ocr=True).load()
    assert read[1].metadata == {"source": str(tmp_path / "deck.pptx"), "type": "text", "page": 1, "ocr": True,
                                "image": True}
    assert cer(EN[1], read[1].page_content) <= 0.02


def test_word_pictures_are_read_when_enabled(tmp_path: Path) -> None:
    import docx
    from docx.shared import Inches

    from mx_rag.document.loader import DocxLoader

    image = render_page(ZH[1:], dpi=200)
    buffer = io.BytesIO()
    image.crop((0, 0, image.width, image.height // 5)).save(buffer, "PNG")
    document = docx.Document()
    document.add_paragraph("起重机交付记录")
    document.add_picture(io.BytesIO(buffer.getvalue()), width=Inches(6))
    document.save(tmp_path / "note.docx")
    assert len(DocxLoader(tmp_path / "note.docx").load()) == 1
    text, picture = DocxLoader(tmp_path / "note.docx", enable_ocr=True).load()
    assert text.page_content == "起重机交付记录" and picture.metadata["ocr"] is True
    assert cer(ZH[1], picture.page_content) <= 0.04, picture.page_content


def test_without_the_engine_a_scan_is_refused_with_the_install_hint(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = save_image_pdf([render_page(["A page with words on it only as pixels."], dpi=100)], tmp_path / "s.pdf")
    monkeypatch.setattr(_ocr, "_MODULES", ("mxrag_module_that_is_not_installed",))
    with pytest.raises(OcrUnavailableError, match=r'no text layer on any of its 1 pages.*pip install "mxrag\[ocr\]"'):
        PdfLoader(path).load()
    with pytest.raises(ExtraNotInstalledError, match=r"mxrag\[ocr\]"):
        PdfLoader(path, enable_ocr=True)


def test_bad_images_give_clear_errors(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 200)
    with pytest.raises(DocumentError, match="not a valid image"):
        ImageLoader(corrupt, enable_ocr=True).load()
    blank = tmp_path / "blank.png"
    Image.new("L", (600, 400), 255).save(blank)
    with pytest.raises(DocumentError, match="no text that OCR can read"):
        ImageLoader(blank, enable_ocr=True).load()


def test_huge_page_is_rendered_within_bounds(tmp_path: Path) -> None:
    """A page declared 200 x 200 inches (14,400 pt) renders at no more than MAX_SIDE pixels."""
    import pypdfium2

    document = pypdfium2.PdfDocument.new()
    document.new_page(14_400, 14_400)
    buffer = io.BytesIO()
    document.save(buffer)
    images = list(_ocr.render_pdf(buffer.getvalue(), [1], source="huge.pdf"))
    assert images[0][1].size == (_ocr.MAX_SIDE, _ocr.MAX_SIDE)


def test_running_headers_and_page_numbers_are_dropped() -> None:
    pages = [f"Northwind Annual Report 2026\nBody text {word}.\nPage {n} of 3"
             for n, word in enumerate(["alpha", "beta", "gamma"], start=1)]
    kept, labels = drop_running_lines(pages)
    assert kept == ["Body text alpha.", "Body text beta.", "Body text gamma."]
    assert labels == ["1", "2", "3"]


def test_a_real_table_image_keeps_its_rows(docs: Path) -> None:
    """A real image (Unstructured's example docs, Apache-2.0; see tests/data/docs/NOTICE), its
    reading checked by hand once: every data row comes out as a table row with its cells in order
    (the header's cells spread over two lines are read as text lines above the table)."""
    doc = ImageLoader(docs / "table-multi-row-column-cells.png", enable_ocr=True).load()[0]
    rows = [line for line in doc.page_content.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[:4] for row in rows] == [
        ["| Blind", "5", "1", "4"], ["| Low Vision", "5", "2", "3"], ["| Dexterity", "5", "4", "1"],
        ["| Mobility", "3", "3", "0"],
    ]
    assert "34.5%, n=1" in rows[0] and "1672.1 sec" in rows[2] and "(97.7%, n=3)" in doc.page_content
