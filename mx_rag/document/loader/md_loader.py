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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
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

# Code (fenced blocks, inline spans) is kept verbatim; images outside code are replaced. The text
# is scanned once, left to right, from one candidate start to the next: a backtracking regex over
# the whole syntax took minutes on 100 kB of "![" or of backticks (each start rescanned the line).
_START = re.compile(r"^[ ]{0,3}(?:`{3,}|~{3,})|`+|!\[", re.MULTILINE)
_FENCE = re.compile(r"^[ ]{0,3}(?P<mark>`{3,}|~{3,})[^\n]*\n.*?(?:^[ ]{0,3}(?P=mark)[`~]*[ \t]*$|\Z)",
                    re.MULTILINE | re.DOTALL)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_NOT_SPACE = re.compile(r"\S")
_TARGET_END = re.compile(r"[)\s]")
_NOT_TICK = re.compile(r"[^`]")
MAX_TICKS = 32  # longer backtick runs never open a code span
_TICK_RUNS = [re.compile(rf"(?<!`)`{{{k}}}(?!`)") for k in range(MAX_TICKS + 1)]
_TITLE_CLOSERS = {'"': '"', "'": "'", "(": ")"}
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

        def replace(alt: str, target: str) -> str:
            alt = alt.strip()
            path = self._local_image(target) if self.vlm is not None else None
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

        text = clean_text(replace_images(source, replace))
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


class _Finder:
    """``find``-like searches that reuse their last answer: linear over a left-to-right scan.

    An answer ``found`` for a search from ``start`` stays the answer for any later start up to
    ``found``; a search from elsewhere is made afresh.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._last: dict[Any, tuple[int, int]] = {}

    def find(self, what: str | re.Pattern[str], start: int, key: Any = None) -> int:
        """The first occurrence of ``what`` at or after ``start``, else ``len(text)``."""
        key = what if key is None else key
        last = self._last.get(key)
        if last is not None and last[0] <= start <= last[1]:
            return last[1]
        if isinstance(what, str):
            found = self.text.find(what, start)
        else:
            match = what.search(self.text, start)
            found = match.start() if match else -1
        found = len(self.text) if found < 0 else found
        self._last[key] = (start, found)
        return found


def replace_images(text: str, replace: Callable[[str, str], str]) -> str:
    """``text`` with each image ``![alt](target "title")`` outside code replaced by
    ``replace(alt, target)``; fenced code blocks and inline code spans are kept as they are."""
    finder = _Finder(text)
    links: dict[int, tuple[int, str] | None] = {}  # the last "](" seen -> (end, target) of its link
    out: list[str] = []
    pos = 0
    while (start := _START.search(text, pos)) is not None:
        begin = start.start()
        if start.group(0) == "![":
            image = _image(text, begin, finder, links)
            if image is None:
                out.append(text[pos : begin + 1])
                pos = begin + 1
            else:
                end, alt, target = image
                out.append(text[pos:begin])
                out.append(replace(alt, target))
                pos = end
            continue
        opener = start.group(0).lstrip(" ")[:3] in ("```", "~~~")
        # a fence needs a line break after its opening line (checked first: without one, the regex
        # would backtrack through every length of a long backtick run)
        fence = _FENCE.match(text, begin) if opener and finder.find("\n", begin, key="fence") < len(text) else None
        if fence is not None:
            end = fence.end()
        elif start.group(0).lstrip(" ").startswith("~"):
            end = start.end()
        else:
            end = _code_span_end(text, begin + start.group(0).index("`"), finder)
        out.append(text[pos:end])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _code_span_end(text: str, ticks: int, finder: _Finder) -> int:
    """The end of the code span opened by the backtick run at ``ticks``, or of the run itself
    when nothing closes it (a run of the same length, before the next blank line)."""
    match = _NOT_TICK.search(text, ticks)
    run_end = match.start() if match else len(text)
    size = run_end - ticks
    if size > MAX_TICKS or run_end >= len(text):
        return run_end
    close = finder.find(_TICK_RUNS[size], run_end, key=("ticks", size))
    if close >= finder.find(_BLANK_LINE, run_end):
        return run_end
    return close + size


def _image(text: str, begin: int, finder: _Finder,
           links: dict[int, tuple[int, str] | None]) -> tuple[int, str, str] | None:
    """``(end, alt, target)`` of the image starting at ``begin`` ("!["), or None."""
    bracket = finder.find("]", begin + 2)
    if bracket >= finder.find("\n", begin + 2, key="alt-newline") or not text.startswith("(", bracket + 1):
        return None
    if bracket not in links:  # every "![" before the same "](" gets the same answer
        links.clear()
        links[bracket] = _link(text, bracket + 2, finder)
    link = links[bracket]
    if link is None:
        return None
    end, target = link
    return end, text[begin + 2 : bracket], target


def _link(text: str, after_paren: int, finder: _Finder) -> tuple[int, str] | None:
    """``(end, target)`` of ``target "title")`` starting just after the "(", or None."""
    start = finder.find(_NOT_SPACE, after_paren, key="target")
    if start >= len(text) or text[start] == ")":
        return None
    ends = []
    if text[start] == "<":  # <target>, or else a bare target starting with "<"
        close = finder.find(">", start + 1)
        if close < finder.find("\n", start + 1, key="angle-newline"):
            ends.append(close + 1)
    ends.append(finder.find(_TARGET_END, start, key="bare"))
    for target_end in ends:
        end = _after_target(text, target_end, finder)
        if end is not None:
            return end, text[start:target_end]
    return None


def _after_target(text: str, target_end: int, finder: _Finder) -> int | None:
    """The end of ``[ "title"] )`` after a target, or None."""
    title = finder.find(_NOT_SPACE, target_end, key="after-target")
    if target_end < title < len(text) and text[title] in _TITLE_CLOSERS:
        closer = _TITLE_CLOSERS[text[title]]
        close = finder.find(closer, title + 1, key=("title", closer))
        if close < finder.find("\n", title + 1, key="title-newline"):
            paren = finder.find(_NOT_SPACE, close + 1, key="after-title")
            if text.startswith(")", paren):
                return paren + 1
    if text.startswith(")", title):
        return title + 1
    return None
