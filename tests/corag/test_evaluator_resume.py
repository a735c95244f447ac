"""CoRagEvaluator checkpoints: an interrupted evaluation resumes where it stopped.

A real retrieval server over a real knowledge base and the scripted LLM server; the interruption
is a real SIGINT (what Ctrl-C sends) raised while the LLM answers, or an LLM that fails.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corag_eval_helpers import HOTPOT, MUSIQUE, RoutedLLM, RoutedServer, Script, build_retriever, load, make_llm

from mx_rag.corag.config import CoRagBaseConfig
from mx_rag.corag.evaluator import CoRagEvaluator, checkpoint_path
from mx_rag.errors import ParameterError
from mx_rag.llm import Text2TextLLM
from mx_rag.server import RetrievalServer, create_retrieval_app
from mx_rag.utils import ClientParam

ITEMS = load(HOTPOT)[:4] + load(MUSIQUE)[:2]
TIMING = ("avg_path_time", "avg_time")


def script_for(item: dict[str, Any]) -> Script:
    if "supporting_facts" in item:
        steps = list(dict.fromkeys(title for title, _ in item["supporting_facts"]))
    else:
        steps = [step["question"] for step in item["question_decomposition"]][:2]
    return Script(steps, [item["answer"]], naive_answer=item["answer"])


def router(**options: Any) -> RoutedLLM:
    return RoutedLLM({it["question"]: script_for(it) for it in ITEMS}, **options)


@pytest.fixture(scope="module")
def retrieval_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with RetrievalServer(create_retrieval_app(build_retriever(tmp_path_factory.mktemp("kb")))) as server:
        yield server.url


@pytest.fixture
def eval_file(tmp_path: Path) -> Path:
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(ITEMS, ensure_ascii=False), encoding="utf-8")
    return path


def run(llm: RoutedLLM, source: str, eval_file: Path, save_file: Path, *, threads: int = 1,
        **options: Any) -> tuple[list[dict[str, Any]], RoutedServer]:
    server = RoutedServer(llm)
    with server:
        config = CoRagBaseConfig(make_llm(server), source, num_threads=threads, max_path_length=2,
                                 client_param=ClientParam(use_http=True, retries=0))
        report = CoRagEvaluator(config).evaluate(str(eval_file), str(save_file), **options)
    return report, server


def untimed(report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    summary = {k: v for k, v in report[0].items() if k not in TIMING}
    return [summary, *({k: v for k, v in r.items() if k != "time"} for r in report[1:])]


def asked(server: RoutedServer, question: str) -> int:
    """Requests whose prompt names ``question`` (sub-query, naive and final-answer prompts do)."""
    return sum(question.strip() in str(r.json["messages"][-1]["content"]) for r in server.requests if r.json)


def checkpoint_lines(save_file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in checkpoint_path(save_file).read_text(encoding="utf-8").splitlines()]


def test_interrupted_run_resumes_without_asking_again(retrieval_url: str, eval_file: Path, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    expected, _ = run(router(), retrieval_url, eval_file, tmp_path / "whole" / "report.json")
    save_file = tmp_path / "out" / "report.json"
    finals: list[str] = []

    def ctrl_c_on_the_third(question: str) -> None:
        finals.append(question)
        if len(finals) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        run(router(on_final=ctrl_c_on_the_third), retrieval_url, eval_file, save_file)
    assert not save_file.exists()
    header, *entries = checkpoint_lines(save_file)
    assert header["type"] == "CoRagEvaluator checkpoint" and header["questions"] == len(ITEMS)
    assert header["settings"]["num_contexts"] == 10 and header["settings"]["base_llm"]["model"] == "scripted"
    done = {entry["record"]["question"] for entry in entries}
    assert len(done) >= 3  # the question in flight at Ctrl-C is finished and kept, the queued ones are not
    assert len(done) < len(ITEMS)
    assert [entry["key"] for entry in entries] == [it.get("id") or it.get("_id") for it in ITEMS[: len(done)]]
    with checkpoint_path(save_file).open("a", encoding="utf-8") as handle:
        handle.write('{"key": "half-written')  # as a kill -9 in the middle of a write leaves it

    caplog.set_level(logging.INFO, logger="mx_rag.corag.evaluator")
    report, server = run(router(), retrieval_url, eval_file, save_file, threads=2)
    assert untimed(report) == untimed(expected)
    assert json.loads(save_file.read_text(encoding="utf-8")) == report
    assert [asked(server, q) for q in done] == [0] * len(done)  # finished questions: no LLM call at all
    assert all(asked(server, it["question"]) > 0 for it in ITEMS if it["question"].strip() not in done)
    assert not checkpoint_path(save_file).exists() and sorted(p.name for p in save_file.parent.iterdir()) == [
        "report.json"]
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"{len(done)} of {len(ITEMS)} questions done" in m for m in messages)
    assert any("ignoring 1 broken" in m for m in messages)
    progress = [m for m in messages if " done, EM so far " in m]  # stderr is no terminal under pytest
    assert len(progress) == len(ITEMS) - len(done)
    assert progress[-1].startswith(f"CoRAG eval: {len(ITEMS)}/{len(ITEMS)} done, EM so far ")


def test_failed_questions_are_retried_and_the_rest_kept(retrieval_url: str, eval_file: Path, tmp_path: Path) -> None:
    expected, _ = run(router(), retrieval_url, eval_file, tmp_path / "whole.json")
    save_file = tmp_path / "report.json"
    down = {ITEMS[1]["question"], ITEMS[4]["question"]}  # the LLM fails these final answers
    first, _ = run(router(fail_final=down), retrieval_url, eval_file, save_file, threads=3)
    assert first[0]["failed_count"] == 2 and first[0]["total_samples"] == len(ITEMS)  # still in the denominator
    assert json.loads(save_file.read_text(encoding="utf-8")) == first  # the report is complete ...
    assert checkpoint_path(save_file).exists()  # ... and the checkpoint kept for a retry

    report, server = run(router(), retrieval_url, eval_file, save_file, threads=3)
    assert untimed(report) == untimed(expected)
    assert [asked(server, it["question"]) > 0 for it in ITEMS] == [it["question"] in down for it in ITEMS]
    assert not checkpoint_path(save_file).exists()


def test_invalid_records_are_not_retried(retrieval_url: str, tmp_path: Path) -> None:
    eval_file = tmp_path / "eval.json"
    eval_file.write_text(json.dumps([ITEMS[0], {"answer": "no question"}]), encoding="utf-8")
    save_file = tmp_path / "report.json"
    report, _ = run(router(), retrieval_url, eval_file, save_file)
    assert report[0]["failed_count"] == 1 and report[2]["error"].startswith("record 1 has no question")
    assert not checkpoint_path(save_file).exists()  # nothing a retry could change


def interrupted(retrieval_url: str, eval_file: Path, save_file: Path) -> None:
    """Leaves a checkpoint of two finished questions (the rest failed: the LLM went away)."""
    run(router(fail_final={it["question"] for it in ITEMS[2:]}), retrieval_url, eval_file, save_file,
        num_contexts=4)
    assert len(checkpoint_lines(save_file)) == 1 + len(ITEMS)


@pytest.mark.parametrize(("change", "message"), [
    ({"num_contexts": 5}, "num_contexts 4 then, 5 now"),
    ({"num_contexts": 4, "calc_recall": False}, "calc_recall True then, False now"),
    ({"num_contexts": 4, "enable_naive_retrieval": False}, "naive_retrieval True then, False now"),
])
def test_checkpoint_of_other_settings_is_refused(retrieval_url: str, eval_file: Path, tmp_path: Path,
                                                 change: dict[str, Any], message: str) -> None:
    save_file = tmp_path / "report.json"
    interrupted(retrieval_url, eval_file, save_file)
    before = checkpoint_path(save_file).read_bytes()
    with pytest.raises(ParameterError, match="was written with other settings") as caught:
        run(router(), retrieval_url, eval_file, save_file, **change)
    assert message in str(caught.value) and "restart=True" in str(caught.value)
    assert checkpoint_path(save_file).read_bytes() == before  # never touched, never mixed

    report, server = run(router(), retrieval_url, eval_file, save_file, restart=True, **change)
    assert report[0]["failed_count"] == 0 and all(asked(server, it["question"]) for it in ITEMS)  # all run again
    assert not checkpoint_path(save_file).exists()


def test_checkpoint_of_another_file_or_model_is_refused(retrieval_url: str, eval_file: Path, tmp_path: Path) -> None:
    save_file = tmp_path / "report.json"
    interrupted(retrieval_url, eval_file, save_file)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(load(HOTPOT)[4:6]), encoding="utf-8")  # none of the checkpoint's questions
    with pytest.raises(ParameterError, match=r"belongs to another eval file .*6 questions\): none of its 6 finished "
                       r"questions is in .*\(2 questions\)"):
        run(router(), retrieval_url, other, save_file, num_contexts=4)
    with RoutedServer(router()) as server:
        config = CoRagBaseConfig(make_llm(server), retrieval_url, max_path_length=3,
                                 client_param=ClientParam(use_http=True))
        with pytest.raises(ParameterError, match="max_path_length 2 then, 3 now"):
            CoRagEvaluator(config).evaluate(str(eval_file), str(save_file), num_contexts=4)
        other_model = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="other",
                                   client_param=ClientParam(use_http=True))
        config = CoRagBaseConfig(other_model, retrieval_url, max_path_length=2, client_param=ClientParam(use_http=True))
        with pytest.raises(ParameterError, match=r"base_llm .*'scripted'.* then, .*'other'.* now"):
            CoRagEvaluator(config).evaluate(str(eval_file), str(save_file), num_contexts=4)
    # the same questions under another name resume fine: the questions are pinned, not the path
    moved = tmp_path / "moved.json"
    moved.write_bytes(eval_file.read_bytes())
    report, server = run(router(), retrieval_url, moved, save_file, num_contexts=4)
    assert report[0]["failed_count"] == 0
    assert [asked(server, it["question"]) > 0 for it in ITEMS] == [False, False] + [True] * (len(ITEMS) - 2)


def test_a_record_changed_under_its_id_is_run_again(retrieval_url: str, eval_file: Path, tmp_path: Path) -> None:
    save_file = tmp_path / "report.json"
    interrupted(retrieval_url, eval_file, save_file)  # the first two questions are done
    changed = [dict(ITEMS[0], answer="something else"), *ITEMS[1:]]  # same id, other accepted answer
    eval_file.write_text(json.dumps(changed, ensure_ascii=False), encoding="utf-8")
    report, server = run(router(), retrieval_url, eval_file, save_file, num_contexts=4)
    assert [asked(server, it["question"]) > 0 for it in ITEMS] == [True, False] + [True] * (len(ITEMS) - 2)
    assert report[1]["ground_truths"] == ["something else"] and report[1]["em"] == 0.0


def test_a_finished_report_is_extended_by_a_larger_file(retrieval_url: str, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    expected, _ = run(router(), retrieval_url, write_items(tmp_path / "all.json", ITEMS), tmp_path / "whole.json")
    save_file = tmp_path / "report.json"
    first, _ = run(router(), retrieval_url, write_items(tmp_path / "first3.json", ITEMS[:3]), save_file)
    assert first[0]["total_samples"] == 3 and not checkpoint_path(save_file).exists()
    assert first[0]["settings"] == expected[0]["settings"] and first[0]["settings"]["max_path_length"] == 2

    report, server = run(router(), retrieval_url, write_items(tmp_path / "first6.json", ITEMS), save_file)
    assert [asked(server, it["question"]) > 0 for it in ITEMS] == [False] * 3 + [True] * 3  # the new ones only
    assert untimed(report) == untimed(expected) and report[1:4] == first[1:]
    again, server = run(router(), retrieval_url, write_items(tmp_path / "first2.json", ITEMS[:2]), save_file)
    assert not server.requests and again[1:] == first[1:3]  # a smaller selection: all reused, and said so
    assert "4 of its 6 questions are not in this eval file; the new report leaves them out" in caplog.text
    # a report of other settings is replaced, not extended; restart=True runs everything
    other, server = run(router(), retrieval_url, tmp_path / "first2.json", save_file, num_contexts=4)
    assert all(asked(server, it["question"]) for it in ITEMS[:2]) and other[0]["settings"]["num_contexts"] == 4
    _, server = run(router(), retrieval_url, tmp_path / "first2.json", save_file, num_contexts=4, restart=True)
    assert all(asked(server, it["question"]) for it in ITEMS[:2])


def write_items(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return path


def test_not_a_checkpoint(retrieval_url: str, eval_file: Path, tmp_path: Path) -> None:
    save_file = tmp_path / "report.json"
    checkpoint_path(save_file).write_text('{"something": "else"}\n', encoding="utf-8")
    with pytest.raises(ParameterError, match="is not a CoRagEvaluator checkpoint"):
        run(router(), retrieval_url, eval_file, save_file)
    checkpoint_path(save_file).write_text("", encoding="utf-8")  # stopped before the header: nothing done
    report, _ = run(router(), retrieval_url, eval_file, save_file)
    assert report[0]["total_samples"] == len(ITEMS) and not checkpoint_path(save_file).exists()
