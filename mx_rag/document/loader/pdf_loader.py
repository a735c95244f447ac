# SPDX-License-Identifier: Apache-2.0
"""``PdfLoader``: the text of a PDF, one Document per page, with pypdf.

Difference from the original SDK: the original emitted one Document for the whole file and lost
page numbers; this loader emits one text Document per page with ``metadata["page"]`` (1-based),
in pypdf's reading order. Blanks that pypdf puts between Chinese or Japanese characters of
letter-spaced (justified) lines are removed ("对 于 一 个" becomes "对于一个"). Pages without a
text layer (scans) are rendered with PDFium and read by OCR (``mxrag[ocr]``, see ``_ocr``).
"""

from __future__ import annotations

import importlib.util
import io
import logging
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

import pypdf
from langchain_core.documents import Document
from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PdfReadError

from mx_rag.document.loader import base_loader
from mx_rag.document.loader._layout import drop_running_lines, page_text
from mx_rag.document.loader._ocr import INSTALL_HINT, PDFIUM_LOCK, ocr_available, recognize, render_pdf
from mx_rag.document.loader._pdf_tables import Table, page_tables
from mx_rag.document.loader.base_loader import clean_text, describe
from mx_rag.document.loader.picture_loader import PictureLoader
from mx_rag.errors import DocumentError, OcrUnavailableError

__all__ = ["PdfLoader"]

logger = logging.getLogger(__name__)

# typographic ligatures that pypdf passes through; they break keyword search ("ﬁle" vs "file")
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})


MATCH = 0.9  # share of a table's characters a run of pypdf's lines must hold to be replaced by the table
MIN_TEXT_CHARS = 16  # non-blank characters under which a page's text layer counts as missing

# Chinese and Japanese characters and their punctuation (not Hangul: Korean puts spaces between words)
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# blanks that pypdf puts between letter-spaced (justified) CJK characters: "对 于 一 个" -> "对于一个"
_CJK_GAP = re.compile(f"(?<=[{_CJK}])[ \t\u00a0]+(?=[{_CJK}])")


def _tidy(text: str) -> str:
    """Ligatures spelled out, blanks between CJK characters and at line ends dropped, NULs removed.

    Chinese and Japanese put no spaces between words, so a blank between two of their
    characters is an artefact of the PDF's glyph spacing, never the author's.
    """
    lines = (_CJK_GAP.sub("", line).rstrip() for line in text.translate(_LIGATURES).splitlines())
    return clean_text("\n".join(lines))


def _scarce(text: str) -> bool:
    """Whether a page's text layer is missing or too thin to be the page (a scan with a stray mark)."""
    return len("".join(text.split())) < MIN_TEXT_CHARS


def _page_count(reader: PdfReader, source: str) -> int:
    """The number of pages, reading at most four entries of the page tree per allowed page.

    pypdf counts the pages by walking the whole tree into page objects (the ``/Count`` it
    declares is not trusted): 100,000 pages took 40 s and 500 MiB before the limit refused them.
    """
    limit = 4 * base_loader.MAX_PAGE_NUM + 16  # leaves and the inner nodes above them
    apply_configuration = getattr(pypdf, "apply_configuration", None)  # pypdf >= 6.1
    bounded = apply_configuration(page_tree_maximum_entries=limit) if apply_configuration else nullcontext()
    try:
        with bounded:
            return len(reader.pages)
    except LimitReachedError as exc:
        raise DocumentError(f"{source!r} has more than {base_loader.MAX_PAGE_NUM} pages (its page tree holds "
                            f"more than {limit} entries)") from exc


