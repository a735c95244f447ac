"""The hostile-input cases: each builds a file, names the call that reads it and the outcome
expected (run by ``hostile_runner.py``, checked by ``test_hostile_inputs.py``).

CI runs the slowest cases at a tenth of their size (bs4 takes ~0.1 ms a tag, pypdf ~50 us a page
entry); a long fuzz run (``MXRAG_FUZZ_EXAMPLES`` set) uses the full sizes.
"""

from __future__ import annotations

import base64
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostile_files as hf
from fuzz_helpers import seed

CAP_MIB = 1536
SCALE = 1 if os.environ.get("MXRAG_FUZZ_EXAMPLES") else 10
HTML_DEPTH = 100_000 // SCALE
TABLE_DEPTH = 20_000 // SCALE
MD_OPENERS = 1_000_000 // SCALE
MD_TARGETS = 200_000 // SCALE
PDF_PAGES = 100_000 // SCALE
SECRET = "mxrag-hostile-secret-5f0c"


@dataclass
class Case:
    kind: str            # "loader", "mng", "json_repair", "normalize_nested", "retrieval_body"
    suffix: str
    build: Callable[[Path], bytes]  # the file's bytes (given the directory, for the XXE target)
    loader: str = ""
    outcomes: tuple[str, ...] = ("refused",)
    match: str = ""      # in the message of a refusal
    extra: dict[str, Any] = field(default_factory=dict)


def _bomb_member(name: str, lying: bool = False) -> hf.Member:
    data = hf.deflate_zeros()
    return hf.Member(name, data, hf.CRC32_OF_2_GIB_OF_ZEROS, hf.GIB_2, declared=30_000 if lying else None)


