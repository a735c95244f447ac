# SPDX-License-Identifier: Apache-2.0
"""End to end: ``mxrag ingest`` of a folder holding a scanned PDF (pages rendered at test time, no
text layer), the summary counting the pages read by OCR, then ``mxrag ask`` with the embedded LLM
about a fact found only in the scan, answered with the scan's page as its source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mx_rag.document.loader import _ocr
from mx_rag.document.loader._ocr import ocr_available
from mx_rag.testing.scans import find_font, render_page, save_image_pdf
from tests.cli.cli_helpers import invoke

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ocr_available(), reason='the OCR engine is not installed: pip install "mxrag[ocr]"'),
    pytest.mark.skipif(find_font(cjk=False) is None, reason="no TrueType font to render the scan with"),
]

COVER = "Harbour inspection records. This file holds the inspection notes of the Northwind harbour."
FACT = "The lighthouse keeper of Northwind harbour is named Margaret Oyelaran."


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("ocr")
    (cwd / "docs").mkdir()
    pages = [render_page([COVER], dpi=150), render_page([FACT], dpi=150).rotate(90, expand=True)]
    save_image_pdf(pages, cwd / "docs" / "scan.pdf", dpi=150)
    (cwd / "docs" / "notes.md").write_text("# Notes\n\nThe ferry to the island leaves at nine.\n", encoding="utf-8")
    return cwd


@pytest.mark.llm
def test_ingest_reads_the_scan_and_ask_cites_its_page(site: Path, monkeypatch: pytest.MonkeyPatch,
                                                      local_llm: Any) -> None:
    monkeypatch.chdir(site)
    done = invoke("ingest", "docs", "--kb", "scans", "--json")
    assert done.exit_code == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["ocr_pages"] == 2 and sorted(summary["added"]) == ["docs/notes.md", "docs/scan.pdf"]
    assert "2 pages read by OCR" in done.stderr
    answer = invoke("ask", "What is the name of the lighthouse keeper of Northwind harbour?", "--kb", "scans",
                    "--llm-url", local_llm.base_url, "--llm-model", local_llm.model_name, "--max-tokens", "32",
                    "--json")
    assert answer.exit_code == 0, answer.stderr
    result = json.loads(answer.stdout)
    assert "Oyelaran" in result["answer"], result
    assert result["sources"][0]["path"] == "docs/scan.pdf" and result["sources"][0]["page"] == 2, result["sources"]


def test_without_the_engine_a_scan_is_skipped_with_the_install_hint(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()
    save_image_pdf([render_page(["Only pixels here."], dpi=72)], tmp_path / "docs" / "scan.pdf", dpi=72)
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\nThe ferry leaves at nine.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_ocr, "_MODULES", ("mxrag_module_that_is_not_installed",))
    done = invoke("ingest", "docs", "--kb", "scans", "--json")
    assert done.exit_code == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["added"] == ["docs/notes.md"] and summary["failed"] == {}
    assert summary["skipped"] == {"docs/scan.pdf": "has no text layer on any of its 1 pages (a scan) and no OCR "
                                                    'engine is installed: pip install "mxrag[ocr]"'}