class PdfLoader(PictureLoader):
    """Load a PDF: one text Document per page (``metadata``: source, page, type "text").

    A page with (almost) no text layer, a scan, is read by OCR when the ``ocr`` extra is installed,
    whatever ``enable_ocr`` says (its Document adds ``ocr``: True and ``rotation``, the degrees it
    was turned to stand upright); without the engine such pages are logged, and a file that is
    all scan raises ``OcrUnavailableError`` naming ``pip install "mxrag[ocr]"``. Lines repeated at
    the top or bottom of most pages (running headers, footers) are dropped; a printed page number
    found there goes to ``metadata["page_label"]``. Scanned tables come out as Markdown tables.

    With ``vlm``, each image on a page of at least 256 pixels on one side is captioned and
    yielded after the page's text as an image Document (``type`` "image", ``image_base64``,
    ``image_mime``, ``page``). Without ``vlm`` and with ``enable_ocr``, the text of those images
    is read by OCR and yielded as a text Document (``ocr``: True, ``image``: True). Encrypted
    PDFs are opened when the empty password works (copy protection), otherwise refused.

    Args:
        file_path: the ``.pdf`` file (at most 100 MiB, at most 1000 pages).
        vlm: an ``Img2TextLLM`` to caption images, or None.
        lang: document language (Lang.CH or Lang.EN); the packaged OCR model reads both.
        enable_ocr: also read the images on pages that have text by OCR (needs ``mxrag[ocr]``).

    Example:
        >>> from mx_rag.document.loader import PdfLoader
        >>> pages = PdfLoader("report.pdf").load()  # doctest: +SKIP
        >>> pages[0].metadata["page"]  # doctest: +SKIP
        1
    """

    SUFFIXES = (".pdf",)

    def _load(self) -> Iterator[Document]:
        data = self._read_bytes()
        reader = self._open(data)
        count = _page_count(reader, self.file_path)
        if count == 0:
            raise DocumentError(f"{self.file_path!r} is not a readable PDF: it has no pages")
        if count > base_loader.MAX_PAGE_NUM:
            raise DocumentError(f"{self.file_path!r} has {count} pages, more than the limit of "
                                f"{base_loader.MAX_PAGE_NUM}")
        texts: list[str] = []
        for number, page in enumerate(reader.pages, start=1):
            try:
                texts.append(_tidy(page.extract_text()))
            except Exception as exc:
                raise DocumentError(f"cannot extract the text of page {number} of {self.file_path!r}: "
                                    f"{describe(exc)}") from exc
        self._tables(texts, data)
        scanned = self._scanned(texts, data)
        kept, labels = drop_running_lines(texts)
        for number, page in enumerate(reader.pages, start=1):
            if kept[number - 1]:
                extra: dict[str, Any] = {"page_label": labels[number - 1]} if labels[number - 1] else {}
                if number in scanned:
                    extra.update(ocr=True, rotation=scanned[number])
                yield self._text_document(kept[number - 1], page=number, **extra)
            if self.vlm is not None or self.enable_ocr:
                yield from self._images(page, number)

    def _scanned(self, texts: list[str], data: bytes) -> dict[int, int]:
        """OCR the pages with (almost) no text layer into ``texts``; their numbers -> rotation."""
        bare = [number for number, text in enumerate(texts, start=1) if _scarce(text)]
        if not bare:
            return {}
        if not ocr_available():
            if len(bare) == len(texts):
                raise OcrUnavailableError(f"{self.file_path!r} has no text layer on any of its {len(texts)} pages "
                                          f"(a scan) and no OCR engine is installed: {INSTALL_HINT}")
            logger.warning("%r: pages %s have no text layer and were skipped: %s", self.file_path, bare, INSTALL_HINT)
            return {}
        done = {}
        for number, image in render_pdf(data, bare, source=self.file_path):
            page = recognize(image, source=f"page {number} of {self.file_path!r}")
            text = page_text(page.lines, page.width)
            if len(text) > len(texts[number - 1]):
                texts[number - 1], done[number] = text, page.angle
        return done
    def _tables(self, texts: list[str], data: bytes) -> None:
        """Replace, in the pages that have text, the lines of each ruled table by a Markdown table.

        Needs PDFium (``pypdfium2``, in ``mxrag[loaders]``); without it, or when PDFium cannot read
        the file, the pages keep pypdf's text.
        """
        if importlib.util.find_spec("pypdfium2") is None:
            return
        import pypdfium2

        try:
            with PDFIUM_LOCK:
                document = pypdfium2.PdfDocument(data)
                count = len(document)
        except Exception as exc:  # pypdf read it: the text stays, without tables
            logger.warning("%r: tables not read, PDFium cannot open the file: %s", self.file_path, describe(exc))
            return
        try:
            for number, text in enumerate(texts, start=1):
                if _scarce(text) or number > count:
                    continue
                with PDFIUM_LOCK:  # PDFium is not thread-safe (ingestion parses files in threads)
                    page = document[number - 1]
                    try:
                        tables = page_tables(page)
                    finally:
                        page.close()
                for table in tables:
                    table.blocks = [[[_tidy(cell) for cell in row] for row in block] if isinstance(block, list)
                                    else _tidy(block) for block in table.blocks]
                if tables:
                    texts[number - 1] = splice_tables(text, tables)
        except Exception as exc:  # a damaged page: the text read so far stays
            logger.warning("%r: tables not read: %s", self.file_path, describe(exc))
        finally:
            with PDFIUM_LOCK:
                document.close()

    def _open(self, data: bytes) -> PdfReader:
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
                raise DocumentError(f"{self.file_path!r} is encrypted (password-protected); "
                                    "remove the password before loading it")
            return reader
        except PdfReadError as exc:
            raise DocumentError(f"{self.file_path!r} is not a readable PDF (malformed or damaged): "
                                f"{describe(exc)}") from exc
        except DependencyError as exc:  # AES encryption needs the optional "cryptography" package
            raise DocumentError(f"{self.file_path!r} is encrypted and cannot be opened here: {describe(exc)}") from exc

    def _images(self, page: PageObject, number: int) -> Iterator[Document]:
        """Captions (with ``vlm``) or OCR text (``enable_ocr``) of the page's images."""
        try:
            keys = list(page.images.keys())
        except Exception as exc:  # a damaged resource dictionary: the page's text is still good
            logger.warning("skipped the images of page %d of %r: %s: %s", number, self.file_path,
                           type(exc).__name__, exc)
            return
        for key in keys:
            data = self._image_bytes(page, key, number)
            if data is None:
                continue
            doc = self._picture_document(data, f"an image on page {number} of {self.file_path!r}", number)
            if doc is not None:
                yield doc

    def _image_bytes(self, page: PageObject, key: Any, number: int) -> bytes | None:
        try:
            return bytes(page.images[key].data)
        except Exception as exc:  # pypdf fails on odd colour spaces and filters: skip that image
            logger.warning("skipped an image on page %d of %r that pypdf cannot decode: %s: %s",
                           number, self.file_path, type(exc).__name__, exc)
            return None


