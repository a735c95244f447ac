# SPDX-License-Identifier: Apache-2.0
"""Ruled tables on PDF pages that have a text layer, as Markdown tables.

``page_tables(page)`` finds the tables of one ``pypdfium2`` page from its ruling lines and the
boxes of its characters:

* thin drawn lines (path objects at most ``RULE_THICKNESS`` points thick) are the rules; pieces of
  one rule cut at column borders are joined;
* horizontal rules with the same ends (a shorter one may lie just below another: a rule under a
  spanning header) that follow each other down the page form a candidate table, from its top
  rule to its bottom rule; rules above it (a note's box, a heading's underline) are tried away;
* the columns are the vertical bands that no text of the rows below the first rule crosses
  (and the table's vertical rules); a candidate is no table when it has fewer than two columns
  with words, when two of its columns read as running text (long, distinct lines as wide as the
  column: two columns of prose, a paragraph cut by a chance gap), or when the text above its
  first inner rule is no header (more than 3 lines, long, across the columns, or out of line
  with the body's columns and pieces);
* the rows: the band above the first inner rule is the header (its lines joined per column); when
  every row has rules between, each band is a row; otherwise each text line is a row, and a line
  whose first cell is empty continues the row above (a wrapped cell);
* tables stacked with the same header (a caption between) are one candidate cut into tables at
  each repeated header, the band before it kept as lines of text.

``PdfLoader`` puts each table in place of the lines of pypdf's text that hold its characters
(``pdf_loader.splice_tables``).
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from typing import Any

from mx_rag.document.loader._layout import Line, join_words, markdown_table, text_rows

__all__ = ["Table", "page_tables"]

RULE_THICKNESS = 3.0   # points: a path object at most this thick (and 4 times as long) is a rule
MIN_RULE = 8.0         # points a rule is at least long
RULE_SLACK = 2.0       # points the ends of one table's full rules differ at most
MAX_LEADING_RULES = 6  # rules above a table (of notes, headings) tried away at most
MIN_RULES = 3          # horizontal rules of a table (top, below the header, bottom) at least
PIECE_GAP = 0.7        # font sizes: a wider gap on a line separates two pieces of text
MIN_GUTTER = 0.3       # font sizes a column gutter is at least wide
PARTIAL_GAP = 40.0     # points below the last rule a shorter rule inside the table's extent may lie
MAX_HEADER_LINES = 3   # text lines of a header band at most (more: prose above the table) ...
MAX_HEADER_CHARS = 30  # ... and characters of a header cell's line
HEADER_COVER = 0.75    # share of the table's width one line of a header covers at most (more: running text)
SPAN_CHARS = 12        # characters of a header's piece across a column border at most
PROSE_CHARS = 20       # characters of a line of running text at least


@dataclass
class Table:
    """A table found on a page: its box (top-left origin) and its cells, the header row first."""

    x0: float
    y0: float
    x1: float
    y1: float
    blocks: list[list[list[str]] | str]  # grids (header row first), and lines of text between them

    @property
    def markdown(self) -> str:
        return "\n".join(markdown_table(block) if isinstance(block, list) else block for block in self.blocks)

    @property
    def cells(self) -> list[str]:
        """Every cell's text and every line between the grids."""
        return [cell for block in self.blocks for cell in (
            [cell for row in block for cell in row] if isinstance(block, list) else [block])]


@dataclass
class _Rule:
    x0: float
    x1: float
    y: float


def page_tables(page: Any) -> list[Table]:
    """The ruled tables of a ``pypdfium2.PdfPage``, top to bottom (left to right when side by side)."""
    height = page.get_size()[1]
    across, down = _rules(page, height)
    if len(across) < MIN_RULES:
        return []
    pieces = _pieces(page, height)
    tables = []
    for group in _groups(across, height):
        # rules above the table (a box around a note, a heading's underline) or one below may join it
        starts = range(min(MAX_LEADING_RULES, len(group) - MIN_RULES) + 1)
        tries = (group[start:end] for start in starts for end in (None, -1))
        for trimmed in tries:
            table = _table(trimmed, down, pieces) if len(trimmed) >= MIN_RULES else None
            if table is not None:
                tables.append(table)
                break
    return sorted(tables, key=lambda table: (round(table.y0), table.x0))


def _rules(page: Any, height: float) -> tuple[list[_Rule], list[_Rule]]:
    """Horizontal rules (x0, x1, y) and vertical ones (y0, y1, x) of the page, collinear pieces joined."""
    import pypdfium2.raw as pdfium_c

    across: list[_Rule] = []
    down: list[_Rule] = []
    for obj in page.get_objects(max_depth=1):
        if obj.type != pdfium_c.FPDF_PAGEOBJ_PATH:
            continue
        left, bottom, right, top = obj.get_bounds()
        wide, tall = right - left, top - bottom
        if tall <= RULE_THICKNESS and wide >= max(MIN_RULE, 4 * tall):
            across.append(_Rule(left, right, height - (top + bottom) / 2))
        elif wide <= RULE_THICKNESS and tall >= max(MIN_RULE, 4 * wide):
            down.append(_Rule(height - top, height - bottom, (left + right) / 2))
    return _joined(across), _joined(down)


