# SPDX-License-Identifier: Apache-2.0
"""Layout of recognized text lines: reading order, columns, tables, running headers and footers.

``page_text(lines, width)`` turns the boxed lines of one page into text:

* lines whose vertical middles fall within half a line height of each other form a row; a row's
  pieces are joined left to right;
* a page whose lines leave a vertical gutter near the middle is read as two columns: the left
  column, then the right, section by section (a title spanning both columns starts a section);
* two or more consecutive rows cut into the same columns by wide gaps are a table, written as a
  Markdown table (first row as header) so that a cell keeps its row and column names; unless two
  of its columns are running text (long, distinct lines: a two-column passage the gutter test
  missed), which is read column by column.

``drop_running_lines(pages)`` removes, from a document's pages, the first and last lines that
repeat on most pages (running headers and footers, page numbers) and returns the printed page
labels it found. ``split_tables(text, chunk_size)`` cuts a text around its Markdown tables so that
the splitter never breaks one: each table stays whole with its caption, or is cut between rows with
its header repeated.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass

__all__ = [
    "Line",
    "drop_running_lines",
    "join_words",
    "markdown_table",
    "page_text",
    "read_markdown_tables",
    "split_tables",
    "text_rows",
]

_CJK = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
_PAGE_NUMBER = re.compile(r"^\W*(?:page|p\.|第)?\s*(\d{1,5})\s*(?:页|/\s*\d+|of\s+\d+)?\W*$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
MIN_REPEAT_PAGES = 3       # a running line must appear on at least this many pages ...
REPEAT_SHARE = 0.6         # ... and on this share of them
CELL_GAP = 1.8             # a gap wider than this many line heights separates table cells
GUTTER_MIN = 0.3           # the column gutter lies between these shares of the page width
GUTTER_MAX = 0.7
GUTTER_WIDTH = 0.015       # share of the page width the gutter is at least
PROSE_CHARS = 20           # characters of most cells of a column of running text at least
COLUMN_LINE_WIDTH = 0.2    # share of the page width the median line of a text column is at least


@dataclass
class Line:
    """A piece of text and its box (x0, y0 top left; x1, y1 bottom right) on the page."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    @property
    def height(self) -> float:
        return max(1.0, self.y1 - self.y0)

    @property
    def middle(self) -> float:
        return (self.y0 + self.y1) / 2


def page_text(lines: list[Line], width: float) -> str:
    """The page's text in reading order, tables as Markdown (see the module docstring)."""
    if not lines:
        return ""
    blocks: list[str] = []
    for section in _sections(lines, width):
        blocks.extend(_text_of_rows(text_rows(section)))
    return "\n".join(blocks).strip()


def _sections(lines: list[Line], width: float) -> list[list[Line]]:
    """The page cut into the order to read it: one list for a one-column page; else per band of
    the page, the left column's lines then the right column's."""
    gutter = _gutter(lines, width)
    if gutter is None:
        return [lines]
    left_edge, right_edge = gutter
    ordered = sorted(lines, key=lambda line: line.y0)
    sections: list[list[Line]] = []
    left: list[Line] = []
    right: list[Line] = []
    for line in ordered:
        if line.x0 < left_edge and line.x1 > right_edge:  # spans the gutter: a title, a wide figure caption
            sections.extend(part for part in (left, right) if part)
            sections.append([line])
            left, right = [], []
        elif line.x1 <= right_edge:
            left.append(line)
        else:
            right.append(line)
    sections.extend(part for part in (left, right) if part)
    return sections


def _gutter(lines: list[Line], width: float) -> tuple[float, float] | None:
    """The (left, right) edges of an empty vertical band near the middle that lines of both
    columns border, or None for a one-column page."""
    if width <= 0 or len(lines) < 6:
        return None
    narrow = [line for line in lines if (line.x1 - line.x0) < 0.55 * width]
    if len(narrow) < 6:
        return None
    steps = 200
    covered = [0] * steps
    for line in narrow:
        for i in range(max(0, int(line.x0 / width * steps)), min(steps, int(line.x1 / width * steps) + 1)):
            covered[i] += 1
    best: tuple[int, int] | None = None
    start = None
    for i in range(int(GUTTER_MIN * steps), int(GUTTER_MAX * steps) + 1):
        if covered[i] == 0 and start is None:
            start = i
        if (covered[i] != 0 or i == int(GUTTER_MAX * steps)) and start is not None:
            if best is None or i - start > best[1] - best[0]:
                best = (start, i)
            start = None
    if best is None or (best[1] - best[0]) / steps < GUTTER_WIDTH:
        return None
    left_edge, right_edge = best[0] / steps * width, best[1] / steps * width
    on_left = sum(1 for line in narrow if line.x1 <= left_edge)
    on_right = sum(1 for line in narrow if line.x0 >= right_edge)
    if on_left < 3 or on_right < 3:
        return None
    # columns of running text are wide lines; a table's gaps between short cells are no gutter
    left_widths = [line.x1 - line.x0 for line in narrow if line.x1 <= left_edge]
    right_widths = [line.x1 - line.x0 for line in narrow if line.x0 >= right_edge]
    if min(statistics.median(left_widths), statistics.median(right_widths)) < COLUMN_LINE_WIDTH * width:
        return None
    return left_edge, right_edge


