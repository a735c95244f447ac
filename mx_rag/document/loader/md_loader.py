# SPDX-License-Identifier: Apache-2.0
"""``MarkdownLoader``: a Markdown file as one text Document, kept as Markdown.

Headings, tables, lists and code stay as written (the splitter can use them). Images
``![alt](path)`` outside code are replaced: with a ``vlm`` and a local picture, by its caption
(or, with ``process_images_separately``, by the alt text plus a separate image Document);
otherwise by the alt text. A picture is read only when its relative path resolves, symlinks
followed, inside the Markdown file's directory, ends with .jpg/.jpeg/.png and is at most 16 MiB.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from langchain_core.documents import Document

from mx_rag.document.loader._images import caption_image, check_vlm
from mx_rag.document.loader.base_loader import BaseLoader, clean_text
from mx_rag.document.loader.text_loader import decode_text
from mx_rag.utils.checks import check_bool
from mx_rag.utils.common import MB

if TYPE_CHECKING:
    from mx_rag.llm.img2text import Img2TextLLM

__all__ = ["MarkdownLoader"]

logger = logging.getLogger(__name__)

MAX_IMAGE_SIZE = 16 * MB
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")

# fenced code block | inline code span | image: code is kept verbatim, images are replaced
_TOKENS = re.compile(
    r"(?P<fence>^[ ]{0,3}(?P<mark>`{3,}|~{3,})[^\n]*\n.*?(?:^[ ]{0,3}(?P=mark)[`~]*[ \t]*$|\Z))"
    r"|(?P<code>(?P<ticks>`+)[^`](?:(?!\n[ \t]*\n).)*?(?P=ticks))"
    r"|(?P<image>!\[(?P<alt>[^\]\n]*)\]\(\s*(?P<target><[^>\n]*>|[^)\s]+)"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?\s*\))",
    re.MULTILINE | re.DOTALL,
)
_HEADING_MARKS = re.compile(r"^[ \t]*#+[ \t]*", re.MULTILINE)


class MarkdownLoader(BaseLoader):
    """Load a ``.md``/``.markdown`` file as one text Document (``metadata``: source, type "text").

    Args:
        file_path: the Markdown file (at most 100 MiB; encoding detected as by ``TextLoader``).
        vlm: an ``Img2TextLLM`` to caption local pictures, or None to keep their alt text.
        process_images_separately: yield each captioned picture as its own image Document
            (``type`` "image", ``image_base64``, ``image_mime``) instead of inlining the caption.

    Example:
        >>> from mx_rag.document.loader import MarkdownLoader
        >>> doc = MarkdownLoader("README.md").load()[0]  # doctest: +SKIP
        >>> doc.page_content.startswith("#")  # doctest: +SKIP
        True
    """

    SUFFIXES = (".md", ".markdown")

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        vlm: Img2TextLLM | None = None,
        process_images_separately: bool = False,
    ) -> None:
        super().__init__(file_path)
        self.vlm = check_vlm(vlm)
        self.process_images_separately = check_bool("process_images_separately", process_images_separately)

    def _load(self) -> Iterator[Document]:
        source = decode_text(self._read_bytes(), self.file_path)
        images: list[Document] = []
        captions: dict[Path, Document | None] = {}  # a picture used twice is captioned once

        def replace(match: re.Match[str]) -> str:
            if match.group("image") is None:
                return match.group(0)
            alt = match.group("alt").strip()
            path = self._local_image(match.group("target")) if self.vlm is not None else None
            if path is None:
                return alt
            if path not in captions:
                captions[path] = fresh = self._caption(path)
                if fresh is not None and self.process_images_separately:
                    images.append(fresh)
            doc = captions[path]
            if doc is None or self.process_images_separately:
                return alt
            return _HEADING_MARKS.sub("", doc.page_content).strip()

        text = clean_text(_TOKENS.sub(replace, source))
        if text:
            yield self._text_document(text)
        yield from images

    def _caption(self, path: Path) -> Document | None:
        assert self.vlm is not None
        return caption_image(path.read_bytes(), self.vlm, source=self.file_path)

    def _local_image(self, target: str) -> Path | None:
        """The picture a relative link names, if it is safe and fit to read; else None."""
        target = target.strip("<>").strip()
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not parts.path or parts.path.startswith(("/", "\\")):
            logger.debug("image link of %r is not a relative path; alt text kept", self.file_path)
            return None
        base = self.path.parent
        try:
            path = (base / unquote(parts.path)).resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        if not path.is_relative_to(base):
            logger.warning("an image link of %r leads outside its directory; alt text kept", self.file_path)
            return None
        if path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
            return None
        if path.stat().st_size > MAX_IMAGE_SIZE:
            logger.warning("an image of %r is larger than %d bytes; alt text kept", self.file_path, MAX_IMAGE_SIZE)
            return None
        return path
