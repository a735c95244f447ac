"""Bad input refused the same way by every loader: paths, sizes, suffixes, zip bombs."""

import io
import shutil
import zipfile
from pathlib import Path

import docx
import pytest

from mx_rag.document.loader import (
    BaseLoader,
    DocxLoader,
    ExcelLoader,
    HtmlLoader,
    ImageLoader,
    MarkdownLoader,
    PdfLoader,
    PowerPointLoader,
    TextLoader,
)
from mx_rag.document.loader import base_loader as base
from mx_rag.errors import DocumentError, ParameterError

LOADERS = [
    (PdfLoader, "layout-parser-paper-fast.pdf"),
    (DocxLoader, "fake.docx"),
    (PowerPointLoader, "fake-power-point.pptx"),
    (ExcelLoader, "stanley-cups.xlsx"),
    (MarkdownLoader, "codeblock.md"),
    (TextLoader, "norwich-city.txt"),
    (HtmlLoader, "fake-html.html"),
    (ImageLoader, "example.jpg"),
]
IDS = [cls.__name__ for cls, _ in LOADERS]


@pytest.mark.parametrize(("cls", "name"), LOADERS, ids=IDS)
def test_every_loader_is_a_langchain_loader_with_source_and_type(docs: Path, cls: type, name: str) -> None:
    loader = cls(docs / name)
    assert isinstance(loader, BaseLoader)
    result = list(loader.lazy_load())
    assert result
    for doc in result:
        assert doc.metadata["source"] == str(docs / name)
        assert doc.metadata["type"] in ("text", "image")


@pytest.mark.parametrize(("cls", "name"), LOADERS, ids=IDS)
def test_symlink_is_resolved_to_its_target(tmp_path: Path, docs: Path, cls: type, name: str) -> None:
    link = tmp_path / f"link{Path(name).suffix}"
    link.symlink_to(docs / name)
    assert cls(link).load()[0].metadata["source"] == str(docs / name)


@pytest.mark.parametrize(("cls", "name"), LOADERS, ids=IDS)
def test_dot_dot_path_is_refused(docs: Path, cls: type, name: str) -> None:
    with pytest.raises(ParameterError, match=r"'\.\.' components"):
        cls(f"{docs}/../docs/{name}")


@pytest.mark.parametrize(("cls", "name"), LOADERS, ids=IDS)
def test_missing_file_and_directory_are_refused(tmp_path: Path, cls: type, name: str) -> None:
    with pytest.raises(ParameterError, match="an existing regular file"):
        cls(tmp_path / name)
    (tmp_path / "dir").mkdir()
    with pytest.raises(ParameterError, match="an existing regular file"):
        cls(tmp_path / "dir")


@pytest.mark.parametrize(("cls", "name"), LOADERS, ids=IDS)
def test_oversize_file_is_refused(monkeypatch: pytest.MonkeyPatch, docs: Path, cls: type, name: str) -> None:
    monkeypatch.setattr(cls, "MAX_SIZE", 100)
    with pytest.raises(ParameterError, match="more than the limit of 100 bytes"):
        cls(docs / name)


@pytest.mark.parametrize(("cls", "name"), LOADERS, ids=IDS)
def test_file_that_grew_after_construction_is_refused(monkeypatch: pytest.MonkeyPatch, docs: Path,
                                                      cls: type, name: str) -> None:
    loader = cls(docs / name)
    monkeypatch.setattr(cls, "MAX_SIZE", 100)
    with pytest.raises(DocumentError, match="larger than the limit of 100 bytes"):
        loader.load()


