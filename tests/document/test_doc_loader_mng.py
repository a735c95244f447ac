"""LoaderMng: registration rules, lookups, and load_and_split on real files."""

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_text_splitters import CharacterTextSplitter, RecursiveCharacterTextSplitter

from mx_rag.document import LoaderInfo, LoaderMng, SplitterInfo
from mx_rag.document import doc_loader_mng as mng_module
from mx_rag.document.loader import (
    DocxLoader,
    ExcelLoader,
    HtmlLoader,
    ImageLoader,
    MarkdownLoader,
    PdfLoader,
    PowerPointLoader,
    TextLoader,
)
from mx_rag.errors import DocumentError, ParameterError, UnsupportedFileTypeError
from mx_rag.llm import Img2TextLLM

with warnings.catch_warnings():  # langchain-community announces its sunset on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.document_loaders import TextLoader as CommunityTextLoader


class FailingLoader(BaseLoader):
    """A third-party loader that breaks while loading."""

    def __init__(self, file_path: str) -> None:
        self.file_path = file_path

    def lazy_load(self) -> Iterator[Document]:
        raise RuntimeError("parser crashed")


class WhitespaceLoader(BaseLoader):
    def __init__(self, file_path: str, parts: tuple[str, ...] = ()) -> None:
        self.parts = parts

    def lazy_load(self) -> Iterator[Document]:
        for part in self.parts:
            yield Document(page_content=part, metadata={"source": "w"})


# -- registration ----------------------------------------------------------------------------


def test_register_and_get_case_insensitively() -> None:
    mng = LoaderMng()
    mng.register_loader(PdfLoader, [".PDF"], {"lang": None})
    mng.register_splitter(RecursiveCharacterTextSplitter, [".pdf", ".Txt"], {"chunk_size": 100})
    assert mng.get_loader(".pdf") == LoaderInfo(PdfLoader, {"lang": None})
    assert mng.get_loader(".Pdf").loader_class is PdfLoader
    assert mng.get_splitter(".TXT") == SplitterInfo(RecursiveCharacterTextSplitter, {"chunk_size": 100})
    assert set(mng.loaders) == {".pdf"}
    assert set(mng.splitters) == {".pdf", ".txt"}


def test_params_are_copied() -> None:
    params = {"encoding": "utf-8"}
    mng = LoaderMng()
    mng.register_loader(TextLoader, [".txt"], params)
    params["encoding"] = "latin-1"
    assert mng.get_loader(".txt").loader_params == {"encoding": "utf-8"}
    assert LoaderMng().loaders == {}


def test_replacing_a_registration_warns(caplog: pytest.LogCaptureFixture) -> None:
    mng = LoaderMng()
    mng.register_loader(TextLoader, [".txt"])
    with caplog.at_level(logging.WARNING, logger="mx_rag.document.doc_loader_mng"):
        mng.register_loader(CommunityTextLoader, [".txt"])
    assert mng.get_loader(".txt").loader_class is CommunityTextLoader
    assert "loader for .txt is replaced" in caplog.text


@pytest.mark.parametrize(
    ("loader_class", "file_types", "params", "match"),
    [
        (object, [".x"], None, "loader_class must be a subclass of langchain_core"),
        (TextLoader(__file__), [".x"], None, "loader_class must be a subclass"),
        ("TextLoader", [".x"], None, "loader_class must be a subclass"),
        (TextLoader, ".txt", None, "file_types must be a list"),
        (TextLoader, [], None, "file_types must hold 1 to 32 suffixes, got 0"),
        (TextLoader, [f".s{i}" for i in range(33)], None, "file_types must hold 1 to 32 suffixes, got 33"),
        (TextLoader, ["txt"], None, 'starting with "."'),
        (TextLoader, ["." + "x" * 32], None, "1 to 32 characters"),
        (TextLoader, [""], None, "1 to 32 characters"),
        (TextLoader, [7], None, "file_types item"),
        (TextLoader, [".txt"], ["encoding"], "loader_params must be None or a dict"),
        (TextLoader, [".txt"], {1: "x"}, "loader_params key"),
        (TextLoader, [".txt"], {"file_path": "x"}, "must not contain 'file_path'"),
    ],
)
def test_register_loader_refuses_bad_arguments(loader_class: object, file_types: object, params: object,
                                               match: str) -> None:
    mng = LoaderMng()
    with pytest.raises(ParameterError, match=match):
        mng.register_loader(loader_class, file_types, params)  # type: ignore[arg-type]
    assert mng.loaders == {}


@pytest.mark.parametrize("suffix", [".jpg", ".JPEG", ".png"])
def test_images_get_no_splitter(suffix: str) -> None:
    with pytest.raises(ParameterError, match="image suffixes"):
        LoaderMng().register_splitter(RecursiveCharacterTextSplitter, [".txt", suffix])


