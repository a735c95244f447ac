# SPDX-License-Identifier: Apache-2.0
"""Benchmark the retrievers on HotpotQA: supporting-passage recall@5 and latency.

The 100 HotpotQA (train) questions of ``hotpotqa_train.json`` are asked against the whole
994-paragraph corpus of ``hotpotqa_train_corpus.json``, one chunk per paragraph. A chunk's text is
``"<title>: <paragraph>"`` by default (``--content text``: the paragraph alone), so the title is
seen by both the embedding and the keyword index; the title is also kept in the chunk metadata,
which is what the scoring reads. All chunks live in one ``SQLiteDocstore`` (FTS5 index) and one
in-memory ``MindFAISS`` (FLAT, inner product) of ``TextEmbedding("all-MiniLM-L6-v2")`` vectors.

Methods, all with ``k=5``:

* ``dense``: ``Retriever`` (MiniLM);
* ``hybrid``: ``HybridRetriever`` (dense + FTS5 keyword search, reciprocal rank fusion);
* ``full_text``: ``FullTextRetriever`` (SQLite FTS5 BM25 on mx_rag's tokens);
* ``bm25_reference``: not an mx_rag retriever: Okapi BM25 with rank-bm25's formula and constants
  (k1=1.5, b=0.75, epsilon=0.25) in plain Python, on the same tokens, to cross-check the FTS5 side;
* ``multi_query_length`` / ``multi_query_rrf``: ``MultiQueryRetriever`` over the dense retriever
  with the embedded LLM (``LocalLLMServer``: the registry's default, or ``$MXRAG_LLM_MODEL``; the
  figures in docs/benchmarks.md were taken with SmolLM2-135M), ``fusion="length"`` (the
  documented behaviour) and ``fusion="rrf"``. It returns up to 5 x (1 + rewrites) documents;
  recall@5 scores the first 5 of its output (``recall_at_all`` scores the whole output);
* ``multi_query_rrf_no_prompt_copies``: the ``rrf`` run without the rewrites found verbatim in the
  prompt (a simulation of a proposed guard in ``generate_queries``, not library behaviour).

Scores per method: ``recall_at_5`` (fraction of a question's gold supporting titles among the
first 5 documents, averaged over questions) and ``all_found_at_5`` (fraction of questions with
every supporting title in the first 5); latency per question (p50/p90/mean, ms, sequential, after
one untimed warm-up query).

The LLM is called once per question: the ``length`` run calls it for real (``generate_queries``,
timed separately as ``llm_*_ms``); the ``rrf`` run replays the same rewrites, so both fusions see
identical queries, and its end-to-end latency is its own retrieval time plus that question's LLM
time. Generation is greedy (temperature 0, ``--max-tokens`` 128). The prompt is the library's
default prompt translated into English (``--prompt en``, the default: the questions and MiniLM are
English) or the library's default Chinese prompt itself (``--prompt zh``). The multi-query methods
also report how many rewrites the LLM produced (``avg_rewrites``, via ``generate_queries``), the
share of rewrites copied verbatim from the prompt's worked example, and recall over their whole
output next to dense recall@10/@20.

llama.cpp (``--llm-threads``) and torch (``--torch-threads``) run on 1 thread each by default: on a
2-core machine shared with other jobs, 2 threads made both 10 to 45 times slower
(threads spinning for a busy core). Corpus vectors are cached in ``--cache-dir`` (keyed by model
and texts), so only the first run pays the minute or two of embedding.

Output: JSON lines on stdout: the environment, an indexing line, then one line per method.
``--details FILE`` also writes, per question, each method's first 5 titles and the LLM output.

Run::

    .venv/bin/python bench/multi_query.py            # 100 questions: a few minutes on 2 cores
    .venv/bin/python bench/multi_query.py --quick    # 20 questions
    .venv/bin/python bench/multi_query.py --no-llm   # retrieval methods only, well under a minute
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import (
    CACHE_DIR,
    MULTIHOP,
    WARMUP_QUESTION,
    Question,
    cached_vectors,
    emit,
    environment,
    load_corpus,
    load_questions,
    loadavg_1m,
    package_version,
    percentile,
    pin_torch_threads,
    positive_int,
)
from langchain_core.documents import Document
from langchain_core.prompts import PromptTemplate
from pydantic import PrivateAttr

from mx_rag.embedding.local import TextEmbedding
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.llm.local_server import LocalLLMServer
from mx_rag.llm.models import model_name
from mx_rag.retrievers import FullTextRetriever, HybridRetriever, MultiQueryRetriever, Retriever
from mx_rag.retrievers.multi_query_retriever import DEFAULT_QUERY_PROMPT_CH
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.document_store.text_tokens import query_tokens, tokenize
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.utils import ClientParam

BENCH = "multi_query"
K = 5
EMBEDDING_MODEL = "all-MiniLM-L6-v2"

# DEFAULT_QUERY_PROMPT_CH, translated: same instructions, same worked example, same layout.
QUERY_PROMPT_EN = PromptTemplate(
    input_variables=["question"],
    template=(
        "You are an AI language model assistant. Rewrite the user's original question from different "
        "angles as three questions, to help retrieve more complete information. Answer in English, one "
        "question per line, numbered from 1.\n"
        "Example:\n"
        "Original question: Can you tell me about Einstein?\n"
        "Three rewritten questions:\n"
        "1. What were Einstein's life and main scientific achievements?\n"
        "2. What did Einstein contribute to relativity and other fields of physics?\n"
        "3. What was Einstein's personal life and his influence on society?\n"
        "Original question to rewrite: {question}"
    ),
)
PROMPTS = {"en": QUERY_PROMPT_EN, "zh": DEFAULT_QUERY_PROMPT_CH}


# -- the reference BM25 ------------------------------------------------------------------------


class OkapiBM25:
    """rank-bm25's ``BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25), on mx_rag's tokens."""

    def __init__(self, docs: Sequence[MxDocument], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.docs = list(docs)
        self.k1, self.b = k1, b
        self.tf = [Counter(tokenize(doc.page_content)) for doc in self.docs]
        self.lengths = [sum(tf.values()) for tf in self.tf]
        self.avgdl = sum(self.lengths) / len(self.lengths)
        df: Counter[str] = Counter()
        for tf in self.tf:
            df.update(tf.keys())
        n = len(self.docs)
        self.idf = {word: math.log(n - freq + 0.5) - math.log(freq + 0.5) for word, freq in df.items()}
        floor = epsilon * sum(self.idf.values()) / len(self.idf)
        self.idf = {word: (idf if idf >= 0 else floor) for word, idf in self.idf.items()}

    def invoke(self, query: str) -> list[Document]:
        words = query_tokens(query)
        scores = []
        for i, (tf, length) in enumerate(zip(self.tf, self.lengths, strict=True)):
            norm = self.k1 * (1 - self.b + self.b * length / self.avgdl)
            score = sum(self.idf.get(w, 0.0) * tf[w] * (self.k1 + 1) / (tf[w] + norm) for w in words if w in tf)
            scores.append((-score, i))
        return [self.docs[i].to_langchain(score=-s) for s, i in sorted(scores)[:K]]


# -- MultiQueryRetriever, recording or replaying its LLM rewrites ------------------------------


class RecordingMultiQuery(MultiQueryRetriever):
    """The library retriever; ``generate_queries`` is timed and its result kept per question."""

    _record: dict[str, tuple[list[str], float]] = PrivateAttr(default_factory=dict)

    def generate_queries(self, query: str) -> list[str]:
        start = time.perf_counter()
        queries = super().generate_queries(query)
        self._record[query] = (queries, time.perf_counter() - start)
        return queries


class RecordingLLM(Text2TextLLM):
    """``Text2TextLLM`` keeping each raw answer per prompt (for ``--details``)."""

    _answers: dict[str, str] = PrivateAttr(default_factory=dict)

    def chat(self, query: str, *args: Any, **kwargs: Any) -> str:
        answer = super().chat(query, *args, **kwargs)
        self._answers[query] = answer
        return answer


class ReplayingMultiQuery(MultiQueryRetriever):
    """The library retriever, given the queries another run generated (no LLM call)."""

    _replay: dict[str, tuple[list[str], float]] = PrivateAttr(default_factory=dict)

    def generate_queries(self, query: str) -> list[str]:
        return list(self._replay[query][0])


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class Result:
    method: str
    latencies: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)
    all_found: list[bool] = field(default_factory=list)
    recalls_all: list[float] = field(default_factory=list)
    all_found_all: list[bool] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    top_titles: list[list[str]] = field(default_factory=list)


def titles(docs: Sequence[Document]) -> list[str]:
    return [doc.metadata["title"] for doc in docs]


def score(result: Result, question: Question, docs: Sequence[Document], seconds: float) -> None:
    top = set(titles(docs[:K]))
    every = set(titles(docs))
    result.latencies.append(seconds)
    result.recalls.append(len(question.gold & top) / len(question.gold))
    result.all_found.append(question.gold <= top)
    result.recalls_all.append(len(question.gold & every) / len(question.gold))
    result.all_found_all.append(question.gold <= every)
    result.returned.append(len(docs))
    result.top_titles.append(titles(docs[:K]))


def run_method(method: str, invoke: Callable[[str], list[Document]], questions: Sequence[Question]) -> Result:
    invoke(WARMUP_QUESTION)
    result = Result(method)
    for question in questions:
        start = time.perf_counter()
        docs = invoke(question.text)
        score(result, question, docs, time.perf_counter() - start)
    return result


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def method_line(result: Result, **extra: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "bench": BENCH, "method": result.method, "questions": len(result.recalls), "k": K,
        "recall_at_5": round(mean(result.recalls), 4),
        "all_found_at_5": round(mean([float(x) for x in result.all_found]), 4),
        "p50_ms": ms(percentile(result.latencies, 0.5)),
        "p90_ms": ms(percentile(result.latencies, 0.9)),
        "mean_ms": ms(mean(result.latencies)),
    }
    line.update(extra)
    line["loadavg_1m"] = loadavg_1m()
    return line


# -- main --------------------------------------------------------------------------------------


def environment_line(args: argparse.Namespace, corpus_size: int, questions: int) -> dict[str, Any]:
    return environment(
        BENCH, "method", platform=platform.platform(), cpu_count=os.cpu_count(), loadavg_1m=loadavg_1m(),
        sqlite=sqlite3.sqlite_version, mxrag=package_version("mxrag"), torch=package_version("torch"),
        transformers=package_version("transformers"), faiss=package_version("faiss-cpu"),
        xllamacpp=package_version("xllamacpp"), langchain_core=package_version("langchain-core"),
        corpus_chunks=corpus_size, questions=questions, content=args.content, embedding=EMBEDDING_MODEL,
        torch_threads=args.torch_threads, vector_index="MindFAISS FLAT IP (CPU)",
        llm=None if args.no_llm else model_name(None), llm_threads=args.llm_threads, prompt=args.prompt,
        temperature=0.0, max_tokens=args.max_tokens,
    )


def rewrite_stats(record: dict[str, tuple[list[str], float]], questions: Sequence[Question],
                  prompt: PromptTemplate) -> dict[str, Any]:
    rewrites = [record[q.text][0][1:] for q in questions]
    flat = [r for rs in rewrites for r in rs]
    return {
        "avg_rewrites": round(mean([len(rs) for rs in rewrites]), 2),
        "no_rewrite_rate": round(mean([float(not rs) for rs in rewrites]), 4),
        "rewrites_copied_from_prompt": round(mean([float(r in prompt.template) for r in flat]), 4) if flat else 0.0,
        "rewrites_distinct_over_all_questions": len(set(flat)),
    }


def multi_query_lines(
    args: argparse.Namespace, questions: Sequence[Question], common: dict[str, Any], details: dict[str, Any]
) -> list[dict[str, Any]]:
    prompt = PROMPTS[args.prompt]
    config = LLMParameterConfig(max_tokens=args.max_tokens, temperature=0.0, seed=0)
    kwargs = {"prompt": prompt, "llm_config": config, **common}
    with LocalLLMServer(n_parallel=2, n_threads=args.llm_threads) as server:
        llm = RecordingLLM(base_url=server.chat_url, model_name=server.model_name,
                           client_param=ClientParam(use_http=True, timeout=300, retries=0))
        try:
            recording = RecordingMultiQuery(llm=llm, fusion="length", **kwargs)
            runs = [(run_method("multi_query_length", recording.invoke, questions), recording._record, {})]
            record = recording._record
            # The same rewrites, fused by RRF; then without the rewrites copied from the prompt (what
            # a guard in generate_queries would leave: a proposal, simulated here).
            unechoed = {q: ([qs[0], *[r for r in qs[1:] if r not in prompt.template]], secs)
                        for q, (qs, secs) in record.items()}
            for name, replay, extra in (
                ("multi_query_rrf", record, {}),
                ("multi_query_rrf_no_prompt_copies", unechoed,
                 {"note": "simulated guard (not library behaviour): rewrites found verbatim in the prompt dropped"}),
            ):
                replaying = ReplayingMultiQuery(llm=llm, fusion="rrf", **kwargs)
                replaying._replay = replay
                runs.append((run_method(name, replaying.invoke, questions), replay, extra))
        finally:
            llm.close()
    llm_seconds = [record[q.text][1] for q in questions]
    llm_stats = {"llm_p50_ms": ms(percentile(llm_seconds, 0.5)), "llm_mean_ms": ms(mean(llm_seconds))}
    lines = []
    for result, replay, extra in runs:
        if result.method != "multi_query_length":  # replayed: end to end = the LLM time + its own
            result.latencies = [own + llm_s for own, llm_s in zip(result.latencies, llm_seconds, strict=True)]
        retrieval = [total - llm_s for total, llm_s in zip(result.latencies, llm_seconds, strict=True)]
        lines.append(method_line(
            result, fusion="length" if result.method == "multi_query_length" else "rrf",
            **rewrite_stats(replay, questions, prompt), **llm_stats,
            retrieval_p50_ms=ms(percentile(retrieval, 0.5)),
            avg_docs_returned=round(mean(result.returned), 2),
            recall_at_all=round(mean(result.recalls_all), 4),
            all_found_at_all=round(mean([float(x) for x in result.all_found_all]), 4),
            **extra,
        ))
        details[result.method] = result
    lines[0]["example_rewrites"] = record[questions[0].text][0][1:4]
    details["queries"] = [record[q.text][0] for q in questions]
    details["llm_answers"] = [llm._answers.get(prompt.format(question=q.text)) for q in questions]
    return lines


def run(args: argparse.Namespace) -> None:
    pin_torch_threads(args.torch_threads)
    questions = load_questions(args.data_dir, args.questions)
    corpus = load_corpus(args.data_dir, args.content)
    emit(environment_line(args, len(corpus), len(questions)))
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-mq-") as workdir:
        embedding = TextEmbedding("all-MiniLM-L6-v2")
        start = time.perf_counter()
        texts = [doc.page_content for doc in corpus]
        vectors, seconds = cached_vectors(embedding.embed_documents, EMBEDDING_MODEL, texts, args.cache_dir, "hotpotqa")
        embed_s, cached = time.perf_counter() - start, seconds is None
        docstore = SQLiteDocstore(Path(workdir) / "chunks.db")
        vector_store = MindFAISS(x_dim=embedding.dimension, devs=None, load_local_index=None)
        start = time.perf_counter()
        ids = docstore.add(corpus, document_id=1)
        vector_store.add(ids, vectors, document_id=1)
        emit({"bench": BENCH, "method": "indexing", "chunks": len(ids), "embed_s": round(embed_s, 2),
              "embed_cached": cached,
              "store_s": round(time.perf_counter() - start, 3)})
        common = {"vector_store": vector_store, "document_store": docstore, "embed_func": embedding.embed_documents,
                  "k": K}
        details: dict[str, Any] = {}
        try:
            dense = details["dense"] = run_method("dense", Retriever(**common).invoke, questions)
            emit(method_line(dense, **wider_recalls(Retriever(**{**common, "k": 20}), questions)))
            hybrid = details["hybrid"] = run_method("hybrid", HybridRetriever(**common).invoke, questions)
            emit(method_line(hybrid, fetch_k=2 * K, rrf_k=60))
            keyword = FullTextRetriever(document_store=docstore, k=K)
            emit(method_line(details.setdefault("full_text", run_method("full_text", keyword.invoke, questions))))
            reference = details["bm25_reference"] = run_method("bm25_reference", OkapiBM25(corpus).invoke, questions)
            emit(method_line(reference, note="not an mx_rag retriever: rank-bm25 formula in Python on mx_rag tokens"))
            if not args.no_llm:
                for line in multi_query_lines(args, questions, common, details):
                    emit(line)
        finally:
            docstore.close()
            if args.details is not None:
                write_details(args.details, questions, details)


def write_details(path: Path, questions: Sequence[Question], details: dict[str, Any]) -> None:
    """One JSON line per question: the gold titles, each method's first 5 titles, the LLM's output."""
    with path.open("w", encoding="utf-8") as out:
        for i, question in enumerate(questions):
            record: dict[str, Any] = {"question": question.text, "gold": sorted(question.gold)}
            for name, value in details.items():
                if isinstance(value, Result) and i < len(value.top_titles):
                    record[name] = value.top_titles[i]
                elif isinstance(value, list) and i < len(value):
                    record[name] = value[i]
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def wider_recalls(retriever: Retriever, questions: Sequence[Question]) -> dict[str, float]:
    """recall@10 and @20 of a k=20 retriever (an untimed extra pass; FLAT search is exact, so its
    first 10 are what k=10 returns)."""
    docs = [titles(retriever.invoke(q.text)) for q in questions]
    out: dict[str, float] = {}
    for depth in (10, 20):
        found = [len(q.gold & set(d[:depth])) / len(q.gold) for q, d in zip(questions, docs, strict=True)]
        out[f"recall_at_{depth}"] = round(mean(found), 4)
        out[f"all_found_at_{depth}"] = round(mean([float(f == 1.0) for f in found]), 4)
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", type=Path, default=MULTIHOP, help="folder of the HotpotQA files")
    parser.add_argument("--questions", type=positive_int, default=100, help="questions asked (the first N)")
    parser.add_argument("--quick", action="store_true", help="20 questions (overrides --questions)")
    parser.add_argument("--content", choices=("title_text", "text"), default="title_text",
                        help="chunk text: 'title: paragraph' or the paragraph alone (title in metadata only)")
    parser.add_argument("--prompt", choices=tuple(PROMPTS), default="en",
                        help="rewrite prompt: the library default translated into English, or the default itself")
    parser.add_argument("--max-tokens", type=positive_int, default=128, help="LLM tokens per rewrite call")
    parser.add_argument("--llm-threads", type=positive_int, default=1, help="llama.cpp threads")
    parser.add_argument("--torch-threads", type=positive_int, default=1,
                        help="torch CPU threads of the query and corpus embedding")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR,
                        help="where corpus vectors are kept between runs")
    parser.add_argument("--no-cache", dest="cache_dir", action="store_const", const=None,
                        help="embed the corpus afresh, keep nothing")
    parser.add_argument("--details", type=Path, default=None,
                        help="also write per-question results (titles found, LLM output) to this JSONL file")
    parser.add_argument("--no-llm", action="store_true", help="skip the MultiQueryRetriever methods")
    args = parser.parse_args(argv)
    if args.quick:
        args.questions = 20
    return args


def main(argv: Sequence[str] | None = None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
