# SPDX-License-Identifier: Apache-2.0
"""``mxrag kb repair``: a folder whose index file was lost is reported, then repaired."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mx_rag.cli import main as cli
from mx_rag.knowledge.local import LocalKnowledge


@pytest.mark.slow
def test_repair_removes_documents_that_lost_their_vectors(tmp_path: Path) -> None:
    docs, work = tmp_path / "docs", tmp_path / "kb"
    docs.mkdir()
    for name in ("a", "b"):
        (docs / f"{name}.txt").write_text(f"Document {name} says something about storage.", encoding="utf-8")
    kb = LocalKnowledge.open(work, white_paths=[docs])
    assert kb.sync(sorted(docs.iterdir())).added
    (work / "faiss.index").unlink()  # the index file lost, the chunks kept

    runner = CliRunner()
    checked = runner.invoke(cli.app, ["kb", "repair", "--workdir", str(work), "--check"])
    assert checked.exit_code == 1
    assert "2 document(s) have chunks without vectors" in checked.output and "mxrag kb repair" in checked.output

    repaired = runner.invoke(cli.app, ["kb", "repair", "--workdir", str(work)])
    assert repaired.exit_code == 0, repaired.output
    assert "repaired 2 document(s)" in repaired.output
    assert "0 documents, 0 chunks, 0 vectors: consistent" in repaired.output
    again = LocalKnowledge.open(work, white_paths=[docs])
    assert len(again.sync(sorted(docs.iterdir())).added) == 2  # uploaded again


def test_repair_of_a_folder_without_a_knowledge_base_fails(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["kb", "repair", "--workdir", str(tmp_path)])
    assert result.exit_code == 1 and "holds no knowledge base" in result.output
