# SPDX-License-Identifier: Apache-2.0
"""``MarkdownTextSplitter``: Markdown chunks that follow the headers and carry them along.

A text longer than ``chunk_size`` is cut into sections at headers of level 1 to ``header_level``
(``#`` lines inside fenced code are not headers). Neighbouring sections are merged while they fit
in ``chunk_size``; a merged chunk keeps the headers its sections share (from the top level down to
the first level where they differ). A section still longer than ``chunk_size`` is split further:
fenced code blocks and tables stay whole, prose goes through ``RecursiveCharacterTextSplitter``, and
every piece is prefixed with the section's headers. So a chunk can exceed ``chunk_size`` by its
header lines, or by a code block or table that is longer on its own.

>>> splitter = MarkdownTextSplitter(chunk_size=40, chunk_overlap=0, header_level=2)
>>> splitter.split_text("# Guide\\n## Install\\nRun pip install mxrag.\\n## Use\\nCall mxrag ask.")
['# Guide\\n## Install\\nRun pip install mxrag.', '# Guide\\n## Use\\nCall mxrag ask.']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_int, check_str
from mx_rag.utils.common import MB

__all__ = ["MarkdownTextSplitter"]

MAX_TEXT_LENGTH = 100 * MB
MAX_HEADER_LEVEL = 6
SEPARATORS = ("\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", " ", "")

_HEADER = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")


@dataclass
class _Section:
    headers: list[tuple[int, str]]  # (level, title), outermost first
    body: str

    def render(self) -> str:
        lines = ["#" * level + " " + title for level, title in self.headers]
        if self.body:
            lines.append(self.body)
        return "\n".join(lines)


def _common_headers(a: list[tuple[int, str]], b: list[tuple[int, str]]) -> list[tuple[int, str]]:
    kept = []
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        kept.append(left)
    return kept


class MarkdownTextSplitter(RecursiveCharacterTextSplitter):
    """Splits Markdown at headers, merges small sections and carries the headers into each chunk.

    Args:
        chunk_size: target chunk length in characters, at least 1 (default 1000).
        chunk_overlap: overlap of pieces cut from one long section, 0 to ``chunk_size - 1`` (default 50).
        header_level: deepest header level that starts a section, 0 to 6 (default 3; 0: no header
            splitting, the text is split as plain prose).
        **kwargs: passed on to ``RecursiveCharacterTextSplitter`` (``separators``, ``length_function``...).
            Default separators: paragraphs, lines, then Chinese and English sentence ends
            (``SEPARATORS``, kept at the end of each piece), then commas and spaces.

    Raises:
        ParameterError: an argument is out of range, or a text is longer than 100 MiB.
    """

    def __init__(self, chunk_size: int = 1000, chunk_overlap: int = 50, header_level: int = 3, **kwargs: Any) -> None:
        check_int("chunk_size", chunk_size, 1, MAX_TEXT_LENGTH)
        check_int("chunk_overlap", chunk_overlap, 0, MAX_TEXT_LENGTH)
        if chunk_overlap >= chunk_size:
            raise ParameterError(f"chunk_overlap must be smaller than chunk_size ({chunk_size}), got {chunk_overlap}")
        self.header_level = check_int("header_level", header_level, 0, MAX_HEADER_LEVEL)
        if "separators" not in kwargs:  # sentence ends of Chinese and English before spaces
            kwargs.setdefault("keep_separator", "end")
            kwargs["separators"] = list(SEPARATORS)
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, **kwargs)

    def split_text(self, text: str) -> list[str]:
        """The chunks of ``text`` (returned whole when it fits in ``chunk_size``)."""
        check_str("text", text, 0, MAX_TEXT_LENGTH)
        if not text.strip():
            return []
        if self._length_function(text) <= self._chunk_size:
            return [text]
        chunks: list[str] = []
        for section in self._merge(self._sections(text)):
            if self._length_function(section.render()) <= self._chunk_size:
                chunks.append(section.render())
            else:
                chunks.extend(_Section(section.headers, piece).render() for piece in self._split_body(section.body))
        return [chunk for chunk in chunks if chunk.strip()]

    # -- sections ------------------------------------------------------------------------------

    def _sections(self, text: str) -> list[_Section]:
        sections: list[_Section] = []
        headers: list[tuple[int, str]] = []
        lines: list[str] = []
        fence = ""

        def close() -> None:
            body = "\n".join(lines).strip("\n")
            if body.strip():  # a header with no text of its own lives on in the next section's headers
                sections.append(_Section(list(headers), body))
            lines.clear()

        for line in text.splitlines():
            fence_match = _FENCE.match(line)
            if fence_match and (not fence or fence_match.group(1)[0] == fence[0]):
                fence = "" if fence else fence_match.group(1)
            header = None if fence else _HEADER.match(line)
            if header and len(header.group(1)) <= self.header_level:
                close()
                level = len(header.group(1))
                headers = [h for h in headers if h[0] < level] + [(level, header.group(2).strip())]
            else:
                lines.append(line)
        close()
        return sections

    def _merge(self, sections: list[_Section]) -> list[_Section]:
        merged: list[_Section] = []
        tail: list[tuple[int, str]] = []  # the headers of the last section merged into merged[-1]
        for section in sections:
            if merged:
                last = merged[-1]
                headers = _common_headers(last.headers, section.headers)
                before = _Section(last.headers[len(headers):], last.body).render()
                shared = len(_common_headers(tail, section.headers))
                after = _Section(section.headers[max(shared, len(headers)):], section.body).render()
                candidate = _Section(headers, "\n".join(p for p in (before, after) if p))
                if self._length_function(candidate.render()) <= self._chunk_size:
                    merged[-1] = candidate
                    tail = section.headers
                    continue
            merged.append(section)
            tail = section.headers
        return merged

    # -- long sections -------------------------------------------------------------------------

    def _split_body(self, body: str) -> list[str]:
        """Code fences and tables whole, prose split recursively; then packed up to ``chunk_size``."""
        pieces: list[str] = []
        for block, protected in self._blocks(body):
            if protected:
                pieces.append(block)
            elif block.strip():
                pieces.extend(super().split_text(block))
        packed: list[str] = []
        for piece in pieces:
            if packed and self._length_function(packed[-1] + "\n" + piece) <= self._chunk_size:
                packed[-1] += "\n" + piece
            else:
                packed.append(piece)
        return packed

    @staticmethod
    def _blocks(body: str) -> list[tuple[str, bool]]:
        blocks: list[tuple[str, bool]] = []
        prose: list[str] = []
        lines = body.splitlines()
        i = 0

        def flush() -> None:
            if prose:
                blocks.append(("\n".join(prose), False))
                prose.clear()

        while i < len(lines):
            fence = _FENCE.match(lines[i])
            if fence:
                end = i + 1
                while end < len(lines) and not lines[end].lstrip().startswith(fence.group(1)):
                    end += 1
                flush()
                blocks.append(("\n".join(lines[i:end + 1]), True))
                i = end + 1
            elif _TABLE_ROW.match(lines[i]):
                end = i
                while end < len(lines) and _TABLE_ROW.match(lines[end]):
                    end += 1
                flush()
                blocks.append(("\n".join(lines[i:end]), True))
                i = end
            else:
                prose.append(lines[i])
                i += 1
        flush()
        return blocks
