# SPDX-License-Identifier: Apache-2.0
"""``PdfLoader``: the text of a PDF, one Document per page, with pypdf.

Difference from the original SDK: the original emitted one Document for the whole file and lost
page numbers; this loader emits one text Document per page with ``metadata["page"]`` (1-based),
in pypdf's reading order. Blanks that pypdf puts between Chinese or Japanese characters of
letter-spaced (justified) lines are removed ("对 于 一 个" becomes "对于一个"). Pages without text
(scans) yield nothing: no OCR engine ships with mx_rag, so ``enable_ocr=True`` is refused.
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import pypdf
from langchain_core.documents import Document
from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PdfReadError

from mx_rag.document.loader import base_loader
from mx_rag.document.loader._images import caption_image, check_vlm
from mx_rag.document.loader.base_loader import BaseLoader, check_no_ocr, clean_text, describe
from mx_rag.errors import DocumentError
from mx_rag.utils.common import Lang

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["PdfLoader"]

logger = logging.getLogger(__name__)

# typographic ligatures that pypdf passes through; they break keyword search ("ﬁle" vs "file")
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})


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


class PdfLoader(BaseLoader):
    """Load a PDF: one text Document per page (``metadata``: source, page, type "text").

    With ``vlm``, each image on a page of at least 256 pixels on one side is captioned and
    yielded after the page's text as an image Document (``type`` "image", ``image_base64``,
    ``image_mime``, ``page``). Encrypted PDFs are opened when the empty password works (copy
    protection), otherwise refused.

    Args:
        file_path: the ``.pdf`` file (at most 100 MiB, at most 1000 pages).
        vlm: an ``Img2TextLLM`` to caption images, or None to ignore them.
        lang: document language (kept for compatibility; used by OCR in the original).
        enable_ocr: must be False: no OCR engine ships with mx_rag.

    Example:
        >>> from mx_rag.document.loader import PdfLoader
        >>> pages = PdfLoader("report.pdf").load()  # doctest: +SKIP
        >>> pages[0].metadata["page"]  # doctest: +SKIP
        1
    """

    SUFFIXES = (".pdf",)

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        vlm: Img2TextLLM | None = None,
        lang: Lang = Lang.CH,
        enable_ocr: bool = False,
    ) -> None:
        super().__init__(file_path)
        check_no_ocr(enable_ocr, lang)
        self.vlm = check_vlm(vlm)
        self.lang = lang
        self.enable_ocr = enable_ocr

    def _load(self) -> Iterator[Document]:
        reader = self._open()
        count = _page_count(reader, self.file_path)
        if count == 0:
            raise DocumentError(f"{self.file_path!r} is not a readable PDF: it has no pages")
        if count > base_loader.MAX_PAGE_NUM:
            raise DocumentError(f"{self.file_path!r} has {count} pages, more than the limit of "
                                f"{base_loader.MAX_PAGE_NUM}")
        with_text = 0
        for number, page in enumerate(reader.pages, start=1):
            try:
                text = _tidy(page.extract_text())
            except Exception as exc:
                raise DocumentError(f"cannot extract the text of page {number} of {self.file_path!r}: "
                                    f"{describe(exc)}") from exc
            if text:
                with_text += 1
                yield self._text_document(text, page=number)
            if self.vlm is not None:
                yield from self._captions(page, number)
        if not with_text:
            logger.warning("%r has no text layer on any of its %d pages (a scan?); OCR is not available",
                           self.file_path, count)

    def _open(self) -> PdfReader:
        try:
            reader = PdfReader(io.BytesIO(self._read_bytes()))
            if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
                raise DocumentError(f"{self.file_path!r} is encrypted (password-protected); "
                                    "remove the password before loading it")
            return reader
        except PdfReadError as exc:
            raise DocumentError(f"{self.file_path!r} is not a readable PDF (malformed or damaged): "
                                f"{describe(exc)}") from exc
        except DependencyError as exc:  # AES encryption needs the optional "cryptography" package
            raise DocumentError(f"{self.file_path!r} is encrypted and cannot be opened here: {describe(exc)}") from exc

    def _captions(self, page: PageObject, number: int) -> Iterator[Document]:
        assert self.vlm is not None
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
            doc = caption_image(data, self.vlm, source=self.file_path, page=number)
            if doc is not None:
                yield doc

    def _image_bytes(self, page: PageObject, key: Any, number: int) -> bytes | None:
        try:
            return bytes(page.images[key].data)
        except Exception as exc:  # pypdf fails on odd colour spaces and filters: skip that image
            logger.warning("skipped an image on page %d of %r that pypdf cannot decode: %s: %s",
                           number, self.file_path, type(exc).__name__, exc)
            return None
