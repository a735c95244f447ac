# SPDX-License-Identifier: Apache-2.0
"""``mxrag eval`` over a knowledge base of real files and the real embedding model; the LLM is the
scripted OpenAI-compatible server (scripted test-set replies, then echoes), once the embedded llama.cpp."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.testing import Reply, ScriptedServer
from tests.cli.cli_helpers import invoke, mxrag, one_line_error

pytestmark = pytest.mark.slow

CLUB = (
    "# Norwich City\n\nNorwich City Football Club is a professional football club based in Norwich, Norfolk, "
    "England. The club plays its home matches at Carrow Road, a stadium it has used since 1935, and its fans "
    "call the team the Canaries because of the yellow and green kit.\n"
)
HARBOUR = (
    "# Harbour\n\nThe old harbour of Norwich received wool ships every spring during the fourteenth century. "
    "Merchants stored the wool in stone warehouses along the river Wensum before it was woven into worsted "
    "cloth and sold across Europe.\n"
)
PAIRS = [
    "Question: Where does Norwich City play its home matches?\nAnswer: Carrow Road",
    "Question: What did the old harbour of Norwich receive every spring?\nAnswer: wool ships",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("eval")
    (cwd / "docs").mkdir()
    (cwd / "docs" / "club.md").write_text(CLUB, encoding="utf-8")
    (cwd / "docs" / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    done = mxrag("ingest", "docs", "--kb", "handbook", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd


@pytest.fixture
def llm() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def _run(llm: ScriptedServer, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return invoke("eval", "--kb", "handbook", "--questions", "2", "--out", str(out), "--llm-url", llm.url("/v1"),
                  "--setting", "single2=single:2", "--setting", "single1=single:1", "--compare", "single2,single1",
                  *extra)


def test_a_report_side_by_side_then_a_resumed_run(site: Path, llm: ScriptedServer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(site)
    out = site / "report-a"
    llm.enqueue(*(Reply.chat(pair) for pair in PAIRS))
    result = _run(llm, out, "--metrics", "faithfulness,nv_accuracy")
    assert result.exit_code == 0, result.stderr
    items = [json.loads(line) for line in (out / "testset.jsonl").read_text().splitlines()]
    assert [i["reference"] for i in items] == ["Carrow Road", "wool ships"]
    assert "Carrow Road" in items[0]["passages"][0]
    report = json.loads((out / "report.json").read_text())
    summary = report["summary"]
    assert set(summary) == {"single2", "single1"} and summary["single2"]["questions"] == 2
    assert summary["single2"]["recall"] == 1.0  # both passages among two retrieved chunks
    assert 0.0 <= summary["single1"]["recall"] <= 1.0
    assert report["metrics"] == ["faithfulness", "nv_accuracy"]
    assert report["comparison"]["paired_questions"] == 2 and "f1" in report["comparison"]
    assert set(report["timings"]) == {"ingest_and_llm_start_s", "testset_s", "answers_s"}
    assert all(value >= 0 for value in report["timings"].values())
    assert "Time of this run: ingestion and LLM start" in (out / "report.md").read_text()
    assert "| single2 | 2 | 0 |" in (out / "report.md").read_text() and "| single2 |" in result.stdout
    asked = len(llm.requests)
    again = _run(llm, out, "--metrics", "faithfulness,nv_accuracy")  # finished: nothing is asked again
    assert again.exit_code == 0, again.stderr
    assert len(llm.requests) == asked and "resuming: 4 answers" in again.stderr
    checkpoint = out / "report.json.partial.jsonl"
    lines = checkpoint.read_text().splitlines()
    checkpoint.write_text("\n".join(lines[:-1]) + "\n")  # as if stopped before the last answer
    resumed = _run(llm, out, "--metrics", "faithfulness,nv_accuracy")
    assert resumed.exit_code == 0 and "3 answers" in resumed.stderr and "1 to go" in resumed.stderr
    after = json.loads((out / "report.json").read_text())["summary"]
    for setting in summary:  # the echoing LLM answers the re-asked question as before
        assert {k: after[setting][k] for k in ("questions", "recall", "em", "f1")} == {
            k: summary[setting][k] for k in ("questions", "recall", "em", "f1")}


def test_other_settings_refuse_the_checkpoint_until_restart(site: Path, llm: ScriptedServer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(site)
    out = site / "report-b"
    llm.enqueue(*(Reply.chat(pair) for pair in PAIRS))
    assert _run(llm, out, "--metrics", "").exit_code == 0
    changed = _run(llm, out, "--metrics", "faithfulness")
    assert changed.exit_code == 1 and "--restart" in one_line_error(changed.stderr)
    assert _run(llm, out, "--metrics", "faithfulness", "--restart").exit_code == 0


def test_bad_settings_are_usage_errors(site: Path, llm: ScriptedServer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(site)
    bad = invoke("eval", "--kb", "handbook", "--setting", "x=telepathy:3", "--llm-url", llm.url("/v1"))
    assert bad.exit_code == 1 and "--setting must be NAME=CHAIN[:K]" in one_line_error(bad.stderr)
    pair = invoke("eval", "--kb", "handbook", "--compare", "a,b", "--llm-url", llm.url("/v1"))
    assert pair.exit_code == 1 and "--compare must be A,B" in one_line_error(pair.stderr)
