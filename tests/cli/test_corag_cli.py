# SPDX-License-Identifier: Apache-2.0
"""``mxrag corag evaluate``: a knowledge base built from the eval file (or a retrieval API), the
scripted LLM through ``--llm-url`` for exact figures, and once the embedded LLM on 2 questions."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mx_rag.cli import main as cli
from tests.corag.corag_eval_helpers import (
    HOTPOT,
    MUSIQUE,
    RoutedLLM,
    RoutedServer,
    Script,
    build_retriever,
    load,
)

HOTPOT_ITEMS = load(HOTPOT)
MUSIQUE_ITEMS = load(MUSIQUE)
SUMMARY_KEYS = {"type", "total_samples", "corag_accuracy", "naive_accuracy", "corag_correct_count",
                "naive_correct_count", "avg_path_time", "avg_time", "corag_micro_recall", "naive_micro_recall",
                "corag_em", "corag_f1", "naive_em", "naive_f1", "failed_count"}


def titles(item: dict[str, Any]) -> list[str]:
    if "supporting_facts" in item:
        return list(dict.fromkeys(title for title, _ in item["supporting_facts"]))
    return list(dict.fromkeys(p["title"] for p in item["paragraphs"] if p["is_supporting"]))


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return path


def router_for(items: list[dict[str, Any]]) -> RoutedLLM:
    """Sub-queries: the supporting titles; final answer: the reference answer; naive answer: "unknown"."""
    return RoutedLLM({it["question"]: Script(titles(it), [it["answer"]]) for it in items})


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli.app, ["corag", "evaluate", *args])


@pytest.fixture(scope="module")
def retrieval_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from mx_rag.server import RetrievalServer, create_retrieval_app

    with RetrievalServer(create_retrieval_app(build_retriever(tmp_path_factory.mktemp("kb")))) as server:
        yield server.url


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(cli.app, ["corag", "evaluate", "--help"])
    assert result.exit_code == 0
    for option in ("--retrieval-url", "--llm-url", "--num-threads", "--max-path-length", "--limit", "--save-file",
                   "--no-naive", "--no-recall", "--restart"):
        assert option in result.stdout
    assert "Resumable" in result.stdout and "partial.jsonl" in result.stdout


def test_builds_a_knowledge_base_from_the_file_and_reuses_it(tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:3]
    eval_file = write(tmp_path / "hotpot.json", items)
    workdir, report_file = tmp_path / "work", tmp_path / "out" / "report.json"
    with RoutedServer(router_for(items)) as llm:
        url = llm.url("/v1/chat/completions")
        first = invoke(str(eval_file), "--llm-url", url, "--workdir", str(workdir), "--limit", "2",
                       "--num-threads", "2", "--save-file", str(report_file))
        assert first.exit_code == 0, first.output
        assert "embedding 30 paragraphs" in first.stderr  # 10 per HotpotQA question: the whole file
        summary = json.loads(first.stdout)
        assert set(summary) >= SUMMARY_KEYS and summary["type"] == "Summary"
        assert summary["total_samples"] == 2 and summary["corag_accuracy"] == 1.0 and summary["corag_em"] == 1.0
        assert summary["naive_accuracy"] == 0.0 and summary["failed_count"] == 0
        assert 0.5 <= summary["corag_title_recall"] <= 1.0  # the sub-queries are the supporting titles
        report = json.loads(report_file.read_text(encoding="utf-8"))
        assert report[0] == summary and [r["question"] for r in report[1:]] == [it["question"].strip()
                                                                                 for it in items[:2]]
        assert [[s["subquery"] for s in r["reasoning_steps"]] for r in report[1:]] == [titles(it) for it in items[:2]]
        assert [p.name for p in workdir.iterdir() if p.name.startswith("kb-")] != []
        assert not [p for p in workdir.iterdir() if p.name.startswith(".")]  # no temporary files left

        (tmp_path / "sub").mkdir()
        dotted = tmp_path / "sub" / ".." / "hotpot.json"  # '..' is fine on the command line
        base_url = llm.url("/v1")  # as `mxrag llm serve` prints it
        second = invoke(str(dotted), "--llm-url", base_url, "--workdir", str(workdir), "--no-naive", "--no-recall",
                        "--max-path-length", "1", "--save-file", str(tmp_path / "sub" / ".." / "out" / "report.json"))
    assert second.exit_code == 0, second.output
    assert "reusing" in second.stderr and "embedding" not in second.stderr
    summary = json.loads(second.stdout)
    assert summary["total_samples"] == 3 and summary["max_path_length"] == 1
    assert summary["naive_accuracy"] is None and summary["corag_micro_recall"] is None
    report = json.loads(report_file.read_text(encoding="utf-8"))
    assert all(len(r["reasoning_steps"]) == 1 and r["naive_prediction"] is None for r in report[1:])


def test_retrieval_url_and_musique(retrieval_url: str, tmp_path: Path) -> None:
    items = MUSIQUE_ITEMS[:3]
    eval_file = write(tmp_path / "musique.json", items)
    workdir = tmp_path / "work"
    with RoutedServer(router_for(items)) as llm:
        result = invoke(str(eval_file), "--retrieval-url", retrieval_url, "--llm-url",
                        llm.url("/v1/chat/completions"), "--workdir", str(workdir), "--num-threads", "3",
                        "--max-path-length", "4", "--num-contexts", "4", "--top-k", "3")
        prompts = llm.prompts("Answer the question using only")
    assert result.exit_code == 0, result.output
    assert "knowledge base" not in result.stderr  # nothing built: the API answers
    summary = json.loads(result.stdout)
    assert summary["total_samples"] == 3 and summary["corag_accuracy"] == 1.0 and summary["num_contexts"] == 4
    report = json.loads((workdir / "musique-report.json").read_text(encoding="utf-8"))  # the default place
    assert report[0] == summary
    assert [[s["subquery"] for s in r["reasoning_steps"]] for r in report[1:]] == [titles(it) for it in items]
    assert all(p.count("Document ") <= 4 for p in prompts)  # --top-k 3 per step; --num-contexts 4 for naive


def test_resumes_an_unfinished_evaluation(retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:3]
    eval_file = write(tmp_path / "hotpot.json", items)
    report_file = tmp_path / "report.json"
    partial = tmp_path / "report.json.partial.jsonl"
    common = ["--retrieval-url", retrieval_url, "--workdir", str(tmp_path / "work"), "--save-file", str(report_file),
              "--num-threads", "1", "--limit", "3"]
    broken = RoutedLLM({it["question"]: Script(titles(it), [it["answer"]]) for it in items},
                       fail_final={items[2]["question"]})
    with RoutedServer(broken) as llm:
        first = invoke(str(eval_file), "--llm-url", llm.url("/v1/chat/completions"), *common)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["failed_count"] == 1
    assert "1/3 done, EM so far 1.000" in first.stderr and "3/3 done, EM so far 0.667" in first.stderr
    assert "1 question(s) failed" in first.stderr and partial.is_file()  # kept for a retry

    with RoutedServer(router_for(items)) as llm:
        url = llm.url("/v1/chat/completions")
        refused = invoke(str(eval_file), "--llm-url", url, *common, "--num-contexts", "4")
        assert refused.exit_code == 1 and "num_contexts 10 then, 4 now" in refused.stderr
        assert "--restart" in refused.stderr
        second = invoke(str(eval_file), "--llm-url", url, *common)
        asked_again = [r for r in llm.requests if items[0]["question"].strip() in str(r.json)]
    assert second.exit_code == 0, second.output
    assert "resuming from" in second.stderr and "2 of 3 questions done, 1 to run" in second.stderr
    assert "3/3 done, EM so far 1.000" in second.stderr and "1/3 done" not in second.stderr
    assert json.loads(second.stdout)["corag_em"] == 1.0 and not partial.exists() and asked_again == []

    with RoutedServer(broken) as llm:  # the finished report of the same settings: nothing to run
        again = invoke(str(eval_file), "--llm-url", llm.url("/v1/chat/completions"), *common[:-1], "2")
        assert again.exit_code == 0 and not llm.requests, again.output
        assert "extending" in again.stderr and "2 of 2 questions done, 0 to run" in again.stderr
        assert invoke(str(eval_file), "--llm-url", llm.url("/v1/chat/completions"), *common, "--restart").exit_code == 0
    assert partial.is_file()
    with RoutedServer(router_for(items)) as llm:  # other settings, but --restart: the checkpoint is ignored
        third = invoke(str(eval_file), "--llm-url", llm.url("/v1/chat/completions"), *common, "--restart",
                       "--num-contexts", "4")
        asked = [it for it in items if any(it["question"].strip() in str(r.json) for r in llm.requests)]
    assert third.exit_code == 0, third.output
    assert "resuming" not in third.stderr and "1/3 done" in third.stderr and asked == items
    assert json.loads(third.stdout)["num_contexts"] == 4 and not partial.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["missing.json"], "eval_file"),
    (["{hotpot}", "--limit", "0"], "--limit must be >= 1"),
    (["{hotpot}", "--num-threads", "0", "--retrieval-url", "http://127.0.0.1:9/retrieve"], "--num-threads"),
    (["{hotpot}", "--llm-threads", "0"], "--llm-threads is for the embedded LLM, in [1, 1024], got 0"),
    (["{hotpot}", "--llm-threads", "2", "--llm-url", "http://127.0.0.1:9/v1/chat/completions"],
     "--llm-threads is for the embedded LLM, in [1, 1024], got 2 with --llm-url"),
])
def test_bad_arguments_fail_with_a_message(args: list[str], message: str, tmp_path: Path) -> None:
    hotpot = write(tmp_path / "hotpot.json", HOTPOT_ITEMS[:1])
    result = invoke(*[a.format(hotpot=hotpot) for a in args], "--workdir", str(tmp_path / "work"))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error:") and message in result.stderr


@pytest.mark.llm
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_embedded_llm_two_questions(tmp_path: Path) -> None:
    """The one-command default: the embedded LLM started by the command, the MiniLM knowledge base."""
    eval_file = write(tmp_path / "hotpot.json", HOTPOT_ITEMS[:3])
    report_file = tmp_path / "report.json"
    command = [sys.executable, "-m", "mx_rag.cli", "corag", "evaluate", str(eval_file), "--limit", "2",
               "--workdir", str(tmp_path / "work"), "--save-file", str(report_file), "--max-path-length", "1",
               "--top-k", "2", "--num-contexts", "2", "--max-tokens", "32", "--num-threads", "1", "--llm-threads", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1700, check=False)
    assert result.returncode == 0, result.stderr
    assert "on llama.cpp, 2 CPU threads)" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["total_samples"] == 2 and summary["failed_count"] == 0 and summary["naive_failed_count"] == 0
    records = json.loads(report_file.read_text(encoding="utf-8"))[1:]
    for record in records:  # the model may end a path before its one step (an echoed prompt is asked again)
        assert len(record["reasoning_steps"]) <= 1 and all(step["subquery"] for step in record["reasoning_steps"])
        assert isinstance(record["corag_prediction"], str) and record["corag_prediction"]
        assert 0.0 <= record["f1"] <= 1.0 and record["corag_recall"]["total"] >= 1