def test_register_splitter_needs_a_text_splitter() -> None:
    with pytest.raises(ParameterError, match="splitter_class must be a subclass of langchain_text_splitters"):
        LoaderMng().register_splitter(TextLoader, [".txt"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"chunk_size": 40, "test": {"chunk_overlap": {"keep_separator": False}}},
         r"splitter_params\['test'\]\['chunk_overlap'\] must be a str, number, bool or None: parameters may nest "
         r"at most 2 levels .*, got \{'keep_separator': False\}"),
        ({"separators": [["\n"], " "]}, r"splitter_params\['separators'\]\[0\] must be a str, number, bool or None"),
        ({"separators": ["x"] * 1025}, r"splitter_params\['separators'\] may hold at most 1024 items, got 1025"),
    ],
    ids=["dict-in-dict-in-params", "list-in-list", "too-long-list"],
)
def test_register_splitter_refuses_deeply_nested_params(params: dict[str, object], match: str) -> None:
    mng = LoaderMng()
    with pytest.raises(ParameterError, match=match):
        mng.register_splitter(RecursiveCharacterTextSplitter, [".txt"], params)
    assert mng.splitters == {}


def test_register_splitter_accepts_one_level_of_nesting() -> None:
    mng = LoaderMng()
    params = {"chunk_size": 40, "chunk_overlap": 0, "separators": ["\n\n", " "], "keep_separator": "end"}
    mng.register_splitter(RecursiveCharacterTextSplitter, [".txt"], params)
    info = mng.get_splitter(".txt")
    assert info.splitter_params == params
    assert isinstance(info.splitter_class(**info.splitter_params), RecursiveCharacterTextSplitter)


def test_at_most_1000_suffixes() -> None:
    mng = LoaderMng()
    for start in range(0, 1000, 25):
        mng.register_loader(TextLoader, [f".t{i}" for i in range(start, start + 25)])
    assert len(mng.loaders) == 1000
    mng.register_loader(CommunityTextLoader, [".t0"])  # replacing is still allowed
    with pytest.raises(ParameterError, match="at most 1000 suffixes may have a loader; 1000 are registered"):
        mng.register_loader(TextLoader, [".t0", ".new"])
    assert ".new" not in mng.loaders


def test_unknown_suffix_names_the_registered_ones() -> None:
    mng = LoaderMng()
    mng.register_loader(PdfLoader, [".pdf"])
    with pytest.raises(UnsupportedFileTypeError, match=r"no loader .* '\.doc'; registered: \['\.pdf'\]") as info:
        mng.get_loader(".doc")
    assert isinstance(info.value, KeyError)
    with pytest.raises(KeyError, match="no splitter"):
        mng.get_splitter(".pdf")
    with pytest.raises(ParameterError, match="file_suffix"):
        mng.get_loader(None)  # type: ignore[arg-type]


def test_unregister() -> None:
    mng = LoaderMng()
    mng.register_loader(MarkdownLoader, [".md", ".markdown"])
    mng.register_loader(TextLoader, [".txt"])
    mng.register_splitter(RecursiveCharacterTextSplitter, [".md", ".txt"])
    with pytest.raises(UnsupportedFileTypeError, match=r"TextLoader is not the loader of suffix '\.md'"):
        mng.unregister_loader(TextLoader, ".md")
    mng.unregister_loader(MarkdownLoader, ".MD")
    assert set(mng.loaders) == {".markdown", ".txt"}
    mng.unregister_loader(TextLoader)
    assert set(mng.loaders) == {".markdown"}
    with pytest.raises(UnsupportedFileTypeError, match="any suffix"):
        mng.unregister_loader(TextLoader)
    mng.unregister_splitter(RecursiveCharacterTextSplitter)
    assert mng.splitters == {}


TEXT_LOADERS = {
    ".pdf": PdfLoader, ".docx": DocxLoader, ".pptx": PowerPointLoader, ".xlsx": ExcelLoader,
    ".md": MarkdownLoader, ".markdown": MarkdownLoader, ".txt": TextLoader, ".html": HtmlLoader,
    ".htm": HtmlLoader,
}


def test_with_defaults_covers_every_text_loader() -> None:
    mng = LoaderMng.with_defaults()
    assert {suffix: info.loader_class for suffix, info in mng.loaders.items()} == TEXT_LOADERS
    assert set(mng.splitters) == set(mng.loaders)
    assert mng.get_splitter(".pdf").splitter_params["chunk_size"] == 750
    assert all(info.loader_params == {} for info in mng.loaders.values())