@pytest.mark.parametrize("path", [None, 42, "", "a\0b.pdf", "x" * 1025])
def test_bad_path_values(path: object) -> None:
    with pytest.raises(ParameterError, match="file_path"):
        PdfLoader(path)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "name"),
    [(PdfLoader, "fake.docx"), (DocxLoader, "layout-parser-paper-fast.pdf"), (PowerPointLoader, "fake.docx"),
     (ExcelLoader, "fake.docx"), (MarkdownLoader, "norwich-city.txt"), (HtmlLoader, "codeblock.md")],
)
def test_wrong_suffix_is_refused(docs: Path, cls: type, name: str) -> None:
    with pytest.raises(ParameterError, match=f"must be a file ending with one of .*for {cls.__name__}"):
        cls(docs / name)


def test_text_loader_accepts_any_suffix(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("started\n")
    assert TextLoader(path).load()[0].page_content == "started"


# -- zip bombs and broken Office files -------------------------------------------------------

OFFICE = [(DocxLoader, ".docx"), (PowerPointLoader, ".pptx"), (ExcelLoader, ".xlsx")]
OFFICE_IDS = [cls.__name__ for cls, _ in OFFICE]


def _real_docx() -> bytes:
    document = docx.Document()
    document.add_paragraph("hello")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _with_extra_entries(data: bytes, entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.mark.parametrize(("cls", "suffix"), OFFICE, ids=OFFICE_IDS)
def test_zip_with_too_many_entries(tmp_path: Path, cls: type, suffix: str) -> None:
    path = tmp_path / f"many{suffix}"
    path.write_bytes(_with_extra_entries(_real_docx(), {f"pad/{i}.xml": b"" for i in range(5120)}))
    with pytest.raises(DocumentError, match=r"zip bomb: 51\d\d entries"):
        cls(path).load()


@pytest.mark.parametrize(("cls", "suffix"), OFFICE, ids=OFFICE_IDS)
def test_zip_entry_with_absurd_compression_ratio(tmp_path: Path, cls: type, suffix: str) -> None:
    path = tmp_path / f"bomb{suffix}"
    path.write_bytes(_with_extra_entries(_real_docx(), {"word/media/pad.bin": bytes(20 * 1024 * 1024)}))
    assert path.stat().st_size < 200_000
    with pytest.raises(DocumentError, match=r"zip bomb: entry 'word/media/pad.bin' expands \d+ times"):
        cls(path).load()


def test_zip_total_uncompressed_limit(monkeypatch: pytest.MonkeyPatch, docs: Path) -> None:
    monkeypatch.setattr(base, "MAX_ZIP_UNCOMPRESSED", 10_000)
    with pytest.raises(DocumentError, match=r"zip bomb: \d+ bytes uncompressed \(limit 10000\)"):
        DocxLoader(docs / "fake.docx").load()


def test_small_real_docx_passes_the_bomb_check() -> None:
    base.check_zip(_real_docx(), "ok.docx", ".docx")


@pytest.mark.parametrize(("cls", "suffix"), OFFICE, ids=OFFICE_IDS)
@pytest.mark.parametrize("content", [b"", b"plain text, not a zip", b"PK\x03\x04broken"], ids=["empty", "text", "pk"])
def test_not_a_zip(tmp_path: Path, cls: type, suffix: str, content: bytes) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=f"not a valid \\{suffix} file"):
        cls(path).load()


@pytest.mark.parametrize(("cls", "suffix"), OFFICE, ids=OFFICE_IDS)
def test_encrypted_office_file(tmp_path: Path, docs: Path, cls: type, suffix: str) -> None:
    path = tmp_path / f"locked{suffix}"
    shutil.copy(docs / "password_protected.xlsx", path)  # an encrypted OOXML package is an OLE file
    with pytest.raises(DocumentError, match=f"encrypted or not a \\{suffix} file"):
        cls(path).load()


def test_file_removed_after_construction_is_a_document_error(tmp_path: Path) -> None:
    path = tmp_path / "gone.txt"
    path.write_text("soon gone")
    loader = TextLoader(path)
    path.unlink()
    with pytest.raises(DocumentError, match=r"gone\.txt.*FileNotFoundError") as info:
        loader.load()
    assert isinstance(info.value.__cause__, FileNotFoundError)
