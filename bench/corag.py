# SPDX-License-Identifier: Apache-2.0
"""Questions per minute of ``CoRagEvaluator`` with 1, 4 and 8 threads, against an LLM that takes 200 ms.

The LLM is an in-process ``mx_rag.testing.ScriptedServer`` that answers every chat call after a
fixed delay (``--delay-ms``, default 200), with replies computed from the prompt: the sub-queries
are the question's supporting titles, then ``Final Answer: <reference answer>``; a sub-answer
names the top document; the final answer is the reference answer. The server sleeps in one thread
per connection, so it serves any number of calls at once: what limits the rate is how well the
evaluator keeps calls in flight. Retrieval is real: the retrieval API server
(``create_retrieval_app`` + ``RetrievalServer``, over HTTP) over a FAISS + SQLite knowledge base
of every paragraph of the question file (``--data``, default the 100 HotpotQA questions of
../shared/data/multihop/hotpotqa_train.json: 994 paragraphs), embedded with ``HashEmbedding`` (no model, so
retrieval costs little CPU beside the delay; ``--embedding minilm`` uses all-MiniLM-L6-v2).

Each evaluator run evaluates ``--questions`` HotpotQA questions (naive baseline and recall on, as
``evaluate``'s defaults) and is checked: every question answered correctly, no failure.

Peer in the same run (``plain``): the "plain library" way, an ``openai`` client and an ``httpx``
client in a loop, making per question the same number of LLM calls and retrieval requests as the
evaluator made on average (one after the other), with 1 and 8 threads over the questions. It has
no prompt building, parsing or scoring, so ``plain`` at 8 threads is the practical ceiling.
``ideal_qpm`` is the arithmetic bound ``60 * threads / (llm_calls_per_question * delay)``.

Output: JSON lines on stdout. An environment line; one line per setting (``qpm``: questions per
minute, the median over ``--rounds``; ``efficiency`` = ``qpm / ideal_qpm``); a summary with
``speedup_4_vs_1``, ``speedup_8_vs_1``, ``goal_6x_met`` (8 threads at least 6 times 1 thread) and
the ratios to the plain peer. Settings run in a rotating order per round so drift hits all.

Run::

    .venv/bin/python bench/corag.py               # 24 questions per setting, about 2 minutes
    .venv/bin/python bench/corag.py --quick       # 8 questions, no peer, under a minute
    .venv/bin/python bench/corag.py --rounds 3 --questions 48
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _harness import ROOT, emit, environment, loadavg_1m, package_version, positive_int, rotating_rounds

from mx_rag.corag.config import CoRagBaseConfig
from mx_rag.corag.datasets import iter_passages
from mx_rag.corag.evaluator import CoRagEvaluator
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.server import RetrievalServer, create_retrieval_app
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

BENCH = "corag"
SHARED = ROOT.parent / "shared" / "data" / "multihop" / "hotpotqa_train.json"  # 100 questions
SAMPLE = ROOT / "tests" / "data" / "multihop" / "hotpotqa_sample.json"  # its first 12
THREADS = (1, 4, 8)
PLAIN_THREADS = (1, 8)
HASH_DIM = 1024

_MAIN = re.compile(r"## Main question\n(.*?)\n", re.DOTALL)
_FIRST_DOC = re.compile(r"Document 1:\n(.*?)\n")
_STEP = re.compile(r"^Step \d+:", re.MULTILINE)


class BenchError(Exception):
    """A run went wrong (wrong answers, failures): its figures would be meaningless."""


# -- the scripted LLM ------------------------------------------------------------------------------


class DelayedLLM(ScriptedServer):
    """Answers every chat call after ``delay`` seconds, computing the reply from the prompt."""

    def __init__(self, items: list[dict[str, Any]], delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.script = {it["question"].strip(): (supporting_titles(it), str(it["answer"])) for it in items}
        self.calls = 0
        self._count = threading.Lock()

    def _take(self, record: RecordedRequest) -> Reply | None:
        with self._count:
            self.calls += 1
        messages = (record.json or {}).get("messages") or [{}]
        return Reply.chat(self.reply(str(messages[-1].get("content", ""))), delay=self.delay)

    def reply(self, prompt: str) -> str:
        main = _MAIN.search(prompt)
        if "Write the next search query" in prompt and main:
            titles, answer = self.script[main.group(1).strip()]
            done = len(_STEP.findall(prompt))
            return f"SubQuery: {titles[done]}" if done < len(titles) else f"Final Answer: {answer}"
        if prompt.startswith("Answer the question using only"):
            top = _FIRST_DOC.search(prompt)
            return top.group(1) if top else "No relevant information available"
        if prompt.startswith("Answer the main question") and main:
            return self.script[main.group(1).strip()][1]
        return "OK"  # the plain peer's calls


def supporting_titles(item: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(title for title, _ in item["supporting_facts"]))


# -- the retrieval API over a knowledge base -------------------------------------------------------


def build_retriever(root: Path, records: list[dict[str, Any]], embedding: str) -> Retriever:
    """Every paragraph of ``records`` (the whole question file), one ``"Title\\ntext"`` chunk each."""
    passages = list(iter_passages(records))
    embedder: Any
    if embedding == "minilm":
        from mx_rag.embedding.local import TextEmbedding

        embedder = TextEmbedding("all-MiniLM-L6-v2")
    else:
        from mx_rag.testing import HashEmbedding

        embedder = HashEmbedding(HASH_DIM)
    docstore = SQLiteDocstore(db_path=str(root / "kb.db"))
    vectors = MindFAISS(x_dim=len(embedder.embed_documents(["probe"])[0]), devs=[0],
                        load_local_index=str(root / "kb.index"))
    ids = docstore.add([MxDocument(text, {"title": title}) for title, text in passages], 1)
    vectors.add(ids, embedder.embed_documents([text for _, text in passages]), document_id=1)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=embedder.embed_documents, k=5)


# -- the two ways of answering ----------------------------------------------------------------------


def run_evaluator(llm_server: DelayedLLM, retrieval_url: str, eval_file: Path, work: Path,
                  threads: int) -> dict[str, Any]:
    llm = Text2TextLLM(base_url=llm_server.url("/v1/chat/completions"), model_name="scripted",
                       llm_config=LLMParameterConfig(max_tokens=64, temperature=0.0),
                       client_param=ClientParam(use_http=True, retries=0))
    config = CoRagBaseConfig(llm, retrieval_url, num_threads=threads, max_path_length=3,
                             client_param=ClientParam(use_http=True, retries=0))
    calls_before = llm_server.calls
    start = time.perf_counter()
    report = CoRagEvaluator(config).evaluate(str(eval_file), str(work / f"report-{threads}.json"))
    wall = time.perf_counter() - start
    summary, records = report[0], report[1:]
    if summary["failed_count"] or summary["corag_accuracy"] != 1.0 or summary["retrieval_failure_count"]:
        raise BenchError(f"evaluator run with {threads} threads went wrong: {json.dumps(summary)}")
    return {"wall": wall, "questions": len(records), "llm_calls": llm_server.calls - calls_before,
            "retrievals": sum(r["retrieval_calls"] for r in records)}


def run_plain(llm_server: DelayedLLM, retrieval_url: str, questions: list[str], threads: int,
              llm_calls: int, retrievals: int) -> dict[str, Any]:
    """Per question: ``retrievals`` POSTs and ``llm_calls`` chat calls, one after the other."""
    import httpx
    import openai

    client = openai.OpenAI(base_url=llm_server.base_url + "/v1", api_key="x", max_retries=0)
    http = httpx.Client(timeout=60)
    calls_before = llm_server.calls

    def answer(question: str) -> None:
        for _ in range(retrievals):
            response = http.post(retrieval_url, json={"query": question, "top_k": 5})
            response.raise_for_status()
        for step in range(llm_calls):
            completion = client.chat.completions.create(
                model="scripted", max_tokens=64, temperature=0.0,
                messages=[{"role": "user", "content": f"Step {step} of: {question}"}])
            if completion.choices[0].message.content != "OK":
                raise BenchError(f"the plain client got {completion.choices[0].message.content!r}")

    start = time.perf_counter()
    try:
        if threads == 1:
            for question in questions:
                answer(question)
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(answer, questions))
    finally:
        client.close()
        http.close()
    wall = time.perf_counter() - start
    return {"wall": wall, "questions": len(questions), "llm_calls": llm_server.calls - calls_before,
            "retrievals": retrievals * len(questions)}


# -- output -----------------------------------------------------------------------------------------


def setting_line(scenario: str, threads: int, runs: list[dict[str, Any]], delay: float) -> dict[str, Any]:
    qpms = [60 * run["questions"] / run["wall"] for run in runs]
    qpm = statistics.median(qpms)
    calls = runs[0]["llm_calls"] / runs[0]["questions"]
    ideal = 60 * threads / (calls * delay)
    return {
        "bench": BENCH, "scenario": scenario, "threads": threads, "questions": runs[0]["questions"],
        "rounds": len(runs), "qpm": round(qpm, 1), "qpm_all": [round(q, 1) for q in qpms],
        "wall_s": round(statistics.median(run["wall"] for run in runs), 2),
        "llm_calls_per_question": round(calls, 2),
        "retrievals_per_question": round(runs[0]["retrievals"] / runs[0]["questions"], 2),
        "ideal_qpm": round(ideal, 1), "efficiency": round(qpm / ideal, 3),
    }


def environment_line(args: argparse.Namespace) -> dict[str, Any]:
    return environment(
        BENCH, mxrag=package_version("mxrag"), httpx=package_version("httpx"), openai=package_version("openai"),
        cpu_count=os.cpu_count(), loadavg_1m=loadavg_1m(), platform=platform.platform(), questions=args.questions,
        rounds=args.rounds, delay_ms=args.delay_ms, embedding=args.embedding, peer=not args.no_peer,
        data=args.data.name,
    )


# -- main -------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--questions", type=positive_int, default=24, help="HotpotQA questions per run (max 100)")
    parser.add_argument("--rounds", type=positive_int, default=1, help="runs per setting; the median is reported")
    parser.add_argument("--delay-ms", type=positive_int, default=200, help="the LLM's delay per call")
    parser.add_argument("--embedding", choices=("hash", "minilm"), default="hash",
                        help="knowledge-base embedder: HashEmbedding (default) or all-MiniLM-L6-v2")
    parser.add_argument("--no-peer", action="store_true", help="skip the plain openai + httpx loop")
    parser.add_argument("--data", type=Path, default=SHARED if SHARED.is_file() else SAMPLE,
                        help="HotpotQA questions; their paragraphs are the corpus (default: the shared 100, "
                             "else the test sample of 12)")
    parser.add_argument("--quick", action="store_true", help="8 questions, 1 round, no peer")
    args = parser.parse_args(argv)
    if args.quick:
        args.questions, args.rounds, args.no_peer = 8, 1, True
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    delay = args.delay_ms / 1000
    records = json.loads(args.data.read_text(encoding="utf-8"))
    if args.questions > len(records):
        raise BenchError(f"--questions {args.questions}: {args.data} has only {len(records)} questions")
    items = records[: args.questions]
    emit(environment_line(args))
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-corag-") as tmp:
        work = Path(tmp)
        eval_file = work / "eval.json"
        eval_file.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
        warm_file = work / "warm.json"
        warm_file.write_text(json.dumps(items[:2], ensure_ascii=False), encoding="utf-8")
        app = create_retrieval_app(build_retriever(work, records, args.embedding), max_top_k=50)
        with RetrievalServer(app) as retrieval, DelayedLLM(items, delay) as llm_server:
            run_evaluator(llm_server, retrieval.url, warm_file, work, 2)  # untimed: imports, connections
            settings = [("evaluator", t) for t in THREADS]
            if not args.no_peer:
                settings += [("plain", t) for t in PLAIN_THREADS]
            runs: dict[tuple[str, int], list[dict[str, Any]]] = {s: [] for s in settings}
            for _, (scenario, threads) in rotating_rounds(settings, args.rounds):
                if scenario == "evaluator":
                    runs[(scenario, threads)].append(run_evaluator(llm_server, retrieval.url, eval_file, work, threads))
                    continue
                reference = runs[("evaluator", 1)][0] if runs[("evaluator", 1)] else run_evaluator(
                    llm_server, retrieval.url, eval_file, work, 1)
                calls = round(reference["llm_calls"] / reference["questions"])
                fetches = round(reference["retrievals"] / reference["questions"])
                questions = [it["question"].strip() for it in items]
                runs[(scenario, threads)].append(
                    run_plain(llm_server, retrieval.url, questions, threads, calls, fetches))
    lines = {s: setting_line(s[0], s[1], runs[s], delay) for s in settings}
    for line in lines.values():
        emit(line)
    one, four, eight = (lines[("evaluator", t)]["qpm"] for t in THREADS)
    summary: dict[str, Any] = {
        "bench": BENCH, "scenario": "summary", "qpm_1": one, "qpm_4": four, "qpm_8": eight,
        "speedup_4_vs_1": round(four / one, 2), "speedup_8_vs_1": round(eight / one, 2),
        "goal_6x_met": eight >= 6 * one,
    }
    if not args.no_peer:
        summary["evaluator_vs_plain_1"] = round(one / lines[("plain", 1)]["qpm"], 3)
        summary["evaluator_vs_plain_8"] = round(eight / lines[("plain", 8)]["qpm"], 3)
        summary["plain_speedup_8_vs_1"] = round(lines[("plain", 8)]["qpm"] / lines[("plain", 1)]["qpm"], 2)
    emit(summary)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/corag.py: {exc}", file=sys.stderr)
        sys.exit(1)