def text_rows(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into rows (top to bottom), each row left to right."""
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda item: item.middle):
        if rows:
            row = rows[-1]
            middle = statistics.fmean(item.middle for item in row)
            height = statistics.fmean(item.height for item in row)
            if abs(line.middle - middle) < 0.5 * min(height, line.height):
                row.append(line)
                continue
        rows.append([line])
    return [sorted(row, key=lambda item: item.x0) for row in rows]


def _cells(row: list[Line]) -> list[Line]:
    """A row's pieces merged where the gap between them is narrow (words of one cell)."""
    height = statistics.median(item.height for item in row)
    merged = [Line(row[0].x0, row[0].y0, row[0].x1, row[0].y1, row[0].text)]
    for item in row[1:]:
        last = merged[-1]
        if item.x0 - last.x1 < CELL_GAP * height:
            last.text = join_words(last.text, item.text)
            last.x1, last.y0, last.y1 = max(last.x1, item.x1), min(last.y0, item.y0), max(last.y1, item.y1)
        else:
            merged.append(Line(item.x0, item.y0, item.x1, item.y1, item.text))
    return merged


def join_words(left: str, right: str) -> str:
    if left and right and _CJK.match(left[-1]) and _CJK.match(right[0]):
        return left + right
    return f"{left} {right}"


def _text_of_rows(rows: list[list[Line]]) -> list[str]:
    """Blocks of text: plain rows as lines, runs of two or more aligned multi-cell rows as tables."""
    blocks: list[str] = []
    run: list[list[Line]] = []
    for row in rows:
        cells = _cells(row)
        if len(cells) >= 2 and (not run or _aligned(run, cells)):
            run.append(cells)
            continue
        blocks.extend(_flush(run))
        run = [cells] if len(cells) >= 2 else []
        if len(cells) < 2:
            blocks.append(cells[0].text)
    blocks.extend(_flush(run))
    return blocks


def _aligned(run: list[list[Line]], cells: list[Line]) -> bool:
    """Whether a row's cells fall into the columns of the rows before it (a missing cell is allowed)."""
    columns = _columns(run)
    if abs(len(cells) - len(columns)) > 1 and len(cells) > len(columns):
        return False
    hits = sum(1 for cell in cells if _column_of(cell, columns) is not None)
    return hits == len(cells)


def _columns(run: list[list[Line]]) -> list[tuple[float, float]]:
    """Column extents (x0, x1) of a table: the union of overlapping cells' extents."""
    spans = sorted((cell.x0, cell.x1) for cells in run for cell in cells)
    columns: list[list[float]] = []
    for x0, x1 in spans:
        if columns and x0 <= columns[-1][1]:
            columns[-1][1] = max(columns[-1][1], x1)
        else:
            columns.append([x0, x1])
    return [(x0, x1) for x0, x1 in columns]


def _column_of(cell: Line, columns: list[tuple[float, float]]) -> int | None:
    best, overlap = None, 0.0
    for index, (x0, x1) in enumerate(columns):
        shared = min(cell.x1, x1) - max(cell.x0, x0)
        if shared > overlap:
            best, overlap = index, shared
    if best is None:  # no overlap: the nearest column by centre when it is close
        centre = (cell.x0 + cell.x1) / 2
        distances = [min(abs(centre - x0), abs(centre - x1)) for x0, x1 in columns]
        nearest = min(range(len(columns)), key=distances.__getitem__)
        return nearest if distances[nearest] < 2 * cell.height else None
    return best


def _flush(run: list[list[Line]]) -> list[str]:
    if not run:
        return []
    if len(run) == 1:
        return ["  ".join(cell.text for cell in run[0])]
    columns = _columns(run)
    grid = []
    for cells in run:
        row = [""] * len(columns)
        for cell in cells:
            index = _column_of(cell, columns)
            if index is not None:
                row[index] = join_words(row[index], cell.text).strip() if row[index] else cell.text
        grid.append(row)
    if _prose(grid):  # side-by-side columns of running text: read each column down, not a table
        return [cell for index in range(len(columns)) for row in grid for cell in row[index:index + 1] if cell]
    return [markdown_table(grid)]


def _prose(grid: list[list[str]]) -> bool:
    """Whether two or more columns of aligned rows read as running text: most of their cells are
    long (at least ``PROSE_CHARS`` characters) and none repeats, as lines of two text columns are."""
    columns = 0
    for index in range(len(grid[0])):
        cells = [row[index] for row in grid if row[index]]
        long = sum(1 for cell in cells if len(cell) >= PROSE_CHARS)
        columns += len(cells) >= 2 and long >= 0.6 * len(cells) and len(set(cells)) == len(cells)
    return columns >= 2


def markdown_table(grid: list[list[str]]) -> str:
    """A Markdown table: the first row is the header; pipes in cells are escaped."""
    width = max(len(row) for row in grid)

    def line(row: list[str]) -> str:
        cells = [" ".join(cell.split()).replace("|", "\\|") for cell in row] + [""] * (width - len(row))
        return "| " + " | ".join(cells) + " |"

    return "\n".join([line(grid[0]), "|" + " --- |" * width, *(line(row) for row in grid[1:])])


def read_markdown_tables(text: str) -> list[list[list[str]]]:
    """The Markdown tables of ``text`` as grids, the inverse of ``markdown_table``: the header row
    first, the rule line left out, escaped pipes restored."""
    tables: list[list[list[str]]] = []
    previous = False
    for line in text.splitlines():
        row = line.startswith("|") and line.endswith("|")
        if row and not set(line) <= set("|- "):
            if not previous:
                tables.append([])
            tables[-1].append([cell.strip().replace("\\|", "|") for cell in line[1:-1].split(" | ")])
        previous = row
    return tables


def drop_running_lines(pages: list[str]) -> tuple[list[str], list[str | None]]:
    """Pages without their running headers and footers, and each page's printed number.

    A page's first or last two lines are dropped when, with digits ignored, the same line starts
    or ends at least ``MIN_REPEAT_PAGES`` pages and ``REPEAT_SHARE`` of them; a first or last
    line that is only a page number ("7", "- 7 -", "Page 7 of 9", "第 7 页") is dropped as well and
    returned as that page's label.
    """
    split = [page.splitlines() for page in pages]
    counts: Counter[str] = Counter()
    for lines in split:
        counts.update({_shape(line) for line in lines[:2] + lines[-2:] if line.strip()})
    need = max(MIN_REPEAT_PAGES, REPEAT_SHARE * len(pages))
    running = {shape for shape, count in counts.items() if count >= need}
    kept_pages: list[str] = []
    labels: list[str | None] = []
    for lines in split:
        label = None
        edges = set(range(min(2, len(lines)))) | set(range(max(0, len(lines) - 2), len(lines)))
        keep = []
        for index, line in enumerate(lines):
            if index in edges and not line.startswith("|"):  # a table's row is never a running line
                number = _PAGE_NUMBER.match(line.strip()) if len(pages) > 1 else None
                if number and label is None:
                    label = number.group(1)
                    continue
                if _shape(line) in running:
                    continue
            keep.append(line)
        kept_pages.append("\n".join(keep).strip())
        labels.append(label)
    return kept_pages, labels


def _shape(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()).lower())


