# SPDX-License-Identifier: Apache-2.0
"""``HtmlLoader``: the readable text of an HTML page as one Document, with BeautifulSoup.

Scripts, styles, navigation, forms and the head are dropped. Text comes out as blocks in
document order, one per line group: headings, paragraphs, list items, preformatted text (kept
as is), and table rows with their cells joined by " | ". The page title goes to metadata.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction
from langchain_core.documents import Document

from mx_rag.document.loader.base_loader import BaseLoader, clean_text

__all__ = ["HtmlLoader"]

_DROP = {"script", "style", "nav", "head", "noscript", "template", "iframe", "svg", "canvas", "form",
         "button", "select", "option", "object", "embed", "audio", "video", "map"}
_BLOCK = {"address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog", "div",
          "dl", "dt", "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6",
          "header", "hr", "li", "main", "ol", "p", "section", "summary", "ul", "br", "center"}
_SKIP_STRINGS = (Comment, Declaration, Doctype, ProcessingInstruction)


class _Blocks:
    """Collects inline text into blocks; whitespace runs collapse to one space as in a browser."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self._inline: list[str] = []

    def add_inline(self, text: str) -> None:
        self._inline.append(text)

    def add_block(self, text: str) -> None:
        self.flush()
        if text.strip():
            self.blocks.append(text.strip("\n"))

    def flush(self) -> None:
        text = " ".join("".join(self._inline).split())
        self._inline.clear()
        if text:
            self.blocks.append(text)


class HtmlLoader(BaseLoader):
    """Load a ``.html``/``.htm`` page as one text Document (``metadata``: source, type "text", title).

    The encoding comes from the byte-order mark or the page's ``<meta charset>``, else it is
    detected.

    Example:
        >>> from mx_rag.document.loader import HtmlLoader
        >>> doc = HtmlLoader("page.html").load()[0]  # doctest: +SKIP
        >>> doc.metadata["title"]  # doctest: +SKIP
        'Release notes'
    """

    SUFFIXES = (".html", ".htm", ".xhtml")

    def _load(self) -> Iterator[Document]:
        soup = BeautifulSoup(self._read_bytes(), "html.parser")
        title = " ".join(soup.title.get_text().split()) if soup.title is not None else ""
        blocks = _Blocks()
        _walk(soup, blocks)
        blocks.flush()
        text = clean_text("\n".join(blocks.blocks))
        if text:
            metadata = {"title": title} if title else {}
            yield self._text_document(text, **metadata)


def _walk(root: Any, out: _Blocks) -> None:
    """Visit the tree in document order with an explicit stack (a page may nest 100,000 deep)."""
    children: list[Iterator[Any]] = [iter(root.children)]
    flush_after = [False]  # whether the node whose children are on the stack is a block
    while children:
        child = next(children[-1], None)
        if child is None:
            children.pop()
            if flush_after.pop():
                out.flush()
        elif isinstance(child, NavigableString):
            if not isinstance(child, _SKIP_STRINGS):
                out.add_inline(str(child))
        elif not isinstance(child, Tag) or child.name in _DROP:
            continue
        elif child.name == "table":
            out.flush()
            for row in _table_rows(child):
                out.add_block(row)
        elif child.name == "pre":
            out.add_block(child.get_text())
        else:
            block = child.name in _BLOCK
            if block:
                out.flush()
            children.append(iter(child.children))
            flush_after.append(block)


def _table_rows(table: Tag) -> Iterator[str]:
    """Rows of this table (not of nested ones), non-empty cells joined with " | "."""
    for row in table.find_all("tr"):
        if row.find_parent("table") is not table:
            continue
        cells = [" ".join(cell.get_text(" ").split()) for cell in row.find_all(["td", "th"], recursive=False)]
        cells = [cell for cell in cells if cell]
        if cells:
            yield " | ".join(cells)