def splice_tables(text: str, tables: list[Table]) -> str:
    """``text`` with the lines holding each table's characters replaced by its Markdown table; every
    other line is left as it was, and a table whose lines cannot be found (pypdf read its characters
    elsewhere or differently) is left out."""
    lines = text.split("\n")
    replaced: list[tuple[int, int, Table]] = []
    for table in tables:
        span = _span(lines, Counter("".join("".join(cell.split()) for cell in table.cells)))
        if span is not None and all(span[1] < start or span[0] > end for start, end, _ in replaced):
            replaced.append((span[0], span[1], table))
    for start, end, table in sorted(replaced, key=lambda item: -item[0]):
        lines[start:end + 1] = [table.markdown]
    return "\n".join(lines)


def _span(lines: list[str], wanted: Counter[str]) -> tuple[int, int] | None:
    """The run of lines whose characters best match ``wanted``: at least ``MATCH`` of them found,
    few others; the most found less twice the others, the shortest of equals."""
    total = sum(wanted.values())
    if not total:
        return None
    counts = [Counter("".join(line.split())) for line in lines]
    best: tuple[int, int, int] | None = None  # score, start, end
    for start, first in enumerate(counts):
        if not first:
            continue
        window: Counter[str] = Counter()
        for end in range(start, len(lines)):
            if sum((counts[end] & wanted).values()) < 0.5 * sum(counts[end].values()):
                break  # a line mostly of other text: the table's lines end above it
            window += counts[end]
            extra = sum((window - wanted).values())
            if extra > (1 - MATCH) * total:
                break
            found = sum((window & wanted).values())
            score = found - 2 * extra
            if found >= MATCH * total and (best is None or (score, start - end) > (best[0], best[1] - best[2])):
                best = (score, start, end)
    return (best[1], best[2]) if best else None
