# SPDX-License-Identifier: Apache-2.0
"""Scanned-looking pages made from text, for OCR tests and benchmarks (Pillow only).

``render_page(blocks, dpi=200)`` draws an A4 page: each block is a paragraph (wrapped), a
``Columns`` pair (two columns side by side) or a ``Table`` (ruled grid, first row as header).
``save_image_pdf(pages, path)`` writes pages as an image-only PDF (no text layer), as a scanner
does. ``cer(expected, got)`` is the character error rate, blanks ignored. ``find_font(cjk=True)``
finds a font on the system that draws Chinese (Debian's fonts-wqy-microhei or fonts-noto-cjk);
None when there is none.

Example:
    >>> from mx_rag.testing.scans import render_page, save_image_pdf
    >>> page = render_page(["Invoice 42 is due on 1 March."])  # doctest: +SKIP
    >>> save_image_pdf([page.rotate(90, expand=True)], "scan.pdf")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

__all__ = ["Columns", "Table", "cer", "find_font", "render_page", "save_image_pdf"]

_CJK_FONTS = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
)
_LATIN_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
)


@dataclass
class Columns:
    """Two columns of paragraphs side by side."""

    left: list[str]
    right: list[str]


@dataclass
class Table:
    """A ruled table; the first row is the header."""

    rows: list[list[str]]


def find_font(cjk: bool = True) -> str | None:
    """A TrueType font file that draws Chinese (``cjk``) or Latin text; None when none is installed."""
    for candidate in _CJK_FONTS if cjk else _LATIN_FONTS + _CJK_FONTS:
        if os.path.isfile(candidate):
            return candidate
    return None


def render_page(blocks: Sequence[str | Columns | Table], *, dpi: int = 200, font_pt: float = 11,
                font_path: str | None = None) -> Image.Image:
    """An A4 page (white, black text) at ``dpi`` with the blocks drawn top to bottom."""
    path = font_path or find_font(cjk=True) or find_font(cjk=False)
    if path is None:
        raise FileNotFoundError("no TrueType font found: install fonts-wqy-microhei (Debian)")
    width, height = round(8.27 * dpi), round(11.69 * dpi)
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(path, round(font_pt * dpi / 72))
    margin = round(0.9 * dpi)
    leading = round(font.size * 1.6)
    y = margin
    for block in blocks:
        if isinstance(block, Columns):
            gap = round(0.35 * dpi)
            column = (width - 2 * margin - gap) // 2
            bottom_left = _paragraphs(draw, block.left, font, margin, y, column, leading)
            bottom_right = _paragraphs(draw, block.right, font, margin + column + gap, y, column, leading)
            y = max(bottom_left, bottom_right)
        elif isinstance(block, Table):
            y = _table(draw, block.rows, font, margin, y, width - 2 * margin, leading)
        else:
            y = _paragraphs(draw, [block], font, margin, y, width - 2 * margin, leading)
        y += leading
    return page


def _wrap(draw: ImageDraw.ImageDraw, text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    """Lines of at most ``width`` pixels: broken at spaces, or anywhere in text without spaces."""
    lines: list[str] = []
    current = ""
    tokens = text.split(" ") if " " in text else list(text)
    joiner = " " if " " in text else ""
    for token in tokens:
        trial = f"{current}{joiner}{token}" if current else token
        if draw.textlength(trial, font=font) <= width:
            current = trial
        else:
            if current:
                lines.append(current)
            current = token
    if current:
        lines.append(current)
    return lines


def _paragraphs(draw: ImageDraw.ImageDraw, paragraphs: list[str], font: ImageFont.FreeTypeFont, x: int, y: int,
                width: int, leading: int) -> int:
    for index, paragraph in enumerate(paragraphs):
        if index:
            y += leading // 2
        for line in _wrap(draw, paragraph, font, width):
            draw.text((x, y), line, fill=0, font=font)
            y += leading
    return y


def _table(draw: ImageDraw.ImageDraw, rows: list[list[str]], font: ImageFont.FreeTypeFont, x: int, y: int,
           width: int, leading: int) -> int:
    columns = max(len(row) for row in rows)
    cell = width // columns
    pad = leading // 3
    height = leading + 2 * pad
    for r, row in enumerate(rows):
        for c in range(columns):
            left, top = x + c * cell, y + r * height
            draw.rectangle((left, top, left + cell, top + height), outline=0, width=2)
            if c < len(row):
                draw.text((left + pad, top + pad), row[c], fill=0, font=font)
    return y + len(rows) * height


def save_image_pdf(pages: Sequence[Image.Image], path: str | os.PathLike[str], *, dpi: int = 200) -> Path:
    """Write ``pages`` as a PDF whose pages are images only (no text layer)."""
    target = Path(path)
    first, *rest = [page.convert("RGB") for page in pages]
    first.save(target, "PDF", resolution=float(dpi), save_all=True, append_images=rest)
    return target


def cer(expected: str, got: str) -> float:
    """Character error rate: edit distance / length of ``expected``, whitespace and the Markdown
    table rules ("|", "---") ignored on both sides, full-width punctuation folded to ASCII."""
    a, b = _normal(expected), _normal(got)
    if not a:
        return float(bool(b))
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, other in enumerate(b, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
        previous = current
    return previous[-1] / len(a)


_FOLD = str.maketrans({"，": ",", "。": ".", "：": ":", "；": ";", "（": "(", "）": ")", "！": "!", "？": "?",
                       "“": '"', "”": '"', "‘": "'", "’": "'", "|": None, "-": None})


def _normal(text: str) -> str:
    return "".join(text.translate(_FOLD).split())
