"""PdfLoader on real PDFs: text per page, reading order, encryption, damaged files."""

import re
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from mx_rag.document.loader import PdfLoader
from mx_rag.document.loader import base_loader as base
from mx_rag.errors import DocumentError, ParameterError
from mx_rag.utils.common import Lang


def test_one_document_per_page_in_reading_order(docs: Path) -> None:
    pages = PdfLoader(docs / "layout-parser-paper-fast.pdf").load()
    assert [d.metadata for d in pages] == [
        {"source": str(docs / "layout-parser-paper-fast.pdf"), "type": "text", "page": 1},
        {"source": str(docs / "layout-parser-paper-fast.pdf"), "type": "text", "page": 2},
    ]
    first = pages[0].page_content
    assert first.startswith("LayoutParser: A Unified Toolkit for Deep")  # ligature "ﬁ" spelled out
    assert first.index("Abstract") < first.index("Introduction")
    assert "\x00" not in first
    assert "ﬁ" not in first


def test_korean_text(docs: Path) -> None:
    [page] = PdfLoader(docs / "korean-text-with-tables.pdf").load()
    assert "적립 제외 대상" in page.page_content
    assert page.metadata["page"] == 1
    assert not any(line != line.rstrip() for line in page.page_content.splitlines())


def test_chinese_text_has_no_spaces_between_characters(docs: Path) -> None:
    # a page of the Chinese Debian Reference whose justified lines pypdf reads as "对 于 一 个"
    [doc] = PdfLoader(docs / "debian-reference-zh-cn-p81.pdf").load()
    text = doc.page_content
    assert "对于一个支持多架构的软件包，你可能需要为一些命令指定架构名称。例如，使用" in text
    assert "已经安装 debsums 软件包的，能使用debsums(1)" in text
    assert re.search(r"[\u4e00-\u9fff] +[\u4e00-\u9fff]", text) is None
    assert "dpkg -L" in text and "apt-get build-dep" in text  # spaces between Latin words stay
    assert "2.4.1 命令行中的高级软件包管理操作" in text  # and between a number and Chinese


def test_copy_protected_pdf_opens_with_the_empty_password(docs: Path) -> None:
    pages = PdfLoader(docs / "copy-protected.pdf").load()
    assert [d.metadata["page"] for d in pages] == [1, 2]
    assert "LayoutParser" in pages[0].page_content


def test_password_protected_pdf_is_refused(docs: Path) -> None:
    with pytest.raises(DocumentError, match="encrypted"):
        PdfLoader(docs / "password.pdf").load()


def test_bad_colour_space_pdf_still_gives_its_text(docs: Path) -> None:
    [page] = PdfLoader(docs / "pdf-bad-color-space.pdf").load()
    assert "2023 Environmental Report" in page.page_content


@pytest.mark.parametrize(
    "content",
    [b"", b"%PDF-1.4\nthis is not a pdf body", b"hello, I am a text file"],
    ids=["empty", "garbage-body", "text"],
)
def test_malformed_pdf_raises_document_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.pdf"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=r"bad\.pdf"):
        PdfLoader(path).load()


def test_truncated_pdf_raises_document_error_with_the_cause(tmp_path: Path, docs: Path) -> None:
    data = (docs / "layout-parser-paper-fast.pdf").read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(DocumentError, match=r"cut\.pdf.*malformed or damaged") as info:
        PdfLoader(path).load()
    assert info.value.__cause__ is not None


def test_page_limit(monkeypatch: pytest.MonkeyPatch, docs: Path) -> None:
    monkeypatch.setattr(base, "MAX_PAGE_NUM", 1)
    with pytest.raises(DocumentError, match="2 pages, more than the limit of 1"):
        PdfLoader(docs / "layout-parser-paper-fast.pdf").load()


@pytest.mark.parametrize("kwargs", [{"lang": "ch"}, {"enable_ocr": 1}, {"vlm": "http://vlm"}])
def test_bad_arguments(docs: Path, kwargs: dict) -> None:
    with pytest.raises(ParameterError):
        PdfLoader(docs / "layout-parser-paper-fast.pdf", **kwargs)


def test_lang_en_is_accepted(docs: Path) -> None:
    assert PdfLoader(docs / "password.pdf", lang=Lang.EN).lang is Lang.EN


def test_upper_case_suffix(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "PAPER.PDF"
    shutil.copy(docs / "layout-parser-paper-fast.pdf", path)
    assert len(PdfLoader(path).load()) == 2


def _encrypted_copy(source: Path, target: Path, user_password: str, algorithm: str) -> Path:
    reader = PdfReader(source)
    writer = PdfWriter()
    for page in reader.pages:
        writer.add_page(page)
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm=algorithm)
    with target.open("wb") as handle:
        writer.write(handle)
    return target


@pytest.mark.parametrize("algorithm", ["RC4-128", "AES-128", "AES-256"])
def test_encryption_algorithms(tmp_path: Path, docs: Path, algorithm: str) -> None:
    source = docs / "layout-parser-paper-fast.pdf"
    locked = _encrypted_copy(source, tmp_path / "locked.pdf", "user-secret", algorithm)
    with pytest.raises(DocumentError, match="encrypted"):
        PdfLoader(locked).load()
    owner_only = _encrypted_copy(source, tmp_path / "owner.pdf", "", algorithm)
    assert [d.page_content for d in PdfLoader(owner_only).load()] == [d.page_content for d in PdfLoader(source).load()]