def _joined(rules: list[_Rule]) -> list[_Rule]:
    joined: list[_Rule] = []
    for rule in sorted(rules, key=lambda item: (round(item.y), item.x0)):
        last = joined[-1] if joined else None
        if last is not None and abs(rule.y - last.y) <= 1.5 and rule.x0 <= last.x1 + 3:
            last.x1 = max(last.x1, rule.x1)
        else:
            joined.append(_Rule(rule.x0, rule.x1, rule.y))
    return joined


def _groups(across: list[_Rule], height: float) -> list[list[_Rule]]:
    """Horizontal rules grouped into candidate tables, down the page: a rule joins a group whose
    extent it has (or, close below the last rule, lies within: a rule under a spanning header)."""
    groups: list[list[_Rule]] = []
    for rule in sorted(across, key=lambda item: item.y):
        for group in groups:
            x0, x1 = group[0].x0, group[0].x1
            shared = min(x1, rule.x1) - max(x0, rule.x0)
            gap = rule.y - group[-1].y
            slack = RULE_SLACK
            full = abs(rule.x0 - x0) <= slack and abs(rule.x1 - x1) <= slack
            if gap <= height / 2 and (full or (shared >= 0.9 * (rule.x1 - rule.x0) and gap <= PARTIAL_GAP)):
                group.append(rule)
                break
        else:
            groups.append([rule])
    for group in groups:  # a table ends at a rule as wide as its top one
        while len(group) > 1 and group[-1].x1 - group[-1].x0 < 0.95 * (group[0].x1 - group[0].x0):
            group.pop()
    return [group for group in groups if len(group) >= MIN_RULES]