def _overlapping(directory: Path) -> bytes:
    """500 directory entries for one 800 kB stream: 400 MB declared, each below the 1 MiB ratio check."""
    content = b"<w:p/>" * (800_000 // 6)
    member = hf.deflated("word/media/image0.xml", content)
    members = [member] + [hf.Member(f"word/media/image{i}.xml", member.data, member.crc, member.size, offset=0)
                          for i in range(1, 500)]
    real = [hf.deflated(name, data) for name, data in _seed_members("fake.docx")]
    return hf.raw_zip(real + members)


def _seed_members(name: str) -> list[tuple[str, bytes]]:
    return hf.read_members(seed(name))


def _many_entries(directory: Path) -> bytes:
    real = [hf.deflated(name, data) for name, data in _seed_members("fake.docx")]
    return hf.raw_zip(real + [hf.stored(f"pad/{i}", b"") for i in range(10_000)])


def _lying_directory(directory: Path) -> bytes:
    """300,000 directory entries behind an end record that claims 30."""
    real = [hf.deflated(name, data) for name, data in _seed_members("stanley-cups.xlsx")]
    return hf.raw_zip(real + [hf.stored(f"p{i}", b"") for i in range(300_000)], declared_count=30)


def _padded(xml: bytes) -> bytes:
    """``xml`` with a comment of random text after its root, so that it compresses only ~150 times
    (the per-entry ratio check lets it through)."""
    noise = base64.b64encode(random.Random(7).randbytes(len(xml) // 200))
    return xml + b"<!--" + noise + b"-->"


def _dense_docx(directory: Path) -> bytes:
    """30 MB of empty paragraphs (5 million elements; a tenth in CI): a tree of ~600 MB once parsed."""
    xml = hf.office_member("fake.docx", "word/document.xml")
    at = xml.index(b"<w:body>") + len(b"<w:body>")
    body = b"<w:p/>" * (5_000_000 // SCALE)
    return hf.office_with("fake.docx", {"word/document.xml": _padded(xml[:at] + body + xml[at:])})


def _wide_row_xlsx(directory: Path) -> bytes:
    """A worksheet row of 10 million cells (a tenth in CI): openpyxl holds the whole row."""
    xml = hf.office_member("stanley-cups.xlsx", "xl/worksheets/sheet1.xml")
    at = xml.index(b"</row>")
    return hf.office_with("stanley-cups.xlsx", {"xl/worksheets/sheet1.xml": _padded(
        xml[:at] + b"<c/>" * (10_000_000 // SCALE) + xml[at:])})


def _nested_docx(directory: Path) -> bytes:
    inner = hf.office_with("fake.docx", {"word/document.xml": _bomb_member("word/document.xml")})
    return hf.office_with("fake.docx", {}, extra=[hf.stored("word/embeddings/bomb.docx", inner)])


def _xml_attack(seed_name: str, member: str, doctype: bytes, reference: bytes,
                anchor: bytes) -> Callable[[Path], bytes]:
    def build(directory: Path) -> bytes:
        xml = hf.with_doctype(hf.office_member(seed_name, member), doctype, reference, anchor)
        return hf.office_with(seed_name, {member: xml})
    return build


def _secret_doctype(directory: Path) -> bytes:
    return hf.xxe(str(directory / "secret.txt"))


def _xxe_attack(seed_name: str, member: str, anchor: bytes) -> Callable[[Path], bytes]:
    def build(directory: Path) -> bytes:
        xml = hf.with_doctype(hf.office_member(seed_name, member), _secret_doctype(directory), b"&xxe;", anchor)
        return hf.office_with(seed_name, {member: xml})
    return build


def _deep_xml(seed_name: str, member: str, anchor: bytes, element: bytes, depth: int) -> Callable[[Path], bytes]:
    def build(directory: Path) -> bytes:
        xml = hf.office_member(seed_name, member)
        at = xml.index(anchor) + len(anchor)
        close = b"</" + element[1:]
        return hf.office_with(seed_name, {member: xml[:at] + element * depth + close * depth + xml[at:]})
    return build


def _html(text: str) -> Callable[[Path], bytes]:
    return lambda directory: text.encode()


def _text(text: str) -> Callable[[Path], bytes]:
    return lambda directory: text.encode()


def _html_xxe(directory: Path) -> bytes:
    return (b"<!DOCTYPE html " + _secret_doctype(directory)[10:-1] + b">" + hf.LAUGHS
            + b"<html><body><p>&xxe; &lol9;</p></body></html>")


def _pdf_flate_bomb(directory: Path) -> bytes:
    return hf.pdf_one_page(hf.stream(hf.zlib_zeros(), b"/Filter /FlateDecode"))


def _pdf_form_recursion(directory: Path) -> bytes:
    form = hf.stream(b"BT /F1 12 Tf (x) Tj ET /X0 Do",
                     b"/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /X0 6 0 R >> "
                     b"/Font << /F1 3 0 R >> >>")
    return hf.pdf_one_page(hf.stream(b"/X0 Do"), b"<< /XObject << /X0 6 0 R >> /Font << /F1 3 0 R >> >>", {6: form})


def _pdf_reference_chain(directory: Path) -> bytes:
    """/Contents is a chain of 50,000 indirect references, one object pointing at the next."""
    objects = {1: b"<< /Type /Catalog /Pages 2 0 R >>", 2: b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
               3: hf.FONT, 4: hf.PAGE_TEXT,
               5: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 10 0 R "
                  b"/Resources << /Font << /F1 3 0 R >> >> >>"}
    chain = 50_000
    for i in range(chain):
        objects[10 + i] = b"%d 0 R" % (11 + i) if i < chain - 1 else b"4 0 R"
    return hf.pdf(objects)


def _vlm_picture_bomb(directory: Path) -> bytes:
    rels = hf.office_member("contains-pictures.docx", "word/_rels/document.xml.rels")
    images = [name for name, _ in _seed_members("contains-pictures.docx") if name.startswith("word/media/")]
    assert images and rels
    return hf.office_with("contains-pictures.docx", {name: hf.png_header_only(100_000, 100_000) for name in images})


W_T = b"<w:t>"
CASES: dict[str, Case] = {
    # -- zip bombs ---------------------------------------------------------------------------------
    "docx: document.xml inflating to 2 GiB": Case("loader", ".docx", lambda d: hf.office_with(
        "fake.docx", {"word/document.xml": _bomb_member("word/document.xml")}), "DocxLoader",
        match=r"zip bomb: \d+ bytes uncompressed"),
    "xlsx: a worksheet inflating to 2 GiB": Case("loader", ".xlsx", lambda d: hf.office_with(
        "stanley-cups.xlsx", {"xl/worksheets/sheet1.xml": _bomb_member("xl/worksheets/sheet1.xml")}), "ExcelLoader",
        match=r"zip bomb: \d+ bytes uncompressed"),
    "pptx: a slide inflating to 2 GiB": Case("loader", ".pptx", lambda d: hf.office_with(
        "fake-power-point.pptx", {"ppt/slides/slide1.xml": _bomb_member("ppt/slides/slide1.xml")}),
        "PowerPointLoader", match=r"zip bomb: \d+ bytes uncompressed"),
    "docx: 2 GiB stream declared as 30 kB": Case("loader", ".docx", lambda d: hf.office_with(
        "fake.docx", {"word/document.xml": _bomb_member("word/document.xml", lying=True)}), "DocxLoader",
        match=r"entry 'word/document.xml' does not inflate to its declared 30000 bytes"),
    "xlsx through LoaderMng: 2 GiB stream declared as 30 kB": Case("mng", ".xlsx", lambda d: hf.office_with(
        "stanley-cups.xlsx", {"xl/worksheets/sheet1.xml": _bomb_member("xl/worksheets/sheet1.xml", lying=True)}),
        match=r"entry 'xl/worksheets/sheet1.xml' does not inflate to its declared 30000 bytes"),
    "docx: 500 overlapping entries sharing one stream": Case("loader", ".docx", _overlapping, "DocxLoader",
                                                              match="overlaps the next entry"),
    "docx: 10,000 entries": Case("loader", ".docx", _many_entries, "DocxLoader", match=r"zip bomb: 100\d\d entries"),
    "xlsx: 300,000 entries behind an end record claiming 30": Case("loader", ".xlsx", _lying_directory, "ExcelLoader",
                                                                   match=r"30 entries in a directory of \d+ bytes"),
    f"docx: {30 // SCALE} MB of empty paragraphs, under the ratio limit": Case(
        "loader", ".docx", _dense_docx, "DocxLoader", match="more than 200000 paragraphs and tables"),
    f"xlsx: a row of {10_000_000 // SCALE} cells, under the ratio limit": Case(
        "loader", ".xlsx", _wide_row_xlsx, "ExcelLoader", match="a row of more than 50000 XML elements"),
    "docx: a zip bomb nested in word/embeddings is never opened": Case("loader", ".docx", _nested_docx, "DocxLoader",
                                                                       outcomes=("documents",)),
    # -- XML entities ----------------------------------------------------------------------------
    "docx: billion laughs in document.xml": Case("loader", ".docx", _xml_attack(
        "fake.docx", "word/document.xml", hf.LAUGHS, b"&lol9;", W_T), "DocxLoader", outcomes=("documents", "refused"),
        extra={"max_chars": 10_000}),
    "docx: billion laughs in [Content_Types].xml": Case("loader", ".docx", _xml_attack(
        "fake.docx", "[Content_Types].xml", hf.LAUGHS, b"", b"?>"), "DocxLoader", outcomes=("documents", "refused")),
    "docx: external entity naming a local file": Case("loader", ".docx", _xxe_attack(
        "fake.docx", "word/document.xml", W_T), "DocxLoader", outcomes=("documents", "refused")),
    "pptx: billion laughs in a slide": Case("loader", ".pptx", _xml_attack(
        "fake-power-point.pptx", "ppt/slides/slide1.xml", hf.LAUGHS, b"&lol9;", b"<a:t>"), "PowerPointLoader",
        outcomes=("documents", "refused"), extra={"max_chars": 10_000}),
    "pptx: external entity naming a local file": Case("loader", ".pptx", _xxe_attack(
        "fake-power-point.pptx", "ppt/slides/slide1.xml", b"<a:t>"), "PowerPointLoader",
        outcomes=("documents", "refused")),
    "xlsx: billion laughs in sharedStrings.xml": Case("loader", ".xlsx", _xml_attack(
        "stanley-cups.xlsx", "xl/sharedStrings.xml", hf.LAUGHS, b"&lol9;", b"<t>"), "ExcelLoader",
        outcomes=("documents", "refused"), extra={"max_chars": 10_000}),
    "xlsx: billion laughs in a worksheet": Case("loader", ".xlsx", _xml_attack(
        "stanley-cups.xlsx", "xl/worksheets/sheet1.xml", hf.LAUGHS, b"", b"?>"), "ExcelLoader",
        outcomes=("documents", "refused")),
    "xlsx: external entity in workbook.xml": Case("loader", ".xlsx", _xxe_attack(
        "stanley-cups.xlsx", "xl/workbook.xml", b'name="'), "ExcelLoader", outcomes=("documents", "refused")),
    "html: billion laughs and an external entity": Case("loader", ".html", _html_xxe, "HtmlLoader",
                                                        outcomes=("documents",), extra={"max_chars": 10_000}),
    # -- deep nesting ------------------------------------------------------------------------------
    f"html: nested {HTML_DEPTH} deep": Case("loader", ".html", _html("<html><body>" + "<div>x" * HTML_DEPTH),
                                            "HtmlLoader", outcomes=("documents",)),
    f"html: tables nested {TABLE_DEPTH} deep": Case("loader", ".html", _html("<table><tr><td>y" * TABLE_DEPTH),
                                                    "HtmlLoader", outcomes=("documents",)),
    "docx: document.xml nested 100,000 deep": Case("loader", ".docx", _deep_xml(
        "fake.docx", "word/document.xml", b"<w:body>", b"<w:sdt>", 100_000), "DocxLoader",
        match=r"entry 'word/document.xml' expands \d+ times"),
    "docx: document.xml nested 5,000 deep": Case("loader", ".docx", _deep_xml(
        "fake.docx", "word/document.xml", b"<w:body>", b"<w:sdt>", 5_000), "DocxLoader",
        match="XMLSyntaxError: Excessive depth in document: 256"),
    "pptx: groups nested 250 deep": Case("loader", ".pptx", _deep_xml(
        "fake-power-point.pptx", "ppt/slides/slide1.xml", b"</p:grpSpPr>", b"<p:grpSp>", 250), "PowerPointLoader",
        outcomes=("documents", "refused")),
    "xlsx: sharedStrings nested 100,000 deep": Case("loader", ".xlsx", _deep_xml(
        "stanley-cups.xlsx", "xl/sharedStrings.xml", b"<si>", b"<r>", 100_000), "ExcelLoader",
        outcomes=("documents", "refused")),
    "xlsx: a worksheet nested 100,000 deep": Case("loader", ".xlsx", _deep_xml(
        "stanley-cups.xlsx", "xl/worksheets/sheet1.xml", b"<sheetData>", b"<x>", 100_000), "ExcelLoader",
        outcomes=("documents", "refused")),
    "json repair: [ nested 1,000,000 deep": Case("json_repair", ".txt", _text("[" * 1_000_000),
                                                 outcomes=("value_error",), match="nested deeper than"),
    'json repair: {"a": nested 200,000 deep': Case("json_repair", ".txt", _text('{"a": ' * 200_000),
                                                   outcomes=("value_error",), match="nested deeper than"),
    "retrieval API: a body nested 1,000,000 deep": Case("retrieval_body", ".json", _text("[" * 1_000_000),
                                                        outcomes=("refused",)),
    "retrieval API: a parsed value nested 100,000 deep": Case("normalize_nested", "", _text(""),
                                                              outcomes=("documents",), extra={"depth": 100_000}),
    f"markdown: {MD_OPENERS} image openers": Case("loader", ".md", _text("![" * MD_OPENERS), "MarkdownLoader",
                                                  outcomes=("documents",)),
    f"markdown: {MD_TARGETS} unclosed image targets": Case("loader", ".md", _text("![a](" * MD_TARGETS),
                                                           "MarkdownLoader", outcomes=("documents",)),
    "markdown: a run of 1,000,000 backticks": Case("loader", ".md", _text("`" * 1_000_000), "MarkdownLoader",
                                                   outcomes=("documents",)),
    # -- PDF ---------------------------------------------------------------------------------------
    "pdf: /Count claims a billion pages": Case("loader", ".pdf", lambda d: hf.pdf_pages(1, 10**9), "PdfLoader",
                                               outcomes=("documents",)),  # pypdf counts, it does not trust /Count
    f"pdf: {PDF_PAGES} real pages": Case("loader", ".pdf", lambda d: hf.pdf_pages(PDF_PAGES, PDF_PAGES), "PdfLoader",
                                         match="has more than 1000 pages"),
    f"pdf: /Count 1 over {PDF_PAGES} pages": Case("loader", ".pdf", lambda d: hf.pdf_pages(PDF_PAGES, 1),
                                                  "PdfLoader", match="has more than 1000 pages"),
    "pdf: 1,500 real pages": Case("loader", ".pdf", lambda d: hf.pdf_pages(1_500, 1_500), "PdfLoader",
                                  match="has 1500 pages, more than the limit of 1000"),
    "pdf: a page tree containing itself": Case("loader", ".pdf", lambda d: hf.pdf_pages(2, 3, loop=True),
                                               "PdfLoader", outcomes=("documents", "refused")),
    "pdf: a form XObject drawing itself": Case("loader", ".pdf", _pdf_form_recursion, "PdfLoader",
                                               outcomes=("documents", "refused")),
    "pdf: a chain of 50,000 indirect references": Case("loader", ".pdf", _pdf_reference_chain, "PdfLoader",
                                                       outcomes=("documents", "refused")),
    "pdf: a content stream inflating to 2 GiB": Case("loader", ".pdf", _pdf_flate_bomb, "PdfLoader",
                                                     outcomes=("documents", "refused")),
    # -- images ------------------------------------------------------------------------------------
    "png: 100,000 x 100,000 pixels (decompression bomb)": Case("loader", ".png", lambda d: hf.png_header_only(
        100_000, 100_000), "ImageLoader", match="not a valid image: DecompressionBombError"),
    "png: 9,000 x 9,000 pixels (under Pillow's limit, over ours)": Case("loader", ".png", lambda d: hf.png_header_only(
        9000, 9000), "ImageLoader", match=r"9000x9000 pixels, more than the limit"),
    "jpeg: 65,000 x 65,000 pixels": Case("loader", ".jpg", lambda d: hf.jpeg_header_only(65_000, 65_000),
                                         "ImageLoader", match="DecompressionBombError"),
    "docx with a VLM: pictures claiming 100,000 x 100,000 pixels": Case(
        "loader", ".docx", _vlm_picture_bomb, "DocxLoader", outcomes=("documents",), extra={"vlm": True}),
}


def build_cases(directory: Path) -> Path:
    """Write every case's file and the secret the XXE cases point at; return the cases' JSON file."""
    (directory / "secret.txt").write_text(SECRET, encoding="utf-8")
    cases = []
    for index, (name, case) in enumerate(CASES.items()):
        path = directory / f"case{index}{case.suffix}"
        path.write_bytes(case.build(directory))
        cases.append({"name": name, "kind": case.kind, "path": str(path), "loader": case.loader,
                      "forbidden": SECRET, **case.extra})
    listing = directory / "cases.json"
    listing.write_text(json.dumps(cases), encoding="utf-8")
    return listing