def test_with_defaults_keeps_images_out_of_a_text_index_without_a_vlm(docs: Path) -> None:
    with pytest.raises(UnsupportedFileTypeError, match=r"no loader is registered for file suffix '\.png'"):
        LoaderMng.with_defaults().load_and_split(docs / "table-multi-row-column-cells.png")


def test_with_defaults_and_a_vlm_captions_images(vlm: Img2TextLLM) -> None:
    mng = LoaderMng.with_defaults(vlm=vlm)
    assert {suffix: info.loader_class for suffix, info in mng.loaders.items()} == {
        **TEXT_LOADERS, ".jpg": ImageLoader, ".jpeg": ImageLoader, ".png": ImageLoader,
    }
    captioned = [suffix for suffix, info in mng.loaders.items() if info.loader_params.get("vlm") is vlm]
    assert captioned == [".pdf", ".docx", ".pptx", ".md", ".markdown", ".jpg", ".jpeg", ".png"]
    with pytest.raises(ParameterError, match="vlm must be None or an Img2TextLLM"):
        LoaderMng.with_defaults(vlm="qwen-vl")


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (100, 100), (100, -1), (1.5, 0)])
def test_with_defaults_checks_sizes(size: object, overlap: object) -> None:
    with pytest.raises(ParameterError, match="chunk_"):
        LoaderMng.with_defaults(size, overlap)  # type: ignore[arg-type]


# -- load_and_split --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "metadata_keys"),
    [
        ("layout-parser-paper-fast.pdf", {"source", "type", "page"}),
        ("docx-tables.docx", {"source", "type"}),
        ("fake-power-point-table.pptx", {"source", "type", "page"}),
        ("stanley-cups.xlsx", {"source", "type", "sheet", "row", "title"}),
        ("codeblock.md", {"source", "type"}),
        ("norwich-city.txt", {"source", "type"}),
        ("ch03.zh-cn.html", {"source", "type", "title"}),
    ],
)
def test_load_and_split_real_files(docs: Path, name: str, metadata_keys: set[str]) -> None:
    chunks = LoaderMng.with_defaults(chunk_size=300, chunk_overlap=30).load_and_split(docs / name)
    assert chunks
    for chunk in chunks:
        assert 0 < len(chunk.page_content) <= 300
        assert chunk.page_content.strip() == chunk.page_content
        assert set(chunk.metadata) - {"table"} == metadata_keys  # a table chunk is marked
        assert chunk.metadata["source"] == str(docs / name)


def test_long_text_is_split_with_overlap_and_pages_kept(docs: Path) -> None:
    chunks = LoaderMng.with_defaults(chunk_size=400, chunk_overlap=80).load_and_split(
        docs / "layout-parser-paper-fast.pdf")
    assert len(chunks) > 5
    assert sorted({c.metadata["page"] for c in chunks}) == [1, 2]
    assert chunks[0].page_content.startswith("LayoutParser: A Unified Toolkit")


def test_chinese_paragraph_breaks_after_sentence_ends(tmp_path: Path, docs: Path) -> None:
    [doc] = HtmlLoader(docs / "ch03.zh-cn.html").load()
    paragraph = max(doc.page_content.splitlines(), key=len)  # 378 characters, no line break
    path = tmp_path / "uefi.txt"
    path.write_text(paragraph, encoding="utf-8")
    chunks = LoaderMng.with_defaults(chunk_size=100, chunk_overlap=0).load_and_split(path)
    assert len(chunks) > 3
    assert all(c.page_content.endswith(("。", "。）")) for c in chunks)
    assert "".join(c.page_content for c in chunks).replace(" ", "") == paragraph.replace(" ", "")


def test_images_are_not_split(docs: Path) -> None:
    mng = LoaderMng()
    mng.register_loader(ImageLoader, [".jpg"])  # an image knowledge base: the base64 is embedded whole
    [doc] = mng.load_and_split(docs / "example.jpg")
    assert doc.metadata["type"] == "image"
    assert len(doc.page_content) > 40_000


def test_captioned_image_files_are_short_text(docs: Path, vlm: Img2TextLLM) -> None:
    [doc] = LoaderMng.with_defaults(chunk_size=50, chunk_overlap=0, vlm=vlm).load_and_split(docs / "example.jpg")
    assert doc.metadata["type"] == "image" and doc.page_content.startswith("echo:")
    assert len(doc.page_content) < 1000 and len(doc.metadata["image_base64"]) > 40_000


def test_langchain_loader_without_type_is_split(docs: Path) -> None:
    mng = LoaderMng()
    mng.register_loader(CommunityTextLoader, [".txt"], {"encoding": "utf-8"})
    mng.register_splitter(CharacterTextSplitter, [".txt"], {"chunk_size": 500, "chunk_overlap": 0,
                                                          "separator": "\n"})
    chunks = mng.load_and_split(docs / "norwich-city.txt")
    assert len(chunks) > 50
    assert all(len(c.page_content) <= 500 for c in chunks)
    assert all(c.metadata == {"source": str(docs / "norwich-city.txt")} for c in chunks)