def _pieces(page: Any, height: float) -> list[tuple[Line, float]]:
    """The page's text as pieces (runs of words on one line) with their font size."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    textpage = page.get_textpage()
    try:
        raw = textpage.raw
        count = pdfium_c.FPDFText_CountChars(raw)
        box = pdfium_c.FS_RECTF()
        words: list[tuple[Line, float]] = []
        current: list[Any] = []  # [x0, y0, x1, y1, text, size]
        for index in range(count):
            char = chr(pdfium_c.FPDFText_GetUnicode(raw, index))
            if char == "\x02":  # PDFium's mark for a hyphen that ends a line
                char = "-"
            elif not char.isprintable() and not char.isspace():
                char = "\ufffd"  # a glyph without a Unicode mapping: shown, not dropped (a minus sign)
            if char.isspace() or not pdfium_c.FPDFText_GetLooseCharBox(raw, index, ctypes.byref(box)):
                current = _flush_word(current, words)
                continue
            left, right, bottom, top = box.left, box.right, min(box.bottom, box.top), max(box.bottom, box.top)
            size = max(1.0, top - bottom)
            y0, y1 = height - top, height - bottom
            if current and (not _same_line(y0, y1, current[1], current[3])
                            or left < current[2] - 0.5 * size or left - current[2] > 0.5 * size):
                current = _flush_word(current, words)
            if current:
                current[0], current[2] = min(current[0], left), max(current[2], right)
                current[1], current[3] = min(current[1], y0), max(current[3], y1)
                current[4] += char
            else:
                current = [left, y0, right, y1, char, size]
        _flush_word(current, words)
    finally:
        textpage.close()
    return _merged(words)


def _same_line(top: float, bottom: float, other_top: float, other_bottom: float) -> bool:
    """Whether two boxes are on one line: the middle of either lies within the other (a superscript too)."""
    return other_top < (top + bottom) / 2 < other_bottom or top < (other_top + other_bottom) / 2 < bottom


def _flush_word(current: list[Any], words: list[tuple[Line, float]]) -> list[Any]:
    if current:
        words.append((Line(current[0], current[1], current[2], current[3], current[4]), current[5]))
    return []


def _merged(words: list[tuple[Line, float]]) -> list[tuple[Line, float]]:
    """Words on one line joined into pieces where the gap is under ``PIECE_GAP`` font sizes."""
    pieces: list[tuple[Line, float]] = []
    for word, size in sorted(words, key=lambda item: (round(item[0].middle / max(1.0, item[1] / 2)), item[0].x0)):
        if pieces:
            last, last_size = pieces[-1]
            same_line = _same_line(word.y0, word.y1, last.y0, last.y1)
            if same_line and 0 <= word.x0 - last.x1 < PIECE_GAP * max(size, last_size):
                last.text = f"{last.text} {word.text}"
                last.x1, last.y0, last.y1 = word.x1, min(last.y0, word.y0), max(last.y1, word.y1)
                continue
        pieces.append((Line(word.x0, word.y0, word.x1, word.y1, word.text), size))
    return pieces


def _table(group: list[_Rule], down: list[_Rule], pieces: list[tuple[Line, float]]) -> Table | None:
    """The table between a group's first and last rule, or None when its text has no columns.

    Tables stacked with the same header (one under the other, a caption between) are found as
    one group: each becomes its own grid, and the band before a repeated header is text."""
    x0, x1 = min(rule.x0 for rule in group) - 2, max(rule.x1 for rule in group) + 2
    y0, y1 = group[0].y, group[-1].y
    inside = [(piece, size) for piece, size in pieces
              if y0 < piece.middle < y1 and piece.x0 < x1 and piece.x1 > x0]
    if not inside:
        return None
    borders = [rule.y for rule in group]
    bands: list[list[tuple[Line, float]]] = [[] for _ in borders[1:]]
    for piece, size in inside:
        index = next(i for i, bottom in enumerate(borders[1:]) if piece.middle < bottom)
        bands[index].append((piece, size))
    bands = [band for band in bands if band]
    down = [rule for rule in down if x0 < rule.y < x1 and rule.x0 < y1 and rule.x1 > y0]
    heads = [0, *(k for k in range(2, len(bands)) if _words(bands[k]) == _words(bands[0]))]
    blocks: list[list[list[str]] | str] = []
    for number, head in enumerate(heads):
        last = heads[number + 1] - 1 if number + 1 < len(heads) else len(bands)
        grid = _grid(bands[head:last], down)
        if grid is None:
            return None
        blocks.append(grid)
        if last < len(bands):
            blocks.extend(piece.text for piece in _rows_flat(bands[last]))
    return Table(x0, y0, x1, y1, blocks)


def _words(band: list[tuple[Line, float]]) -> str:
    return " ".join(piece.text for piece in _rows_flat(band))


def _rows_flat(band: list[tuple[Line, float]]) -> list[Line]:
    """A band's lines, top to bottom, each one Line with its pieces' text joined."""
    return [Line(row[0].x0, row[0].y0, row[-1].x1, row[-1].y1, " ".join(piece.text for piece in row))
            for row in text_rows([piece for piece, _ in band])]


def _grid(bands: list[list[tuple[Line, float]]], down: list[_Rule]) -> list[list[str]] | None:
    """The cells of one table's bands (header band first when there are several), or None."""
    body = [item for band in bands[1:] for item in band] if len(bands) > 1 else bands[0]
    columns = _columns(body, down)
    if len(columns) < 2:
        return None
    placed = [_lines(band, columns) for band in bands]
    if _prose(placed, columns) or (len(bands) > 1 and _not_header(placed, bands, columns)):
        return None
    texts = [[[text for text, _, _ in cells] for cells in lines] for lines in placed]
    gridded = len(bands) >= 3 and statistics.median(len(lines) for lines in texts[1:]) <= 3
    grid = [_joined_cells(texts[0])] if len(bands) > 1 else []
    for lines in texts[1:] if grid else texts:
        grid.extend(_rows_of(lines, gridded))
    return _without_empty_columns(grid) if _valid(grid, len(columns)) else None


def _rows_of(lines: list[list[str]], gridded: bool) -> list[list[str]]:
    """The rows of a band: one when rules part every row; else a row per line, where a line
    whose first cell is empty continues the row above (a wrapped cell)."""
    if gridded:
        return [_joined_cells(lines)]
    rows: list[list[str]] = []
    for cells in lines:
        if rows and not cells[0]:
            rows[-1] = _joined_cells([rows[-1], cells])
        else:
            rows.append(cells)
    return rows


def _valid(grid: list[list[str]], width: int) -> bool:
    """Two rows or more with two cells filled, and two columns with words: a column of bullets or
    numbers beside one of text is a list."""
    if len(grid) < 2 or sum(1 for row in grid if sum(1 for cell in row if cell) >= 2) < 2:
        return False
    worded = [index for index in range(width) if any(any(c.isalnum() for c in row[index]) for row in grid)]
    return len(worded) >= 2


def _without_empty_columns(grid: list[list[str]]) -> list[list[str]]:
    keep = [index for index in range(len(grid[0])) if any(row[index] for row in grid)]
    return [[row[index] for index in keep] for row in grid]


