# SPDX-License-Identifier: Apache-2.0
"""``PowerPointLoader``: a PowerPoint (.pptx) deck, one text Document per slide, with python-pptx.

Per slide, in shape order: text frames (one line per paragraph), tables (a Markdown table, first
row as header, kept whole by ``LoaderMng``'s splitting), and the shapes inside groups. Slides
without text yield no text Document. A deck may hold at most 1000 slides and 100,000 shapes.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from langchain_core.documents import Document
from pptx import Presentation
from pptx.shapes.base import BaseShape
from pptx.shapes.group import GroupShape

from mx_rag.document.loader import base_loader
from mx_rag.document.loader._layout import markdown_table
from mx_rag.document.loader.base_loader import check_zip, clean_text
from mx_rag.document.loader.picture_loader import PictureLoader
from mx_rag.errors import DocumentError

__all__ = ["PowerPointLoader"]

MAX_SHAPES = 100_000  # shapes of the whole deck, group members included


class PowerPointLoader(PictureLoader):
    """Load a ``.pptx`` file: one text Document per slide (``metadata``: source, page, type "text").

    ``page`` is the 1-based slide number. With ``vlm``, each picture of at least 256 pixels on
    one side is captioned and yielded after its slide's text as an image Document (``page``,
    ``type`` "image", ``image_base64``, ``image_mime``). Without ``vlm`` and with ``enable_ocr``,
    the text of those pictures is read by OCR and yielded as a text Document (``ocr`` and
    ``image`` True).

    Args:
        file_path: the ``.pptx`` file (at most 100 MiB and 1000 slides).
        vlm: an ``Img2TextLLM`` to caption pictures, or None.
        lang: the pictures' language (Lang.CH or Lang.EN); the packaged OCR model reads both.
        enable_ocr: read the pictures' text by OCR when there is no ``vlm`` (needs ``mxrag[ocr]``).

    Example:
        >>> from mx_rag.document.loader import PowerPointLoader
        >>> slides = PowerPointLoader("deck.pptx").load()  # doctest: +SKIP
        >>> [d.metadata["page"] for d in slides]  # doctest: +SKIP
        [1, 2, 3]
    """

    SUFFIXES = (".pptx",)

    def _load(self) -> Iterator[Document]:
        data = self._read_bytes()
        check_zip(data, self.file_path, ".pptx")
        deck = Presentation(io.BytesIO(data))
        count = len(deck.slides)
        if count > base_loader.MAX_PAGE_NUM:
            raise DocumentError(f"{self.file_path!r} has {count} slides, more than the limit of "
                                f"{base_loader.MAX_PAGE_NUM}")
        seen = 0
        for number, slide in enumerate(deck.slides, start=1):
            shapes = list(itertools.islice(_flatten(slide.shapes), MAX_SHAPES - seen + 1))
            seen += len(shapes)
            if seen > MAX_SHAPES:
                raise DocumentError(f"{self.file_path!r} holds more than {MAX_SHAPES} shapes")
            text = clean_text("\n".join(line for shape in shapes for line in _shape_lines(shape)))
            if text:
                yield self._text_document(text, page=number)
            if self.vlm is not None or self.enable_ocr:
                yield from self._pictures(shapes, number)

    def _pictures(self, shapes: list[BaseShape], number: int) -> Iterator[Document]:
        """Captions (with ``vlm``) or OCR text (``enable_ocr``) of the slide's pictures."""
        for shape in shapes:
            blob = _picture_blob(shape)
            if blob is None:
                continue
            doc = self._picture_document(blob, f"a picture on slide {number} of {self.file_path!r}", number)
            if doc is not None:
                yield doc


def _flatten(shapes: Iterable[BaseShape]) -> Iterator[BaseShape]:
    """Shapes in order, with the members of group shapes in place of the group."""
    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _flatten(shape.shapes)
        else:
            yield shape


def _shape_lines(shape: Any) -> list[str]:
    if getattr(shape, "has_table", False):
        rows = []
        for row in shape.table.rows:
            cells = [" ".join(cell.text.split()) for cell in row.cells]
            if any(cells):
                rows.append(cells)
        return markdown_table(rows).splitlines() if len(rows) > 1 else [" | ".join(cells) for cells in rows]
    if getattr(shape, "has_text_frame", False):
        return [line for p in shape.text_frame.paragraphs if (line := " ".join(p.text.split()))]
    return []


def _picture_blob(shape: Any) -> bytes | None:
    """The image bytes of a picture or picture placeholder; None for other shapes or linked images."""
    try:
        image = shape.image
    except (AttributeError, KeyError, ValueError):
        return None
    return bytes(image.blob)