def test_empty_chunks_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("x")
    mng = LoaderMng()
    mng.register_loader(WhitespaceLoader, [".txt"], {"parts": ("  \n ", "real text", "")})
    mng.register_splitter(RecursiveCharacterTextSplitter, [".txt"])
    assert [c.page_content for c in mng.load_and_split(path)] == ["real text"]


def test_whitespace_file_gives_no_chunks(docs: Path) -> None:
    assert LoaderMng.with_defaults().load_and_split(docs / "fake-text-all-whitespace.txt") == []


def test_loader_exception_becomes_document_error(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"\x00")
    mng = LoaderMng()
    mng.register_loader(FailingLoader, [".bin"])
    mng.register_splitter(RecursiveCharacterTextSplitter, [".bin"])
    with pytest.raises(DocumentError, match=r"cannot load '.*a\.bin' with FailingLoader: RuntimeError") as info:
        mng.load_and_split(path)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_document_and_parameter_errors_pass_through(docs: Path) -> None:
    mng = LoaderMng.with_defaults()
    with pytest.raises(DocumentError, match="encrypted") as info:
        mng.load_and_split(docs / "password.pdf")
    assert "cannot load" not in str(info.value)
    mng.register_loader(PdfLoader, [".pdf"], {"enable_ocr": "yes"})
    with pytest.raises(ParameterError, match="enable_ocr"):
        mng.load_and_split(docs / "layout-parser-paper-fast.pdf")


def test_unknown_suffix_and_missing_splitter(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,b\n")
    with pytest.raises(UnsupportedFileTypeError, match=r"'\.csv'"):
        LoaderMng.with_defaults().load_and_split(path)
    mng = LoaderMng()
    mng.register_loader(TextLoader, [".txt"])
    with pytest.raises(UnsupportedFileTypeError, match="no splitter"):
        mng.load_and_split(docs / "norwich-city.txt")


def test_bad_splitter_params_are_a_parameter_error(docs: Path) -> None:
    mng = LoaderMng()
    mng.register_loader(TextLoader, [".txt"])
    mng.register_splitter(RecursiveCharacterTextSplitter, [".txt"], {"chunk_size": 10, "chunk_overlap": 50})
    with pytest.raises(ParameterError, match="cannot build RecursiveCharacterTextSplitter"):
        mng.load_and_split(docs / "norwich-city.txt")


def test_path_checks_and_size_limit(monkeypatch: pytest.MonkeyPatch, docs: Path) -> None:
    mng = LoaderMng.with_defaults()
    with pytest.raises(ParameterError, match=r"'\.\.' components"):
        mng.load_and_split(f"{docs}/../docs/fake.docx")
    monkeypatch.setattr(mng_module, "MAX_FILE_SIZE", 10)
    with pytest.raises(ParameterError, match="more than the limit of 10 bytes"):
        mng.load_and_split(docs / "fake.docx")


def test_upper_case_file_suffix(tmp_path: Path, docs: Path) -> None:
    path = tmp_path / "NOTES.TXT"
    path.write_bytes((docs / "norwich-city.txt").read_bytes())
    assert len(LoaderMng.with_defaults().load_and_split(path)) > 10


def test_a_markdown_table_stays_whole_with_its_caption_or_is_cut_between_rows(tmp_path: Path) -> None:
    rows = "\n".join(f"| part {i} | {i * 7} | bin {i % 3} |" for i in range(1, 9))
    text = ("# Stock\n\nThe store keeps spare parts for the cranes. " * 3 + "\n\nTable 2: spare parts\n"
            "| Part | Count | Place |\n| --- | --- | --- |\n" + rows + "\n\nCounted every May.\n")
    path = tmp_path / "stock.md"
    path.write_text(text, encoding="utf-8")
    whole = LoaderMng.with_defaults(chunk_size=400, chunk_overlap=0).load_and_split(path)
    [table] = [c for c in whole if c.metadata.get("table")]
    assert table.page_content.startswith("Table 2: spare parts\n| Part | Count | Place |\n| --- | --- | --- |\n")
    assert table.page_content.endswith("| part 8 | 56 | bin 2 |")
    cut = [c for c in LoaderMng.with_defaults(chunk_size=120, chunk_overlap=0).load_and_split(path)
           if c.metadata.get("table")]
    assert len(cut) > 1
    assert all(c.page_content.startswith("Table 2: spare parts\n| Part | Count | Place |\n| --- |") for c in cut)
    assert [line for c in cut for line in c.page_content.splitlines()[3:]] == rows.splitlines()