_TABLE = re.compile(r"^\|[^\n]*\|[ \t]*\n\|(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*(?:\n\|[^\n]*\|[ \t]*)*", re.MULTILINE)
MAX_CAPTION = 200  # characters of the line before a table taken as its caption


def split_tables(text: str, chunk_size: int) -> list[tuple[str, bool]]:
    """``text`` cut around its Markdown tables: (piece, is_table) in order.

    A table keeps the line just above it (its caption or heading, when at most 200 characters)
    and stays one piece when it fits ``chunk_size``; a longer one is cut between rows, each piece
    starting with the caption and the header row and its rule again. Other pieces are left to
    the splitter.
    """
    pieces: list[tuple[str, bool]] = []
    position = 0
    for match in _TABLE.finditer(text):
        before = text[position:match.start()].rstrip("\n")
        caption = ""
        head, _, last = before.rpartition("\n")
        if last.strip() and len(last.strip()) <= MAX_CAPTION and not last.startswith("|"):
            caption, before = last.strip(), head
        if before.strip():
            pieces.append((before, False))
        pieces.extend((chunk, True) for chunk in _table_chunks(match.group(0), caption, chunk_size))
        position = match.end()
    rest = text[position:]
    if rest.strip():
        pieces.append((rest, False))
    return pieces


def _table_chunks(table: str, caption: str, chunk_size: int) -> list[str]:
    header, rule, *rows = table.splitlines()
    top = "\n".join(part for part in (caption, header, rule) if part)
    if len(table) + len(caption) + 1 <= chunk_size or not rows:
        return [f"{caption}\n{table}" if caption else table]
    chunks: list[str] = []
    current: list[str] = []
    for row in rows:
        if current and len(top) + sum(len(r) + 1 for r in current) + len(row) + 1 > chunk_size:
            chunks.append("\n".join([top, *current]))
            current = []
        current.append(row)
    if current:
        chunks.append("\n".join([top, *current]))
    return chunks
