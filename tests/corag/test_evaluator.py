"""CoRagEvaluator end to end: a real retrieval API server over a real knowledge base, a scripted LLM."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corag_eval_helpers import HOTPOT, MUSIQUE, RoutedLLM, RoutedServer, Script, build_retriever, load, make_llm

from mx_rag.corag.config import CoRagBaseConfig
from mx_rag.corag.datasets import parse_item
from mx_rag.corag.evaluator import CoRagEvaluator
from mx_rag.corag.prompts import NO_RELEVANT_INFO
from mx_rag.corag.types import RetrievedDocument
from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.server import RetrievalServer, create_retrieval_app
from mx_rag.testing import ScriptedServer
from mx_rag.utils import ClientParam

HOTPOT_ITEMS = load(HOTPOT)
MUSIQUE_ITEMS = load(MUSIQUE)
SEED_SUMMARY_KEYS = {"type", "total_samples", "corag_accuracy", "naive_accuracy", "corag_correct_count",
                     "naive_correct_count", "avg_path_time", "avg_time", "corag_micro_recall", "naive_micro_recall"}
SEED_RECORD_KEYS = {"question", "ground_truth", "corag_prediction", "naive_prediction", "is_correct",
                    "naive_is_correct", "reasoning_steps", "time", "corag_recall", "naive_recall"}


def titles(item: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(title for title, _ in item["supporting_facts"]))


def grouped_facts(item: dict[str, Any]) -> dict[str, Any]:
    """The same item with supporting_facts in the seed's ``[title, [i, j]]`` shape."""
    out = copy.deepcopy(item)
    groups: dict[str, list[int]] = {}
    for title, index in item["supporting_facts"]:
        groups.setdefault(title, []).append(index)
    out["supporting_facts"] = [[title, indices] for title, indices in groups.items()]
    return out


@pytest.fixture(scope="module")
def retrieval_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    retriever = build_retriever(tmp_path_factory.mktemp("kb"))
    with RetrievalServer(create_retrieval_app(retriever, max_top_k=50)) as server:
        yield server.url


def evaluate(router: RoutedLLM, source: Any, items: list[Any], tmp_path: Path, *, threads: int = 4,
             judge: bool = False, path_length: int = 2, **options: Any) -> tuple[list[dict[str, Any]], RoutedServer]:
    eval_file = tmp_path / "eval.json"
    eval_file.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    with RoutedServer(router) as server:
        llm = make_llm(server)
        config = CoRagBaseConfig(llm, source, num_threads=threads, max_path_length=path_length,
                                 judge_llm=llm if judge else None, client_param=ClientParam(use_http=True, retries=0))
        report = CoRagEvaluator(config).evaluate(str(eval_file), str(tmp_path / "out" / "report.json"), **options)
    return report, server


def test_hotpotqa_report(retrieval_url: str, tmp_path: Path) -> None:
    items = [HOTPOT_ITEMS[0], grouped_facts(HOTPOT_ITEMS[1]), HOTPOT_ITEMS[2], HOTPOT_ITEMS[3]]
    answers = ["a spirit", "yes", "Greek", "It was Stephen King."]
    scripts = {it["question"]: Script(titles(it), [a]) for it, a in zip(items, answers, strict=True)}
    scripts[items[0]["question"]].naive_answer = "A spirit"
    report, server = evaluate(RoutedLLM(scripts), retrieval_url, items, tmp_path, num_contexts=6)
    summary, records = report[0], report[1:]
    assert set(summary) >= SEED_SUMMARY_KEYS and summary["type"] == "Summary"
    assert all(set(r) >= SEED_RECORD_KEYS for r in records)
    assert [r["question"] for r in records] == [it["question"].strip() for it in items]
    assert [r["corag_prediction"] for r in records] == answers
    assert [r["is_correct"] for r in records] == [True, True, False, True]
    assert [r["naive_is_correct"] for r in records] == [True, False, False, False]
    assert [r["em"] for r in records] == [1.0, 1.0, 0.0, 0.0]
    assert records[3]["f1"] == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))  # "it was stephen king" vs "stephen king"
    assert [r["naive_em"] for r in records] == [1.0, 0.0, 0.0, 0.0]
    assert summary["total_samples"] == 4 and summary["corag_correct_count"] == 3 and summary["naive_correct_count"] == 1
    assert summary["corag_accuracy"] == 0.75 and summary["naive_accuracy"] == 0.25
    assert summary["corag_em"] == 0.5 and summary["naive_em"] == 0.25
    assert summary["corag_f1"] == pytest.approx(sum(r["f1"] for r in records) / 4)
    assert summary["failed_count"] == 0 and summary["retrieval_failure_count"] == 0
    first = records[0]
    assert first["ground_truth"] == "a spirit" and first["ground_truths"] == ["a spirit"]
    assert [s["subquery"] for s in first["reasoning_steps"]] == ["Alû", "Lilu (mythology)"]
    assert all(len(s["document_ids"]) == 5 for s in first["reasoning_steps"])  # retrieve_top_k
    assert first["corag_title_recall"] == {"hits": 2, "total": 2, "recall": 1.0}
    assert first["corag_recall"]["total"] == 2 and first["corag_recall"]["hits"] >= 1
    # seed shape [title, [0, 1]] and the real shape [title, 0] give the same facts
    assert records[1]["corag_recall"]["total"] == 2
    assert parse_item(items[1], 1).golden_facts == parse_item(HOTPOT_ITEMS[1], 1).golden_facts
    assert all(len(r["time"]) == 2 and r["time"][0] > 0 and r["time"][1] >= 0 for r in records)
    hits = sum(r["corag_recall"]["hits"] for r in records)
    assert summary["corag_micro_recall"] == pytest.approx(hits / sum(r["corag_recall"]["total"] for r in records))
    # the naive baseline asks for num_contexts documents and answers from them
    naive_prompts = [p for p in server.prompts("Answer the question using only") if items[0]["question"] in p]
    assert len(naive_prompts) == 1 and "Document 6:" in naive_prompts[0] and "Document 7:" not in naive_prompts[0]
    saved = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert saved == report
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["report.json"]  # no temporary file left


