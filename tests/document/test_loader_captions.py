"""Image captioning with a VLM (the scripted server echoes: captions are "echo: <prompt> [image]")."""

import base64
import io
import os
from pathlib import Path

import docx
import pptx
import pytest
from doc_helpers import image_bytes, sent_image_urls
from docx.shared import Inches as DocxInches
from PIL import Image
from pptx.util import Inches

from mx_rag.document.loader import DocxLoader, MarkdownLoader, PdfLoader, PowerPointLoader, _images, md_loader
from mx_rag.errors import DocumentError, RemoteStatusError
from mx_rag.llm import Img2TextLLM
from mx_rag.testing import Reply, ScriptedServer


def _is_caption(text: str, vlm: Img2TextLLM) -> bool:
    return text.startswith("echo:") and text.endswith("[image]") and vlm.prompt[:10] in text


# -- PDF -------------------------------------------------------------------------------------


def test_pdf_images_become_image_documents(docs: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    result = PdfLoader(docs / "embedded-images.pdf", vlm=vlm).load()
    assert [d.metadata["type"] for d in result] == ["text", "image", "image", "image"]
    images = result[1:]
    urls = sent_image_urls(server)
    assert len(urls) == 3
    for doc, url in zip(images, urls, strict=True):
        assert _is_caption(doc.page_content, vlm)
        assert doc.metadata["page"] == 1
        assert doc.metadata["source"] == str(docs / "embedded-images.pdf")
        assert doc.metadata["image_mime"] == "image/jpeg"
        assert url == f"data:image/jpeg;base64,{doc.metadata['image_base64']}"
        assert Image.open(io.BytesIO(base64.b64decode(doc.metadata["image_base64"]))).size == (325, 325)


def test_pdf_undecodable_image_is_skipped(docs: Path, vlm: Img2TextLLM, server: ScriptedServer,
                                          caplog: pytest.LogCaptureFixture) -> None:
    result = PdfLoader(docs / "pdf-bad-color-space.pdf", vlm=vlm).load()
    assert [d.metadata["type"] for d in result] == ["text"]
    assert server.requests == []
    assert "cannot decode" in caplog.text


# -- Word and PowerPoint ---------------------------------------------------------------------


def test_docx_icon_sized_pictures_are_not_sent(docs: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    result = DocxLoader(docs / "contains-pictures.docx", vlm=vlm).load()  # its three pictures are < 256 px
    assert [d.metadata["type"] for d in result] == ["text"]
    assert server.requests == []


def test_docx_pictures_in_body_order_each_once(tmp_path: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    document = docx.Document()
    document.add_paragraph("Figure one follows.")
    document.add_picture(io.BytesIO(image_bytes(300, 300, "PNG")), width=DocxInches(1))
    document.add_picture(io.BytesIO(image_bytes(64, 64, "PNG")), width=DocxInches(0.3))  # an icon
    table = document.add_table(rows=1, cols=1)
    table.rows[0].cells[0].paragraphs[0].add_run().add_picture(io.BytesIO(image_bytes(400, 200, "JPEG")))
    path = tmp_path / "figures.docx"
    document.save(str(path))
    result = DocxLoader(path, vlm=vlm).load()
    assert [d.metadata["type"] for d in result] == ["text", "image", "image"]
    assert result[0].page_content == "Figure one follows."
    assert [u.split(";")[0] for u in sent_image_urls(server)] == ["data:image/png", "data:image/jpeg"]
    assert [d.metadata["image_mime"] for d in result[1:]] == ["image/png", "image/jpeg"]
    assert all("page" not in d.metadata for d in result)


def test_pptx_real_deck_picture_is_icon_sized(docs: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    assert PowerPointLoader(docs / "picture.pptx", vlm=vlm).load() == []
    assert server.requests == []


def test_pptx_pictures_get_their_slide_number(tmp_path: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    deck = pptx.Presentation()
    blank = deck.slide_layouts[6]
    deck.slides.add_slide(blank).shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1)).text = "Intro"
    second = deck.slides.add_slide(blank)
    group = second.shapes.add_group_shape()
    group.shapes.add_picture(io.BytesIO(image_bytes(320, 240, "GIF")), Inches(1), Inches(1))
    path = tmp_path / "deck.pptx"
    deck.save(str(path))
    result = PowerPointLoader(path, vlm=vlm).load()
    assert [(d.metadata["type"], d.metadata["page"]) for d in result] == [("text", 1), ("image", 2)]
    assert sent_image_urls(server)[0].startswith("data:image/gif;base64,")


# -- Markdown --------------------------------------------------------------------------------


@pytest.fixture
def md_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "book"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "chart.png").write_bytes(image_bytes(300, 300))
    (tmp_path / "secret.png").write_bytes(image_bytes(300, 300))
    return folder


def _markdown(folder: Path, body: str) -> Path:
    path = folder / "page.md"
    path.write_text(body, encoding="utf-8")
    return path


def test_markdown_caption_is_inlined(md_dir: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("# Sales chart\nSales rose in Q3."))
    path = _markdown(md_dir, "# Report\n\n![chart](img/chart.png)\n\nEnd.")
    [doc] = MarkdownLoader(path, vlm=vlm).load()
    assert doc.page_content == "# Report\n\nSales chart\nSales rose in Q3.\n\nEnd."  # heading marks stripped
    assert sent_image_urls(server)[0].startswith("data:image/png;base64,")


def test_markdown_images_separately(md_dir: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    path = _markdown(md_dir, "Intro ![the chart](<img/chart.png>) end.")
    text, image = MarkdownLoader(path, vlm=vlm, process_images_separately=True).load()
    assert text.page_content == "Intro the chart end."
    assert image.metadata["type"] == "image"
    assert image.metadata["source"] == str(path)
    assert base64.b64decode(image.metadata["image_base64"]) == (md_dir / "img" / "chart.png").read_bytes()
    assert _is_caption(image.page_content, vlm)


def test_markdown_same_picture_is_captioned_once(md_dir: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("a pie chart"))
    path = _markdown(md_dir, "![a](img/chart.png) and again ![b](./img/chart.png)")
    assert MarkdownLoader(path, vlm=vlm).load()[0].page_content == "a pie chart and again a pie chart"
    assert len(server.requests) == 1
    text, image = MarkdownLoader(path, vlm=vlm, process_images_separately=True).load()
    assert text.page_content == "a and again b"
    assert image.metadata["type"] == "image"
    assert len(server.requests) == 2


@pytest.mark.parametrize("target", [
    "../secret.png",
    "img/../../secret.png",
    "/etc/passwd.png",
    "http://example.com/x.png",
    "file:///tmp/x.png",
    "img/missing.png",
    "img/notes.txt",
    "link.png",
])
def test_markdown_unsafe_or_unusable_images_keep_alt_text(md_dir: Path, vlm: Img2TextLLM,
                                                          server: ScriptedServer, target: str) -> None:
    (md_dir / "img" / "notes.txt").write_text("hello")
    os.symlink(md_dir.parent / "secret.png", md_dir / "link.png")  # a symlink leading out of the folder
    path = _markdown(md_dir, f"A ![alt words]({target}) B")
    assert MarkdownLoader(path, vlm=vlm).load()[0].page_content == "A alt words B"
    assert server.requests == []


def test_markdown_image_size_limit(monkeypatch: pytest.MonkeyPatch, md_dir: Path, vlm: Img2TextLLM,
                                   server: ScriptedServer) -> None:
    monkeypatch.setattr(md_loader, "MAX_IMAGE_SIZE", 100)
    path = _markdown(md_dir, "![alt](img/chart.png)")
    assert MarkdownLoader(path, vlm=vlm).load()[0].page_content == "alt"
    assert server.requests == []


# -- the captioning rules --------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                           ("WEBP", "image/webp"), ("BMP", "image/bmp"), ("TIFF", "image/png")])
def test_real_mime_type_is_sent(vlm: Img2TextLLM, server: ScriptedServer, fmt: str, mime: str) -> None:
    doc = _images.caption_image(image_bytes(300, 260, fmt), vlm, source="/x/doc.pdf", page=4)
    assert doc is not None
    assert doc.metadata["image_mime"] == mime
    assert doc.metadata["page"] == 4
    assert sent_image_urls(server)[0] == f"data:{mime};base64,{doc.metadata['image_base64']}"


@pytest.mark.parametrize(("size", "sent"), [((255, 255), False), ((256, 10), True), ((10, 300), True)])
def test_icon_rule_needs_both_sides_small(vlm: Img2TextLLM, server: ScriptedServer,
                                          size: tuple[int, int], sent: bool) -> None:
    doc = _images.caption_image(image_bytes(*size), vlm, source="s")
    assert (doc is not None) is sent
    assert len(server.requests) == int(sent)


def test_huge_images_are_skipped(vlm: Img2TextLLM, server: ScriptedServer) -> None:
    assert _images.caption_image(image_bytes(4097, 4096), vlm, source="s") is None
    assert server.requests == []


def test_large_image_is_downscaled_to_fit_2_mib(vlm: Img2TextLLM, server: ScriptedServer) -> None:
    noise = Image.frombytes("RGB", (1600, 1600), os.urandom(1600 * 1600 * 3))
    buffer = io.BytesIO()
    noise.save(buffer, format="PNG")
    assert len(buffer.getvalue()) > 2 * 1024 * 1024
    doc = _images.caption_image(buffer.getvalue(), vlm, source="s")
    assert doc is not None
    assert doc.metadata["image_mime"] == "image/jpeg"
    assert len(doc.metadata["image_base64"]) <= 2 * 1024 * 1024
    shrunk = Image.open(io.BytesIO(base64.b64decode(doc.metadata["image_base64"])))
    assert shrunk.format == "JPEG"
    assert shrunk.width < 1600


def test_empty_caption_drops_the_image(docs: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("  "), Reply.chat("a key card"), Reply.chat(""))
    result = PdfLoader(docs / "embedded-images.pdf", vlm=vlm).load()
    assert [d.page_content for d in result if d.metadata["type"] == "image"] == ["a key card"]


def test_vlm_failure_is_a_document_error(docs: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    server.enqueue(Reply.status(503, {"error": {"message": "overloaded"}}))
    expected = r"VLM could not caption an image in .*embedded-images\.pdf' page 1"
    with pytest.raises(DocumentError, match=expected) as info:
        PdfLoader(docs / "embedded-images.pdf", vlm=vlm).load()
    assert isinstance(info.value.__cause__, RemoteStatusError)


# -- image files -----------------------------------------------------------------------------


def test_image_file_with_a_vlm_is_its_caption(docs: Path, vlm: Img2TextLLM, server: ScriptedServer) -> None:
    from mx_rag.document.loader import ImageLoader

    [doc] = ImageLoader(docs / "table-multi-row-column-cells.png", vlm=vlm).load()
    assert _is_caption(doc.page_content, vlm)
    assert doc.metadata["type"] == "image" and doc.metadata["image_mime"] == "image/png"
    assert doc.metadata["source"] == str(docs / "table-multi-row-column-cells.png")
    assert sent_image_urls(server) == [f"data:image/png;base64,{doc.metadata['image_base64']}"]


def test_icon_sized_image_file_with_a_vlm_is_refused_clearly(tmp_path: Path, vlm: Img2TextLLM,
                                                             server: ScriptedServer) -> None:
    from mx_rag.document.loader import ImageLoader

    path = tmp_path / "icon.png"
    Image.new("RGB", (32, 32), "red").save(path)
    with pytest.raises(DocumentError, match=r"\(32x32 pixels\) got no caption"):
        ImageLoader(path, vlm=vlm).load()
    assert server.requests == []
