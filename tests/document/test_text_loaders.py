"""TextLoader, MarkdownLoader, HtmlLoader and ImageLoader on real files."""

import base64
import codecs
from pathlib import Path

import pytest
from doc_helpers import image_bytes

from mx_rag.document.loader import HtmlLoader, ImageLoader, MarkdownLoader, TextLoader
from mx_rag.errors import DocumentError, ParameterError

# -- text ------------------------------------------------------------------------------------


def test_text_utf16_with_bom(docs: Path) -> None:
    [doc] = TextLoader(docs / "fake-text-utf-16.txt").load()
    assert doc.page_content.startswith("This is a test document to use for unit tests.")
    assert doc.metadata == {"source": str(docs / "fake-text-utf-16.txt"), "type": "text"}


def test_text_whitespace_only_file_gives_nothing(docs: Path) -> None:
    assert TextLoader(docs / "fake-text-all-whitespace.txt").load() == []


def test_text_utf8_file_is_read_exactly(docs: Path) -> None:
    [doc] = TextLoader(docs / "norwich-city.txt").load()
    assert doc.page_content == (docs / "norwich-city.txt").read_text(encoding="utf-8").strip()
    assert doc.page_content.startswith("Iwan Roberts")


@pytest.mark.parametrize(
    ("encoded", "codec"),
    [
        (codecs.BOM_UTF8 + "中文 text".encode(), "utf-8-sig"),
        (codecs.BOM_UTF16_LE + "中文 text".encode("utf-16-le"), "utf-16-le"),
        (codecs.BOM_UTF16_BE + "中文 text".encode("utf-16-be"), "utf-16-be"),
        (codecs.BOM_UTF32_LE + "中文 text".encode("utf-32-le"), "utf-32-le"),
        (codecs.BOM_UTF32_BE + "中文 text".encode("utf-32-be"), "utf-32-be"),
    ],
)
def test_text_byte_order_marks(tmp_path: Path, encoded: bytes, codec: str) -> None:
    path = tmp_path / f"{codec}.txt"
    path.write_bytes(encoded)
    assert TextLoader(path).load()[0].page_content == "中文 text"


def test_text_legacy_chinese_encoding_is_detected(tmp_path: Path) -> None:
    text = "系统初始化是每个系统管理员都应该了解的过程。启动过程分为几个阶段，每个阶段把控制权交给下一个阶段。" * 3
    path = tmp_path / "gbk.txt"
    path.write_bytes(text.encode("gb18030"))
    assert TextLoader(path).load()[0].page_content == text