def test_musique_aliases_and_titles(retrieval_url: str, tmp_path: Path) -> None:
    items = MUSIQUE_ITEMS[:4]
    predictions = ["Stanley Hall", "36", "Anglican Communion", "Victoria Falls, Zimbabwe"]
    scripts = {it["question"]: Script([step["question"] for step in it["question_decomposition"]][:2], [p])
               for it, p in zip(items, predictions, strict=True)}
    report, _ = evaluate(RoutedLLM(scripts), retrieval_url, items, tmp_path, enable_naive_retrieval=False)
    summary, records = report[0], report[1:]
    assert [r["is_correct"] for r in records] == [True, False, True, True]
    assert [r["em"] for r in records] == [1.0, 0.0, 1.0, 0.0]  # the alias "Stanley Hall" counts
    assert records[0]["ground_truths"] == ["G. Stanley Hall", "Stanley Hall"]
    assert records[3]["f1"] == pytest.approx(0.8)
    assert records[0]["id"] == items[0]["id"]
    for record, item in zip(records, items, strict=True):
        supporting = [p for p in item["paragraphs"] if p["is_supporting"]]
        assert record["corag_title_recall"]["total"] == len({p["title"] for p in supporting})
        assert record["naive_prediction"] is None and record["naive_recall"] is None
    assert summary["naive_accuracy"] is None and summary["naive_micro_recall"] is None
    assert summary["corag_title_recall"] is not None


def test_seed_musique_example_without_titles(retrieval_url: str, tmp_path: Path) -> None:
    item = {"question": "Which company acquired by Google was founded first?", "answer": "YouTube",
            "paragraphs": [{"paragraph_text": "Google is a multinational technology company.", "is_supporting": False},
                           {"paragraph_text": "YouTube is a video platform owned by Google. It was founded in 2005.",
                            "is_supporting": True}]}
    report, _ = evaluate(RoutedLLM({item["question"]: Script(["YouTube founded"], ["YouTube"])}), retrieval_url,
                         [item], tmp_path)
    record = report[1]
    assert record["is_correct"] and record["corag_recall"]["total"] == 2  # two supporting sentences
    assert record["corag_title_recall"] is None  # no titles to compare


def test_failures_count_as_wrong(retrieval_url: str, tmp_path: Path) -> None:
    good, bad = HOTPOT_ITEMS[0], HOTPOT_ITEMS[2]
    router = RoutedLLM({it["question"]: Script(titles(it), [it["answer"]]) for it in (good, bad)},
                       fail_final={bad["question"]})
    report, _ = evaluate(router, retrieval_url, [good, bad, {"answer": "no question here"}], tmp_path)
    summary, records = report[0], report[1:]
    assert summary["total_samples"] == 3 and summary["corag_correct_count"] == 1
    assert summary["corag_accuracy"] == pytest.approx(1 / 3)  # failures stay in the denominator
    assert summary["failed_count"] == 2
    assert records[1]["error"].startswith("final answer failed") and records[1]["is_correct"] is False
    assert records[1]["reasoning_steps"] and records[1]["corag_recall"] is not None  # the path was kept
    assert records[2]["error"] == "record 2 has no question: expected a 'question' or 'query' string"
    assert records[2]["question"] is None and records[2]["time"] == [0.0, 0.0]


