"""SampleGenerator end to end: a real retrieval API server over a real knowledge base, a scripted LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corag_eval_helpers import HOTPOT, MUSIQUE, RoutedLLM, RoutedServer, Script, build_retriever, load, make_llm

from mx_rag.corag.config import DEFAULT_SAMPLE_TASK_DESC, DEFAULT_TASK_DESC, CoRagBaseConfig
from mx_rag.corag.retrieval_api import RetrievalApiClient
from mx_rag.corag.sample_generator import SAMPLE_TYPES, SampleGenerator
from mx_rag.errors import ParameterError
from mx_rag.server import RetrievalServer, create_retrieval_app
from mx_rag.utils import ClientParam

HOTPOT_ITEMS = load(HOTPOT)
MUSIQUE_ITEMS = load(MUSIQUE)


def support_titles(item: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(title for title, _ in item["supporting_facts"]))


@pytest.fixture(scope="module")
def retrieval_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    retriever = build_retriever(tmp_path_factory.mktemp("kb"))
    with RetrievalServer(create_retrieval_app(retriever, max_top_k=50)) as server:
        yield server.url


def run(router: RoutedLLM, url: str, input_file: Path, output_file: Path | None, n_samples: int = 3,
        threads: int = 1, judge: bool = False, **config: Any) -> tuple[list[list[dict[str, Any]]], SampleGenerator,
                                                                         RoutedServer]:
    with RoutedServer(router) as server:
        llm = make_llm(server)
        cfg = CoRagBaseConfig(llm, url, num_threads=threads, judge_llm=llm if judge else None,
                              client_param=ClientParam(use_http=True, retries=0), **config)
        generator = SampleGenerator(cfg)
        samples = generator.generate(str(input_file), None if output_file is None else str(output_file), n_samples)
        generator.server = server  # type: ignore[attr-defined]  # kept for the assertions on requests
        return samples, generator, server


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def hotpot_script(item: dict[str, Any], answers: list[str] | None = None) -> Script:
    return Script(subqueries=support_titles(item), answers=answers or [item["answer"]])


def test_string_answer_rejects_wrong_path_then_accepts_correct_one(retrieval_url: str, tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[0]  # "If Gallu is a demon Lilu is what?" -> "a spirit"
    router = RoutedLLM({item["question"]: hotpot_script(item, ["a demon", "It is a spirit."])})
    source = write_jsonl(tmp_path / "in.jsonl", [{"query": item["question"], "answer": item["answer"]}])
    out = tmp_path / "out" / "samples.jsonl"  # the directory is created
    samples, generator, server = run(router, retrieval_url, source, out, n_samples=3, max_path_length=2)
    # the original iterated "a spirit" per character: "a demon" (containing "a") would have been accepted
    assert router.calls[item["question"]] == 2
    assert generator.stats.accepted == 1 and generator.stats.attempts == 2 and generator.stats.rejected == 0
    assert len(samples) == 1
    [query_samples] = samples
    assert [s["type"] for s in query_samples] == [SAMPLE_TYPES[0], SAMPLE_TYPES[1]] * 2 + [SAMPLE_TYPES[2]]
    targets = [s["messages"][1]["content"] for s in query_samples]
    assert targets[0] == "SubQuery: Alû" and targets[2] == "SubQuery: Lilu (mythology)"
    # sub-answers come from the real retrieval: the scripted LLM echoes the top document's title
    with RetrievalApiClient(retrieval_url, ClientParam(use_http=True)) as api:
        tops = [api.retrieve(q, 5)[0].text.split("\n")[0] for q in ("Alû", "Lilu (mythology)")]
    assert targets[1] == f"SubAnswer: {tops[0]}" and targets[3] == f"SubAnswer: {tops[1]}"
    assert tops[1] == "Lilu (mythology)"
    assert targets[4] == "Final Answer: a spirit"  # the reference answer
    assert all(s["messages"][0]["role"] == "user" and s["messages"][1]["role"] == "assistant" for s in query_samples)
    first_prompt = query_samples[0]["messages"][0]["content"]
    assert item["question"] in first_prompt and DEFAULT_TASK_DESC in first_prompt
    assert "Step 1: Alû" in query_samples[2]["messages"][0]["content"]
    assert "Lilu (mythology)\n" in query_samples[3]["messages"][0]["content"]  # retrieved documents in the prompt
    final_prompt = query_samples[4]["messages"][0]["content"]
    assert DEFAULT_SAMPLE_TASK_DESC in final_prompt and "[Document 1]" in final_prompt
    # the sample prompts are exactly what the agent sent
    sent = {str(r.json["messages"][-1]["content"]) for r in server.requests}
    assert all(s["messages"][0]["content"] in sent for s in query_samples)
    assert read_lines(out) == query_samples
    assert {s["query_id"] for s in query_samples} == {item["question"]}


def test_no_correct_path_gives_no_samples(retrieval_url: str, tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[1]
    router = RoutedLLM({item["question"]: hotpot_script(item, ["maybe"])})
    source = write_jsonl(tmp_path / "in.jsonl", [{"query": item["question"], "answer": ["yes"]}])
    out = tmp_path / "samples.jsonl"
    samples, generator, _ = run(router, retrieval_url, source, out, n_samples=4, max_path_length=1)
    assert samples == []
    assert router.calls[item["question"]] == 4
    assert generator.stats.rejected == 1 and generator.stats.accepted == 0 and generator.stats.attempts == 4
    assert out.read_text() == ""


def test_later_attempts_sample_hotter_without_touching_the_llm_config(retrieval_url: str, tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[0]
    router = RoutedLLM({item["question"]: hotpot_script(item, ["wrong", "a spirit"])})
    source = write_jsonl(tmp_path / "in.jsonl", [{"query": item["question"], "answer": "a spirit"}])
    with RoutedServer(router) as server:
        from mx_rag.llm import LLMParameterConfig

        llm = make_llm(server, llm_config=LLMParameterConfig(temperature=0.0, max_tokens=64))
        cfg = CoRagBaseConfig(llm, retrieval_url, num_threads=1, max_path_length=1,
                              client_param=ClientParam(use_http=True, retries=0))
        SampleGenerator(cfg).generate(str(source), str(tmp_path / "o.jsonl"), 2)
        temps = [r.json["temperature"] for r in server.requests if "Write the next search query"
                 in r.json["messages"][-1]["content"]]
    assert temps == [0.0, 0.7]
    assert llm.llm_config.temperature == 0.0


def test_list_answers_and_aliases(retrieval_url: str, tmp_path: Path) -> None:
    item = MUSIQUE_ITEMS[0]  # "G. Stanley Hall", alias "Stanley Hall"
    router = RoutedLLM({item["question"]: Script(["Journal of Psychotherapy Integration"], ["Stanley Hall"])})
    samples, generator, _ = run(router, retrieval_url, write_jsonl(tmp_path / "in.jsonl", [item]),
                                tmp_path / "out.jsonl", max_path_length=1)
    assert generator.stats.accepted == 1
    assert samples[0][-1]["messages"][1]["content"] == "Final Answer: G. Stanley Hall"
    assert samples[0][0]["query_id"] == item["id"]  # keyed by the record's id


def test_resume_skips_done_queries_and_retries_rejected_ones(retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:3]
    scripts = {it["question"]: hotpot_script(it) for it in items}
    scripts[items[1]["question"]] = hotpot_script(items[1], ["wrong"])
    source = write_jsonl(tmp_path / "in.json", [{"id": it["_id"], "query": it["question"], "answer": it["answer"]}
                                                for it in items])
    out = tmp_path / "samples.jsonl"
    first, gen1, _ = run(RoutedLLM(dict(scripts)), retrieval_url, source, out, n_samples=2, max_path_length=1)
    assert gen1.stats.accepted == 2 and gen1.stats.rejected == 1
    lines = read_lines(out)
    assert len(lines) == 2 * 3

    router2 = RoutedLLM(dict(scripts))
    second, gen2, _ = run(router2, retrieval_url, source, out, n_samples=2, max_path_length=1)
    assert gen2.stats.skipped == 2 and gen2.stats.rejected == 1
    assert set(router2.calls) == {items[1]["question"].strip()}  # only the rejected query was sampled again
    assert read_lines(out) == lines
    assert second == first  # previously written samples are returned too, in input order


def test_half_written_output_is_repaired_before_resuming(retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:2]
    scripts = {it["question"]: hotpot_script(it) for it in items}
    source = write_jsonl(tmp_path / "in.jsonl", [{"query": it["question"], "answer": it["answer"]} for it in items])
    out = tmp_path / "samples.jsonl"
    run(RoutedLLM(dict(scripts)), retrieval_url, source, out, max_path_length=1)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6
    # simulate a kill in the middle of writing the second query: its final line is cut
    out.write_text("\n".join(lines[:4]) + "\n" + lines[5][:20], encoding="utf-8")
    router = RoutedLLM(dict(scripts))
    samples, generator, _ = run(router, retrieval_url, source, out, max_path_length=1)
    assert generator.stats.skipped == 1 and generator.stats.accepted == 1
    assert set(router.calls) == {items[1]["question"].strip()}
    assert [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] == [*samples[0], *samples[1]]


def test_output_is_flushed_after_each_query(retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS[:4]
    out = tmp_path / "samples.jsonl"
    seen: list[int] = []

    def count_lines(_: str) -> None:  # runs when each query asks for its final answer
        seen.append(len(out.read_text(encoding="utf-8").splitlines()) if out.exists() else 0)

    router = RoutedLLM({it["question"]: hotpot_script(it) for it in items}, on_final=count_lines)
    source = write_jsonl(tmp_path / "in.jsonl", [{"query": it["question"], "answer": it["answer"]} for it in items])
    run(router, retrieval_url, source, out, max_path_length=1, threads=1)
    assert seen == [0, 3, 6, 9]  # each earlier query's 3 lines were on disk before the next one finished


def test_many_threads_keep_queries_whole_and_in_order(retrieval_url: str, tmp_path: Path) -> None:
    items = HOTPOT_ITEMS + MUSIQUE_ITEMS
    scripts = {it["question"]: hotpot_script(it) for it in HOTPOT_ITEMS}
    scripts.update({it["question"]: Script([it["question_decomposition"][0]["question"]], [it["answer"]])
                    for it in MUSIQUE_ITEMS})
    out = tmp_path / "samples.jsonl"
    samples, generator, _ = run(RoutedLLM(scripts), retrieval_url, write_jsonl(tmp_path / "in.jsonl", items), out,
                                threads=16, max_path_length=2)
    assert generator.stats.accepted == len(items) == 20
    assert [group[0]["query_id"] for group in samples] == [it.get("_id") or it["id"] for it in items]
    lines = read_lines(out)
    assert len(lines) == sum(len(group) for group in samples)
    # lines of one query are contiguous and end with its final-answer sample
    blocks: list[str] = []
    for line in lines:
        if not blocks or blocks[-1] != line["query_id"]:
            blocks.append(line["query_id"])
    assert sorted(blocks) == sorted(group[0]["query_id"] for group in samples)
    assert sum(line["type"] == SAMPLE_TYPES[2] for line in lines) == 20


def test_judge_llm_decides(retrieval_url: str, tmp_path: Path) -> None:
    item = HOTPOT_ITEMS[0]
    # containment would accept "not a spirit"; the judge (exact answer match in the router) says NO
    router = RoutedLLM({item["question"]: hotpot_script(item, ["not a spirit", "a spirit"])})
    source = write_jsonl(tmp_path / "in.jsonl", [{"query": item["question"], "answer": "a spirit"}])
    _, generator, server = run(router, retrieval_url, source, tmp_path / "o.jsonl", judge=True,
                                     max_path_length=1)
    assert generator.stats.attempts == 2 and generator.stats.accepted == 1
    assert len(server.prompts("You are an expert evaluator")) == 2


def test_failing_attempts_are_counted(retrieval_url: str, tmp_path: Path) -> None:
    good, bad = HOTPOT_ITEMS[:2]
    router = RoutedLLM({it["question"]: hotpot_script(it) for it in (good, bad)}, fail_final={bad["question"]})
    records = [{"query": it["question"], "answer": it["answer"]} for it in (good, bad)]
    source = write_jsonl(tmp_path / "in.jsonl", [*records, {"answer": "no question"}, {"query": "no answer"}])
    samples, generator, _ = run(router, retrieval_url, source, tmp_path / "o.jsonl", n_samples=2, max_path_length=1)
    assert len(samples) == 1
    assert generator.stats.failed == 3 and generator.stats.errors == 2 and generator.stats.accepted == 1


def test_bad_inputs(retrieval_url: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"query": "q", "answer": "a"}\n{"query": \n', encoding="utf-8")
    router = RoutedLLM({})
    with pytest.raises(ParameterError, match="line 2"):
        run(router, retrieval_url, broken, tmp_path / "o.jsonl")
    with pytest.raises(ParameterError, match="n_samples"):
        run(router, retrieval_url, write_jsonl(tmp_path / "in.jsonl", []), tmp_path / "o.jsonl", n_samples=0)
    with pytest.raises(ParameterError, match="input_file"):
        run(router, retrieval_url, tmp_path / "missing.jsonl", tmp_path / "o.jsonl")
    with pytest.raises(ParameterError, match="config"):
        SampleGenerator(object())  # type: ignore[arg-type]