def test_text_explicit_encoding(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("café".encode("latin-1"))
    assert TextLoader(path, encoding="latin-1").load()[0].page_content == "café"
    with pytest.raises(DocumentError, match=r"cannot decode .* as utf-8"):
        TextLoader(path, encoding="utf-8").load()
    with pytest.raises(DocumentError, match="no-such-codec"):
        TextLoader(path, encoding="no-such-codec").load()


def test_text_nul_characters_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "nul.txt"
    path.write_bytes(b"a\x00b")
    assert TextLoader(path).load()[0].page_content == "ab"


# -- markdown --------------------------------------------------------------------------------


def test_markdown_is_kept_as_markdown(docs: Path) -> None:
    [doc] = MarkdownLoader(docs / "codeblock.md").load()
    assert doc.page_content == (docs / "codeblock.md").read_text(encoding="utf-8").strip()
    assert doc.page_content.startswith("## HTML Example\n\n```html\n<!DOCTYPE html>")


def test_markdown_table(docs: Path) -> None:
    [doc] = MarkdownLoader(docs / "simple-table.md").load()
    assert doc.page_content.splitlines()[:2] == ["Item | Price | # In stock", "---|---|---"]
    assert doc.metadata == {"source": str(docs / "simple-table.md"), "type": "text"}


def test_markdown_non_utf8(docs: Path) -> None:
    [doc] = MarkdownLoader(docs / "umlauts-non-utf8.md").load()
    assert doc.page_content == "## können\n\nkönnen\n\näöüß"


def test_markdown_without_vlm_keeps_alt_text_but_not_code(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\nSee ![the chart](chart.png \"Chart\") here.\n\n```md\n![kept](x.png)\n```\n"
                    "Inline `![also kept](y.png)` code.\n", encoding="utf-8")
    [doc] = MarkdownLoader(path).load()
    assert doc.page_content == ("# Guide\n\nSee the chart here.\n\n```md\n![kept](x.png)\n```\n"
                                "Inline `![also kept](y.png)` code.")


# -- HTML ------------------------------------------------------------------------------------


def test_html_blocks_in_document_order(docs: Path) -> None:
    [doc] = HtmlLoader(docs / "fake-html.html").load()
    assert doc.page_content.splitlines() == [
        "My First Heading",
        "My Second Heading",
        "My first paragraph. lorem ipsum dolor set amet. if the cow comes home under the sun how do you "
        "fault the cow for it's worn hooves?",
        "A test list",
        "With sub-bullets!",
        "And another",
        "Back at the root",
        "A Third Heading",
        "Column 1 | Column 2",
        "Row 1, Cell 1 | Row 1, Cell 2",
        "Row 2, Cell 1 | Row 2, Cell 2",
    ]
    assert doc.metadata == {"source": str(docs / "fake-html.html"), "type": "text"}


def test_html_10k_filing(docs: Path) -> None:
    [doc] = HtmlLoader(docs / "example-10k-1p.html").load()
    lines = doc.page_content.splitlines()
    assert "Galaxy Gaming, Inc." in lines
    assert "Title of each class | Trading symbol | Name of exchange on which registered" in lines
    assert "Common stock | GLXZ | OTCQB marketplace" in lines
    assert lines.index("Galaxy Gaming, Inc.") < lines.index("Common stock | GLXZ | OTCQB marketplace")


def test_html_chinese_chapter(docs: Path) -> None:
    [doc] = HtmlLoader(docs / "ch03.zh-cn.html").load()
    assert doc.metadata["title"] == "第 3 章 系统初始化"
    lines = doc.page_content.splitlines()
    assert "计算机系统从上电事件到能为用户提供完整的操作系统（OS）功能为止，需要经历几个阶段的启动过程。" in lines
    assert lines.index("3.1. 启动过程概述") < lines.index("3.1.1. 第一阶段：UEFI")


def test_html_noise_is_dropped_and_pre_kept(tmp_path: Path) -> None:
    path = tmp_path / "page.htm"
    path.write_text(
        "<html><head><title> Notes </title><style>p {color: red}</style></head><body>"
        "<nav><a href='/'>Home</a></nav><script>var x = 1;</script><!-- a comment -->"
        "<h2>Setup</h2><p>Run <code>make</code>   now.</p><pre>line 1\n    line 2</pre>"
        "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td><table><tr><td>in</td></tr></table></td></tr></table>"
        "</body></html>", encoding="utf-8")
    [doc] = HtmlLoader(path).load()
    assert doc.page_content == "Setup\nRun make now.\nline 1\n    line 2\nk | v\na | in"
    assert doc.metadata["title"] == "Notes"


def test_html_charset_declared_in_meta(tmp_path: Path) -> None:
    path = tmp_path / "gbk.html"
    path.write_bytes('<html><head><meta charset="gbk"></head><body><p>系统初始化</p></body></html>'.encode("gbk"))
    assert HtmlLoader(path).load()[0].page_content == "系统初始化"


# -- images ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "mime"), [("example.jpg", "image/jpeg"),
                                            ("table-multi-row-column-cells.png", "image/png")])
def test_image_is_base64_of_the_file(docs: Path, name: str, mime: str) -> None:
    [doc] = ImageLoader(docs / name).load()
    assert base64.b64decode(doc.page_content) == (docs / name).read_bytes()
    assert doc.metadata == {"source": str(docs / name), "type": "image", "image_mime": mime}


def test_image_jpeg_suffix_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "photo.JPEG"
    path.write_bytes(image_bytes(64, 48, "JPEG"))
    assert ImageLoader(path).load()[0].metadata["image_mime"] == "image/jpeg"


def test_image_pixel_limit(tmp_path: Path) -> None:
    path = tmp_path / "huge.png"
    path.write_bytes(image_bytes(5000, 4000))
    with pytest.raises(DocumentError, match="5000x4000 pixels"):
        ImageLoader(path).load()


@pytest.mark.parametrize(("content", "match"), [
    (b"not an image at all", "not a valid image"),
    (image_bytes(32, 32, "GIF"), "GIF image; only JPEG and PNG"),
])
def test_image_bad_content(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "bad.png"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=match):
        ImageLoader(path).load()


def test_image_other_suffix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pic.gif"
    path.write_bytes(image_bytes(32, 32, "GIF"))
    with pytest.raises(ParameterError, match=r"\.jpg.*\.jpeg.*\.png"):
        ImageLoader(path)


def test_image_size_limit_is_16_mib(tmp_path: Path) -> None:
    path = tmp_path / "big.png"
    with path.open("wb") as handle:
        handle.write(image_bytes(8, 8))
        handle.truncate(16 * 1024 * 1024 + 1)
    with pytest.raises(ParameterError, match="more than the limit of 16777216 bytes"):
        ImageLoader(path)