def test_a_failing_retrieval_server_is_counted_as_failures_not_empty_answers(tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[0]
    router = RoutedLLM({item["question"]: Script(titles(item), ["a spirit"])})
    with ScriptedServer() as broken:  # answers every retrieval with 404
        report, _ = evaluate(router, broken.url("/retrieve"), [item], tmp_path)
        assert len(broken.requests) == 3  # two steps and the naive baseline
    summary, record = report[0], report[1]
    assert record["retrieval_calls"] == 3 and record["retrieval_failures"] == 3 and record["empty_retrievals"] == 0
    assert [s["subanswer"] for s in record["reasoning_steps"]] == [NO_RELEVANT_INFO] * 2
    url = broken.url("/retrieve")
    assert record["naive_error"] == f"retrieval failed: retrieval API answered HTTP 404 (url: {url})"
    assert record["naive_prediction"] == "" and record["naive_is_correct"] is False
    assert record["is_correct"] is True and record["error"] is None  # the path went on; its answer is judged
    assert record["corag_recall"]["hits"] == 0
    assert summary["retrieval_failure_count"] == 3 and summary["empty_retrieval_count"] == 0


class BrokenSource:
    """A user's DocumentSource whose backend is down: it raises an error of its own type."""

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        raise ConnectionError("index offline")


def test_failing_source_counts_failures(tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:2]
    router = RoutedLLM({it["question"]: Script(titles(it), [it["answer"]]) for it in items})
    report, _ = evaluate(router, BrokenSource(), items, tmp_path)
    summary, records = report[0], report[1:]
    assert [r["retrieval_failures"] for r in records] == [3, 3]
    assert summary["retrieval_failure_count"] == 6 and summary["naive_failed_count"] == 2
    assert all(r["naive_error"] == "retrieval failed: ConnectionError: index offline" for r in records)
    assert summary["naive_correct_count"] == 0 and summary["failed_count"] == 0


def test_recall_off_keeps_the_naive_baseline(retrieval_url: str, tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[0]
    scripts = {item["question"]: Script(titles(item), ["a spirit"], naive_answer="a spirit")}
    report, _ = evaluate(RoutedLLM(scripts), retrieval_url, [item], tmp_path, calc_recall=False)
    summary, record = report[0], report[1]
    assert record["corag_recall"] is None and record["naive_recall"] is None
    assert record["naive_prediction"] == "a spirit" and record["naive_is_correct"] is True
    assert summary["corag_micro_recall"] is None and summary["naive_accuracy"] == 1.0


def test_judge_llm(retrieval_url: str, tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[0]
    scripts = {item["question"]: Script(titles(item), ["not a spirit"], naive_answer="a spirit")}
    report, server = evaluate(RoutedLLM(scripts), retrieval_url, [item], tmp_path, judge=True)
    record = report[1]
    assert record["is_correct"] is False and record["judge"] == "judge"  # containment would have said True
    assert record["naive_is_correct"] is True and record["naive_judge"] == "judge"
    assert len(server.prompts("You are an expert evaluator")) == 2


def test_many_threads_keep_input_order(retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS + MUSIQUE_ITEMS
    scripts = {it["question"]: Script(titles(it), [it["answer"]]) for it in HOTPOT_ITEMS}
    scripts.update({it["question"]: Script([it["question_decomposition"][0]["question"]], [it["answer"]])
                    for it in MUSIQUE_ITEMS})
    report, _ = evaluate(RoutedLLM(scripts), retrieval_url, items, tmp_path, threads=16)
    summary, records = report[0], report[1:]
    assert [r["question"] for r in records] == [it["question"].strip() for it in items]
    assert summary["total_samples"] == 20 and summary["corag_correct_count"] == 20 and summary["corag_em"] == 1.0
    assert summary["failed_count"] == 0


def test_bad_inputs(retrieval_url: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"question": "q", "answer": "a"},', encoding="utf-8")
    with RoutedServer(RoutedLLM({})) as server:
        config = CoRagBaseConfig(make_llm(server), retrieval_url, client_param=ClientParam(use_http=True))
        evaluator = CoRagEvaluator(config)
        with pytest.raises(ParameterError, match="not valid JSON"):
            evaluator.evaluate(str(broken), str(tmp_path / "r.json"))
        with pytest.raises(ParameterError, match="num_contexts"):
            evaluator.evaluate(str(broken), str(tmp_path / "r.json"), num_contexts=0)
        with pytest.raises(ParameterError, match="save_file"):
            evaluator.evaluate(str(HOTPOT), str(tmp_path))
    with pytest.raises(ParameterError, match="config"):
        CoRagEvaluator("config")  # type: ignore[arg-type]


@pytest.mark.llm
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_local_llm_short_run(local_llm: Any, retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:2]
    eval_file = tmp_path / "eval.json"
    eval_file.write_text(json.dumps(items), encoding="utf-8")
    llm = Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,
                       llm_config=LLMParameterConfig(max_tokens=32, temperature=0.0, seed=1),
                       client_param=ClientParam(use_http=True, timeout=300, retries=0))
    # one request at a time and short prompts: the embedded model runs on the CPU
    config = CoRagBaseConfig(llm, retrieval_url, num_threads=1, max_path_length=1, retrieve_top_k=2,
                             client_param=ClientParam(use_http=True))
    report = CoRagEvaluator(config).evaluate(str(eval_file), str(tmp_path / "report.json"), num_contexts=2)
    summary, records = report[0], report[1:]
    assert summary["total_samples"] == 2 and summary["failed_count"] == 0 and summary["naive_failed_count"] == 0
    for record in records:
        assert len(record["reasoning_steps"]) == 1 and record["reasoning_steps"][0]["subquery"]
        assert isinstance(record["corag_prediction"], str) and record["corag_prediction"]
        assert 0.0 <= record["f1"] <= 1.0 and record["corag_recall"]["total"] >= 2