def _columns(body: list[tuple[Line, float]], down: list[_Rule]) -> list[tuple[float, float]]:
    """Column extents: cut at the gaps that no piece of the body covers and at vertical rules."""
    size = statistics.median(size for _, size in body)
    spans = sorted((piece.x0, piece.x1) for piece, _ in body)
    cuts: list[float] = []
    gaps: list[tuple[float, float]] = []
    reach = spans[0][1]
    for start, end in spans[1:]:
        if start - reach >= MIN_GUTTER * size:
            cuts.append((start + reach) / 2)
            gaps.append((reach, start))
        reach = max(reach, end)
    left, right = spans[0][0], reach
    for rule in down:  # a vertical rule that no piece crosses, away from the gutters found
        if (left < rule.y < right and not any(low - size <= rule.y <= high + size for low, high in gaps)
                and not any(piece.x0 < rule.y < piece.x1 for piece, _ in body)):
            cuts.append(rule.y)
    edges = [left - 1, *sorted(cuts), right + 1]
    return list(itertools.pairwise(edges))


def _lines(band: list[tuple[Line, float]], columns: list[tuple[float, float]]) -> list[list[tuple[str, float, float]]]:
    """A band's text lines, top to bottom, each as (text, x0, x1) per column ("" where empty)."""
    lines = []
    for row in text_rows([piece for piece, _ in band]):
        cells: list[tuple[str, float, float]] = [("", 0.0, 0.0)] * len(columns)
        for piece in row:
            index = _column(piece, columns)
            text, x0, _ = cells[index]
            cells[index] = (f"{text} {piece.text}", x0, piece.x1) if text else (piece.text, piece.x0, piece.x1)
        lines.append(cells)
    return lines


def _not_header(placed: list[list[list[tuple[str, float, float]]]], bands: list[list[tuple[Line, float]]],
                columns: list[tuple[float, float]]) -> bool:
    """Whether the text above a table's first inner rule is more than a header: a paragraph, a
    heading, a line of running text across the columns. A header's pieces line up with the body's
    columns or pieces (left, right or centred; one spanning columns is short)."""
    lines, band = placed[0], bands[0]
    body = [item for other in bands[1:] for item in other]
    if len(lines) > MAX_HEADER_LINES or any(len(text) > MAX_HEADER_CHARS for cells in lines for text, _, _ in cells):
        return True
    width = columns[-1][1] - columns[0][0]
    if any(sum(piece.x1 - piece.x0 for piece in row) > HEADER_COVER * width for row in text_rows([p for p, _ in band])):
        return True
    edges = []
    for index in range(len(columns)):
        filled = [cells[index] for body in placed[1:] for cells in body if cells[index][0]]
        edges.append((min(x0 for _, x0, _ in filled), max(x1 for _, _, x1 in filled)) if filled else columns[index])
    for piece, size in band:
        spanned = [i for i, (left, right) in enumerate(edges) if piece.x0 < right - size and piece.x1 > left + size]
        if len(spanned) > 1:
            if len(piece.text) > SPAN_CHARS:
                return True
            continue
        left, right = edges[_column(piece, columns)]
        slack = 1.5 * size
        if not (abs(piece.x0 - left) < slack or abs(piece.x1 - right) < slack
                or abs((piece.x0 + piece.x1) / 2 - (left + right) / 2) < slack
                or any(abs(piece.x0 - other.x0) < slack or abs(piece.x1 - other.x1) < slack for other, _ in body)):
            return True
    return False


def _prose(bands: list[list[list[tuple[str, float, float]]]], columns: list[tuple[float, float]]) -> bool:
    """Whether two or more columns read as running text: most of their lines long and as wide as
    the column (a justified paragraph cut by a chance gap between words, or two columns of prose)."""
    lines = [cells for band in bands for cells in band]
    full_columns = 0
    for index in range(len(columns)):
        filled = [cells[index] for cells in lines if cells[index][0]]
        if len(filled) < 2:
            continue
        left, right = min(x0 for _, x0, _ in filled), max(x1 for _, _, x1 in filled)
        distinct = {text for text, _, _ in filled}  # a table repeats values; running text does not
        full = sum(1 for text, x0, x1 in filled
                   if len(text) >= PROSE_CHARS and x1 - x0 >= 0.85 * (right - left) and text in distinct)
        full = full if len(distinct) == len(filled) else 0
        full_columns += full >= 0.6 * len(filled)
    return full_columns >= 2


def _column(piece: Line, columns: list[tuple[float, float]]) -> int:
    overlaps = [min(piece.x1, right) - max(piece.x0, left) for left, right in columns]
    return max(range(len(columns)), key=overlaps.__getitem__)


def _joined_cells(lines: list[list[str]]) -> list[str]:
    """Lines of one row joined per column (a wrapped cell's lines become one cell)."""
    joined = [""] * len(lines[0])
    for cells in lines:
        for index, cell in enumerate(cells):
            if cell:
                joined[index] = join_words(joined[index], cell) if joined[index] else cell
    return joined
