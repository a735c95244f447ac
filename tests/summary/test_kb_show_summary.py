# SPDX-License-Identifier: Apache-2.0
"""``mxrag kb show --summary`` on a real knowledge base (real files, the real embedding model, SQLite
and FAISS); the LLM is the scripted OpenAI-compatible server, so each prompt and reply is known."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.testing import Reply, ScriptedServer
from tests.cli.cli_helpers import invoke

pytestmark = pytest.mark.slow

CLUB = (
    "# Norwich City\n\nNorwich City Football Club is a professional football club based in Norwich, Norfolk, "
    "England. The club plays its home matches at Carrow Road, a stadium it has used since 1935.\n"
)
HARBOUR = (
    "# Harbour\n\nThe old harbour of Norwich received wool ships every spring during the fourteenth century. "
    "Merchants stored the wool in stone warehouses along the river Wensum.\n"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cwd = tmp_path_factory.mktemp("kbsummary")
    (cwd / "docs").mkdir()
    (cwd / "docs" / "club.md").write_text(CLUB, encoding="utf-8")
    (cwd / "docs" / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        done = invoke("ingest", "docs", "--kb", "handbook")
        assert done.exit_code == 0, done.stderr
        yield cwd


def _show(llm: ScriptedServer, *extra: str) -> dict:  # type: ignore[type-arg]
    result = invoke("kb", "show", "handbook", "--summary", "--llm-url", llm.url("/v1"), *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout) if "--json" in extra else {"text": result.stdout}


def test_summaries_are_written_once_and_again_when_a_document_changes(site: Path) -> None:
    with ScriptedServer() as llm:
        llm.enqueue(Reply.chat("A football club that plays at Carrow Road."),
                    Reply.chat("A medieval wool harbour."),
                    Reply.chat("Norwich: its football club and its old harbour."))
        shown = _show(llm, "--json")
        prompts = [r.json["messages"][-1]["content"] for r in llm.requests]
        assert len(prompts) == 3
        assert "Carrow Road, a stadium" in prompts[0] and "wool ships" in prompts[1]  # each document's own text
        assert "A football club" in prompts[2] and "A medieval wool harbour." in prompts[2]  # the merge
        by_name = {Path(d["path"]).name: d["summary"] for d in shown["documents"]}
        assert by_name == {"club.md": "A football club that plays at Carrow Road.",
                           "harbour.md": "A medieval wool harbour."}
        assert shown["summary"] == "Norwich: its football club and its old harbour."

        again = _show(llm)  # kept: nothing is asked, the text view shows them
        assert len(llm.requests) == 3
        assert "  summary: Norwich: its football club and its old harbour." in again["text"]
        assert "A medieval wool harbour." in again["text"]

        (site / "docs" / "harbour.md").write_text(HARBOUR.replace("wool", "salt"), encoding="utf-8")
        assert invoke("ingest", "docs", "--kb", "handbook").exit_code == 0
        llm.enqueue(Reply.chat("A medieval salt harbour."), Reply.chat("Norwich: football and salt."))
        changed = _show(llm, "--json")
        assert len(llm.requests) == 5  # the changed document and the whole, not the unchanged one
        assert "salt ships" in llm.requests[3].json["messages"][-1]["content"]
        assert {Path(d["path"]).name: d["summary"] for d in changed["documents"]}["club.md"].startswith("A football")
        assert changed["summary"] == "Norwich: football and salt."
        kept = json.loads(next((site / ".mxrag" / "summaries").rglob("handbook.json")).read_text())
        assert len(kept) == 3 and not any("wool" in text for text in kept.values())  # stale ones forgotten


def test_show_without_summary_starts_no_llm(site: Path) -> None:
    with ScriptedServer() as llm:
        result = invoke("kb", "show", "handbook", "--llm-url", llm.url("/v1"), "--json")
        assert result.exit_code == 0, result.stderr
        assert llm.requests == [] and "summary" not in json.loads(result.stdout)


def test_stored_summaries_start_empty_from_a_broken_file_and_check_their_arguments(tmp_path: Path) -> None:
    from mx_rag.errors import ParameterError
    from mx_rag.summary.stored import StoredSummaries

    broken = tmp_path / "s.json"
    broken.write_text("{not json", encoding="utf-8")
    stored = StoredSummaries(broken)
    assert stored.get("1:abc") is None
    with pytest.raises(ParameterError, match="path"):
        StoredSummaries(3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="key"):
        stored.get("")
    with pytest.raises(ParameterError, match="summary"):
        stored.summarize("not a Summary", "1:abc", ["text"])  # type: ignore[arg-type]


def test_deleting_the_knowledge_base_deletes_its_summaries(site: Path) -> None:
    kept = list((site / ".mxrag" / "summaries").rglob("handbook.json"))
    assert kept  # written by the first test of this module
    assert invoke("kb", "delete", "handbook", "--yes").exit_code == 0
    assert not kept[0].exists()
