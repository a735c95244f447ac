# SPDX-License-Identifier: Apache-2.0
"""Benchmark the tables of text-layer PDFs: mx_rag's PdfLoader against pdfplumber, in one run.

Contenders:

* ``mx_rag``: ``PdfLoader(path).load()``, Markdown tables from ruling lines and character boxes
  (``mx_rag.document.loader._pdf_tables``), the rest of each page pypdf's text;
* ``mx_rag_no_tables``: the same loader with table detection switched off (pypdf's text only): the
  cost of the tables is the difference;
* ``pdfplumber``: what a user would pick for PDF tables: ``page.extract_tables()`` (its default,
  ruling-line strategy) and ``page.extract_text()`` per page;
* ``pdfplumber_text_columns``: the same with columns from text alignment (``vertical_strategy``
  "text") and rows from ruling lines, its setting for tables ruled only across.

Accuracy: eight tables of four files of tests/data/docs whose cells were checked by hand against the
rendered pages (``TRUTH``: a Chromium-printed page with a bordered and a three-rule table, a data
paper's numeric table, the Korean two-column brochure, two pages of the Chinese Debian Reference).
A truth table is matched to the found table that holds most of its cells at the same row and
column; ``cells_right`` is the share of truth cells found so, ``tables_right`` the tables with at least
90 % of them. ``extra_tables`` counts found tables that match no truth table (a note box, prose).

Speed: the whole Simplified Chinese Debian Reference (251 pages, ``/work/shared/data``), pages per
second, the contenders in rotating order over ``--rounds`` rounds.

Output: JSON lines (an environment line with the load average, one line per contender).
Run: ``flock /tmp/mxrag-bench.lock python bench/pdf_tables.py``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import ROOT, emit, environment, loadavg, package_version, positive_int, rotating_rounds

DOCS = ROOT / "tests" / "data" / "docs"
BOOK = Path("/work/shared/data/docs/debian-reference/debian-reference.zh-cn.pdf")
SKIP = None  # a truth cell not compared (a minus sign that has no Unicode mapping in the file)

TRUTH: dict[str, list[list[list[str | None]]]] = {
    "tables-generated.pdf": [
        [["Region", "Q1", "Q2", "Notes"],
         ["North", "120", "135", "Two new shops opened in the spring, one near the station and one by the harbour"],
         ["South", "98", "101", "Flat"], ["West", "77", "64", "The oven broke in May"]],
        [["城市", "分店数", "店长"], ["北京", "12", "王芳"], ["上海", "9", "李强"], ["广州", "7", "陈静"]],
    ],
    "embedded-images-tables.pdf": [
        [["Inhibitor concentration (g)", "bc (V/dec)", "ba (V/dec)", "Ecorr (V)", "icorr (A/cm2)",
          "Polarization resistance (Ω)", "Corrosion rate (mm/year)"],
         ["0", "0.0335", "0.0409", SKIP, "0.0003", "24.0910", "2.8163"],
         ["2", "1.9460", "0.0596", SKIP, "0.0002", "121.440", "1.5054"],
         ["4", "0.0163", "0.2369", SKIP, "0.0001", "42.121", "0.9476"],
         ["6", "0.3233", "0.0540", SKIP, "5.39E-05", "373.180", "0.4318"],
         ["8", "0.1240", "0.0556", SKIP, "5.46E-05", "305.650", "0.3772"],
         ["10", "0.0382", "0.0086", SKIP, "1.24E-05", "246.080", "0.0919"]],
    ],
    "korean-text-with-tables.pdf": [
        [["업종", "적립 대상"], ["할인점", "이마트, 이마트 트레이더스, 롯데마트, 홈플러스"], ["주유", "모든 주유소"],
         ["온라인쇼핑몰", "삼성카드 쇼핑, G마켓, 옥션, 11번가, 인터파크, 쿠팡, 티몬, 위메프"]],
        [["업종", "적립 대상"],
         ["커피전문점", "스타벅스, 투썸플레이스, 카페베네, 탐앤탐스, 커피빈, "
                        "엔제리너스, 할리스커피, 파스쿠찌, 아티제, 폴 바셋"],
         ["제과점", "파리바게뜨, 뚜레쥬르"], ["편의점", "CU, GS25, 세븐일레븐, 미니스톱"]],
    ],
    "debian-reference-zh-cn-tables.pdf": [
        [["软件包", "流行度", "大小", "说明"], ["mc", "V:54, I:226", "1482", "文本模式的全屏文件管理器"],
         ["sudo", "V:638, I:823", "5990", "给普通用户授予部分 root 权限的程序"],
         ["w3m", "V:14, I:190", "2828", "文本模式的万维网浏览器"],
         ["gpm", "V:11, I:14", "521", "Unix 风格的文本控制台复制粘贴工具（守护进程）"]],
        [["软件包", "流行度", "大小", "说明"],
         ["doc-debian", "I:853", "166", "Debian 项目文档，（Debian 常见问题）和其它文档"],
         ["debian-policy", "I:21", "4379", "Debian 策略手册和相关文档"],
         ["developers-reference", "V:0, I:6", "2051", "Debian 开发者指导方针和信息"],
         ["debian-faq", "I:850", "790", "Debian 常见问题"]],
        [["快捷键", "描述"], ["Ctrl-U", "删除光标前到行首的字符"], ["Ctrl-H", "删除光标前的一个字符"],
         ["Ctrl-C", "终止一个正在运行的程序"], ["Ctrl-S", "停止屏幕输出"], ["Ctrl-Q", "激活屏幕输出"],
         ["Tab", "在 bash 命令行中补全文件名"]],
    ],
}


def _norm(cell: str | None) -> str:
    """A cell compared without blanks (pdfplumber keeps a wrapped cell's line break)."""
    return "".join((cell or "").split())


def _cells_found(truth: list[list[str | None]], found: list[list[str]]) -> tuple[int, int]:
    """(cells of ``truth`` found in ``found``, cells compared): rows matched by their first cell."""
    by_key = {_norm(row[0]): row for row in found if row}
    right = total = 0
    for row in truth:
        candidate = by_key.get(_norm(row[0]), [])
        for index, cell in enumerate(row):
            if cell is None:
                continue
            total += 1
            right += index < len(candidate) and _norm(candidate[index]) == _norm(cell)
    return right, total


def _score(found_per_file: dict[str, list[list[list[str]]]]) -> dict[str, float | int]:
    right = total = tables_right = extra = 0
    for name, truths in TRUTH.items():
        found = found_per_file[name]
        used: set[int] = set()
        for truth in truths:
            scores = [(_cells_found(truth, table), index) for index, table in enumerate(found)]
            best = max(scores, default=((0, sum(c is not None for row in truth for c in row)), -1))
            (hit, count), index = best
            right, total = right + hit, total + count
            tables_right += hit >= 0.9 * count
            if hit:
                used.add(index)
        extra += len(found) - len(used)
    return {"cells_right": round(right / total, 4), "tables_right": tables_right,
            "tables": sum(len(t) for t in TRUTH.values()), "extra_tables": extra}


def _mx_rag(path: Path) -> tuple[int, list[list[list[str]]]]:
    from mx_rag.document.loader import PdfLoader
    from mx_rag.document.loader._layout import read_markdown_tables

    pages = PdfLoader(str(path)).load()
    return len(pages), [table for page in pages for table in read_markdown_tables(page.page_content)]


def _mx_rag_no_tables(path: Path) -> tuple[int, list[list[list[str]]]]:
    from mx_rag.document.loader import pdf_loader

    saved = pdf_loader.page_tables
    pdf_loader.page_tables = lambda page: []
    try:
        return _mx_rag(path)
    finally:
        pdf_loader.page_tables = saved  # type: ignore[assignment]


def _pdfplumber(path: Path, settings: dict[str, str] | None = None) -> tuple[int, list[list[list[str]]]]:
    import pdfplumber

    tables: list[list[list[str]]] = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            page.extract_text()
            tables.extend([[cell or "" for cell in row] for row in table] for table in page.extract_tables(settings))
            page.close()
        return len(pdf.pages), tables


def _pdfplumber_text(path: Path) -> tuple[int, list[list[list[str]]]]:
    return _pdfplumber(path, {"vertical_strategy": "text", "horizontal_strategy": "lines"})


CONTENDERS: dict[str, Callable[[Path], tuple[int, list[list[list[str]]]]]] = {
    "mx_rag": _mx_rag, "mx_rag_no_tables": _mx_rag_no_tables, "pdfplumber": _pdfplumber,
    "pdfplumber_text_columns": _pdfplumber_text,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=positive_int, default=1, help="rounds over the book (default 1)")
    parser.add_argument("--book", type=Path, default=BOOK, help="the PDF timed (default: the Debian Reference)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # pypdf's notes on fonts
    emit(environment("pdf_tables", book=str(args.book), rounds=args.rounds,
                     pdfplumber=package_version("pdfplumber"), pypdfium2=package_version("pypdfium2"),
                     pypdf=package_version("pypdf")))
    lines: dict[str, dict[str, object]] = {}
    for name, run in CONTENDERS.items():
        found = {file: run(DOCS / file)[1] for file in TRUTH}
        lines[name] = {"contender": name, **_score(found)}
    seconds: dict[str, float] = dict.fromkeys(CONTENDERS, 0.0)
    pages = 0
    for _, name in rotating_rounds(list(CONTENDERS), args.rounds):
        start = time.perf_counter()
        pages, tables = CONTENDERS[name](args.book)
        seconds[name] += time.perf_counter() - start
        lines[name]["book_tables"] = len(tables)
    for name, line in lines.items():
        emit({**line, "book_pages": pages, "pages_per_s": round(pages * args.rounds / seconds[name], 2),
              "loadavg": loadavg()})


if __name__ == "__main__":
    main()
