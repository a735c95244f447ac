# SPDX-License-Identifier: Apache-2.0
# ruff: noqa: E501  (the seed's system prompt below is kept verbatim, long lines included)
"""Time to first token of ``SingleText2TextChain`` and ``ParallelText2TextChain`` on a real LLM.

Everything is real and local: the embedded llama.cpp server (``LocalLLMServer``, SmolLM2-135M,
prompt cache on), a ``LocalKnowledge`` base (its default embedding + FAISS + SQLite) over the Debian Reference
(878 KB of text, about 1,400 chunks), and a ``LocalReranker`` (a cross-encoder built from the MiniLM
weights, as in tests/reranker) that reranks the top ``--candidates`` chunks down to 1. The settings
are the seed's image-and-text example: ``k=1`` document and its long ``TEXT_INFER_PROMPT`` as the
system message.

Three variants answer the same questions:

* ``single``: ``SingleText2TextChain``, its default user message (documents, prompt, question);
* ``single_playout``: ``SingleText2TextChain`` with the parallel chain's user message (prompt and
  question first, then the documents), so that ``single_playout`` vs ``parallel`` isolates the
  effect of overlapping retrieval with the prefix prefill;
* ``parallel``: ``ParallelText2TextChain`` (warm-up request during retrieval, then the answer).

TTFT is the time from the ``query()`` call to the first streamed item (``stream=True``).

Cache state. Before every timed query each server slot gets a one-token request with the same
system message and an unrelated user message (a "previous user"), sent to that slot with
``id_slot``. So every timed query starts in the steady state of a busy server: the system message
is cached, nothing of the question or its documents is. llama.cpp's host-memory prompt cache
(``cache_ram_mib``) is switched off for the same reason: each question is asked three times (once
per variant), and that cache would otherwise hand a later variant the earlier variant's prompt.
``--cold-system`` gives the previous users another system message instead, so the system message
is not cached either (first query of a session, or a server shared with other applications).

Honesty measures: the server, the embedder and the reranker are warmed up before timing; the
variants run in a rotating order per question (ABC, BCA, CAB, ...); ``--repeats`` passes over the
questions; the server's own ``timings`` (``cache_n``: prompt tokens reused from the cache,
``prompt_n``: tokens prefilled, ``prompt_ms``) are read from every response, and every run checks
that the variants put identical documents (``source_documents``) in the prompt and that those
documents are in the final request. Any failed check exits 1.

Calibration (``--candidates auto``, the default): retrieval with reranking and the warm-up's
prefill are first timed alone; the candidate count whose retrieval time is closest to the prefix
prefill is used, as the overlap can hide at most the shorter of the two.

Output: JSON lines on stdout: environment, calibration, one line per variant, then a summary with
``reduction_vs_single`` and ``reduction_vs_single_playout`` (1 - median TTFT parallel / median TTFT
of the other; 0.30 means 30 % faster) and ``ceiling`` (the best reduction the overlap can give
with the measured times, see docs/benchmarks.md).

Run::

    .venv/bin/python bench/parallel_chain.py                 # 20 questions x 3 variants x 2 repeats
    .venv/bin/python bench/parallel_chain.py --quick         # smoke run
    .venv/bin/python bench/parallel_chain.py --llm-threads 2 --torch-threads 2 --n-parallel 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from _harness import emit, environment, loadavg, package_version, pin_torch_threads, rotated

import mx_rag.llm.openai_wire as openai_wire
from mx_rag.chain import ParallelText2TextChain, SingleText2TextChain
from mx_rag.chain.parallel_text_to_text import _parallel_user_content_builder
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.llm.local_server import LocalLLMServer
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils import ClientParam

BENCH = "parallel_chain"
DEFAULT_DOC = "/work/shared/data/docs/debian-reference/debian-reference.en.txt"
DEFAULT_WORKDIR = "/tmp/mx_rag_bench/parallel_chain"
CANDIDATE_GRID = (2, 5, 10, 15, 20, 30, 40, 60, 80)
VARIANTS = ("single", "single_playout", "parallel")

# The seed's image-and-text example system prompt, verbatim (seed 000, TEXT_INFER_PROMPT).
TEXT_INFER_PROMPT = """
You are a helpful question-answering assistant. Your task is to generate a interleaved text and image response based on provided questions and quotes. Here‘s how to refine your process:

1. **Evidence Selection**:
   - From both text and image quotes, pinpoint those really relevant for answering the question. Focus on significance and direct relevance.
   - Each image quote is the description of the image.

2. **Answer Construction**:
   - Use Markdown to embed text and images in your response, avoid using obvious headings or divisions; ensure the response flows naturally and cohesively.
   - Conclude with a direct and concise answer to the question in a simple and clear sentence.

3. **Quote Citation**:
   - Cite images using the format `![{conclusion}](image index)`; for the first image, use `![{conclusion}](image1)`;The {conclusion} should be a concise one-sentence summary of the image’s content.
   - Ensure the cite of the image must strict follow `![{conclusion}](image index)`, do not simply stating "See image1", "image1 shows" ,"[image1]" or "image1".
   - Each image or text can only be quoted once.

- Do not cite irrelevant quotes.
- Compose a detailed and articulate interleaved answer to the question.
- Ensure that your answer is logical, informative, and directly ties back to the evidence provided by the quotes.
- If Quote contain text and image, answer must contain both text and image response.
- If Quote only contain text, answer must contain text response, do not contain image.
- Answer in chinese.
"""

QUESTIONS = [
    "How do I add a new user account and put it in the sudo group?",
    "What is the difference between apt and aptitude for package management?",
    "How can I pin a package to a specific Debian suite with apt preferences?",
    "Which files does dpkg create under /var/lib/dpkg for installed packages?",
    "How do I configure GRUB boot loader options and regenerate its configuration?",
    "What journalctl commands show the kernel messages of the previous boot?",
    "How do I start, stop and enable a service with systemctl?",
    "What does the umask value control when new files are created?",
    "How do I set the locale and the time zone of the system?",
    "How can I configure a static IP address for a network interface?",
    "What are the basic key strokes to edit and save a file in Vim?",
    "How do I back up and restore data with rsync and tar?",
    "How can I create an encrypted disk partition with LUKS and cryptsetup?",
    "Which tools generate strong random passwords on Debian?",
    "How do I mount a USB storage device and make it mount at boot with fstab?",
    "What is the purpose of the /etc/apt/sources.list file and its entries?",
    "How can I find which package provides a given file?",
    "How do I set up SSH public key authentication for remote login?",
    "What shell glob patterns match files in bash?",
    "How do I compile and install a program from source with a Debian package?",
]
WARMUP_QUESTIONS = [
    "What is the Debian archive and how is it organized?",
    "How do I upgrade the whole system to the next Debian release?",
]


# -- instrumentation: the server's own timings and the request bodies ---------------------------


class Recorder:
    """Collects the ``timings`` llama.cpp puts in each response, and the chat request bodies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []

    def add(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            events, self.events = self.events, []
        return events

    def install(self) -> None:
        """Wraps the wire-format functions ``Text2TextLLM`` calls (bench-only, nothing else changes)."""
        parse, stream, body = openai_wire.parse_message, openai_wire.stream_deltas, openai_wire.chat_body

        def parse_message(data: Any, url: str) -> tuple[str, list[dict[str, Any]]]:
            if isinstance(data, dict):
                self.add({"kind": "chat", "timings": data.get("timings"), "at": time.perf_counter()})
            return parse(data, url)

        def stream_deltas(lines: Any, url: str) -> Iterator[str]:
            def tee() -> Iterator[str]:
                for line in lines:
                    if '"timings"' in line and line.startswith("data:"):
                        data = json.loads(line[5:])
                        self.add({"kind": "stream", "timings": data.get("timings"), "at": time.perf_counter()})
                    yield line

            return stream(tee(), url)

        def chat_body(model: str, messages: list[dict[str, Any]], config: Any, **kw: Any) -> dict[str, Any]:
            self.add({"kind": "body", "stream": kw.get("stream"), "content": messages[-1]["content"]})
            return body(model, messages, config, **kw)

        openai_wire.parse_message = parse_message  # non-streamed answers (parse_completion calls it too)
        openai_wire.stream_deltas = stream_deltas
        openai_wire.chat_body = chat_body


def timed(record: dict[str, Any], name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` that notes its start and end (perf_counter) in ``record[name]``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            record[name] = (start, time.perf_counter())

    return wrapper


# -- set-up ---------------------------------------------------------------------------------------


class BenchServer(LocalLLMServer):
    """``LocalLLMServer`` with llama.cpp's host-memory prompt cache off (see the module docstring)."""

    def __init__(self, *args: Any, slot_prompt_similarity: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._similarity = slot_prompt_similarity
        self.effective: dict[str, Any] = {}

    def _params(self, xllamacpp: Any, path: Path) -> Any:
        params = super()._params(xllamacpp, path)
        params.cache_ram_mib = 0
        if self._similarity is not None:
            params.slot_prompt_similarity = self._similarity
        self.effective = {
            "cache_prompt": params.cache_prompt,
            "cache_ram_mib": params.cache_ram_mib,
            "slot_prompt_similarity": round(params.slot_prompt_similarity, 3),
            "n_parallel": params.n_parallel,
            "n_threads": params.cpuparams.n_threads,
            "n_ctx_total": params.n_ctx,
        }
        return params


class OffBoxReranker(Reranker):
    """A reranker on another machine (as ``TEIReranker`` would be), emulated without its CPU cost.

    ``rerank`` returns the local cross-encoder's scores for the same (query, texts), computed once
    before timing, after sleeping as long as that computation took on its own. The documents are
    the local reranker's; only the CPU the reranker would take from the LLM is given back.
    """

    def __init__(self, inner: Reranker) -> None:
        super().__init__(inner.k)
        self.inner = inner
        self._known: dict[tuple[str, tuple[str, ...]], tuple[Any, float]] = {}

    def rerank(self, query: str, texts: Any, batch_size: int = 32) -> Any:
        key = (query, tuple(texts))
        if key not in self._known:  # first time: measured alone, before any timing
            start = time.perf_counter()
            scores = self.inner.rerank(query, texts, batch_size)
            self._known[key] = (scores, time.perf_counter() - start)
            return scores
        scores, seconds = self._known[key]
        time.sleep(seconds)
        return scores.copy()


def cross_encoder_dir(workdir: Path) -> Path:
    """A sequence-classification model with MiniLM's encoder and a new, seeded head (as in tests)."""
    out = workdir / "cross-encoder"
    if (out / "config.json").is_file():
        return out
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mx_rag.embedding.local.model_info import minilm_dir

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_dir()), num_labels=1)
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(minilm_dir())).save_pretrained(str(out))
    return out


def open_knowledge(workdir: Path, doc: Path) -> tuple[Any, dict[str, Any]]:
    from mx_rag.knowledge.local import LocalKnowledge

    started = time.perf_counter()
    kb = LocalKnowledge.open(workdir / "kb", white_paths=[str(doc.parent)])
    report = kb.sync([doc])
    if report.failed:
        raise SystemExit(f"ingestion failed: {report.failed}")
    chunks = kb.knowledge.chunk_store.count()
    return kb, {
        "doc": str(doc),
        "doc_bytes": doc.stat().st_size,
        "ingested_now": bool(report.added or getattr(report, "replaced", None) or getattr(report, "updated", None)),
        "ingest_or_open_s": round(time.perf_counter() - started, 2),
        "chunks": chunks,
    }


# -- measurement ----------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p90(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.9 * len(ordered) + 0.5) - 1))]


class Bench:
    def __init__(self, args: argparse.Namespace, server: BenchServer, kb: Any, reranker: Any) -> None:
        self.args = args
        self.server = server
        self.kb = kb
        self.reranker = reranker
        self.sys_messages = [{"role": "system", "content": TEXT_INFER_PROMPT}]
        self.llm = Text2TextLLM(
            base_url=server.chat_url,
            model_name=server.model_name,
            client_param=ClientParam(use_http=True, timeout=600, retries=0),
        )
        self.http = httpx.Client(timeout=600)
        self.recorder = Recorder()
        self.recorder.install()
        self.config = LLMParameterConfig(max_tokens=args.max_tokens, temperature=1.0, top_p=0.1, seed=42, stream=True)

    # previous users: fill every slot with the system message (or another one) + unrelated text
    def reset_slots(self) -> None:
        system = self.sys_messages[0]["content"]
        if self.args.cold_system:
            system = "You are a terse assistant for a weather service. Answer in one sentence."
        for slot in range(self.args.n_parallel):
            body = {
                "model": self.server.model_name,
                "max_tokens": 1,
                "temperature": 0.0,
                "id_slot": slot,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"previous user {uuid.uuid4().hex[:8]}: hello"},
                ],
            }
            self.http.post(self.server.chat_url, json=body).raise_for_status()
        self.recorder.take()

    def chain(self, variant: str, candidates: int) -> SingleText2TextChain:
        retriever = self.kb.retriever(k=candidates)
        common = {"llm": self.llm, "retriever": retriever, "reranker": self.reranker, "sys_messages": self.sys_messages}
        if variant == "single":
            return SingleText2TextChain(**common)
        if variant == "single_playout":
            return SingleText2TextChain(**common, user_content_builder=_parallel_user_content_builder)
        return ParallelText2TextChain(**common)

    def run_query(self, chain: SingleText2TextChain, question: str) -> dict[str, Any]:
        """One timed streamed query, from a reset cache; returns TTFT, phases and server timings."""
        self.reset_slots()
        marks: dict[str, Any] = {}
        chain._retrieve = timed(marks, "retrieval", chain._retrieve)  # type: ignore[method-assign]
        if isinstance(chain, ParallelText2TextChain):
            chain._warm_up = timed(marks, "warmup", chain._warm_up)  # type: ignore[method-assign]
        start = time.perf_counter()
        result = chain.query(question, self.config)
        assert not isinstance(result, dict)  # stream=True: an iterator of cumulative answers
        items = iter(result)
        first = next(items)
        ttft = time.perf_counter() - start
        last = first
        for item in items:
            last = item
        end = time.perf_counter()
        events = self.recorder.take()
        timings = [e for e in events if e["kind"] in ("chat", "stream")]
        bodies = [e for e in events if e["kind"] == "body"]
        final = next(e["timings"] or {} for e in timings if e["kind"] == "stream")
        warm = next((e["timings"] or {} for e in timings if e["kind"] == "chat"), None)
        out: dict[str, Any] = {
            "ttft_s": ttft,
            "total_s": end - start,
            "retrieval_s": marks["retrieval"][1] - marks["retrieval"][0],
            "final": {k: final.get(k) for k in ("cache_n", "prompt_n", "prompt_ms")},
            "sources": first.get("source_documents"),
            "final_content": next(b["content"] for b in bodies if b["stream"]),
            "answer": last.get("result"),
        }
        if warm is not None:
            out["warmup"] = {k: warm.get(k) for k in ("cache_n", "prompt_n", "prompt_ms")}
            w0, w1 = marks["warmup"]
            out["warmup_wall_s"] = w1 - w0
            out["wait_after_retrieval_s"] = max(0.0, w1 - marks["retrieval"][1])
        return out

    # calibration: the warm-up's prefill alone, then retrieval alone for growing candidate counts
    def calibrate(self, questions: list[str]) -> dict[str, Any]:
        prefill, wall, tokens = [], [], []
        parallel = self.chain("parallel", 1)
        assert isinstance(parallel, ParallelText2TextChain)
        for q in questions:
            self.reset_slots()
            t0 = time.perf_counter()
            parallel._warm_up(q)
            wall.append(time.perf_counter() - t0)
            (event,) = [e for e in self.recorder.take() if e["kind"] == "chat"]
            prefill.append(event["timings"]["prompt_ms"] / 1000)
            tokens.append(event["timings"]["prompt_n"])
        prefix_s = median(prefill)
        grid = CANDIDATE_GRID if self.args.candidates == "auto" else (int(self.args.candidates),)
        retrieval: dict[int, float] = {}
        for n in grid:
            chain = self.chain("single", n)
            chain._retrieve(questions[0])  # model load and first-call costs
            times = []
            for q in questions:
                t0 = time.perf_counter()
                chain._retrieve(q)
                times.append(time.perf_counter() - t0)
            retrieval[n] = median(times)
            if retrieval[n] > prefix_s:  # larger counts only take longer
                break
        chosen = min(retrieval, key=lambda n: abs(retrieval[n] - prefix_s))
        return {
            "record": "calibration",
            "prefix_prefill_alone_s": round(prefix_s, 4),
            "prefix_warmup_wall_alone_s": round(median(wall), 4),
            "prefix_prefill_tokens": median(tokens),
            "retrieval_alone_s_by_candidates": {str(n): round(t, 4) for n, t in retrieval.items()},
            "candidates": chosen,
        }


def check_documents(per_variant: dict[str, dict[str, Any]], question: str) -> list[str]:
    """The variants must put identical documents in the prompt, and the final request must hold them."""
    problems = []
    reference = per_variant["single"]["sources"]
    if not reference:
        problems.append(f"no document retrieved for {question!r}")
    for name, run in per_variant.items():
        if run["sources"] != reference:
            problems.append(f"{name} used other documents than single for {question!r}")
        for doc in run["sources"] or []:
            if doc["page_content"] not in run["final_content"]:
                problems.append(f"{name}: a source document is missing from the final request for {question!r}")
    return problems


def summarize(variant: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    ttft = [r["ttft_s"] for r in runs]
    out: dict[str, Any] = {
        "record": "variant",
        "variant": variant,
        "n": len(runs),
        "ttft_median_s": round(median(ttft), 4),
        "ttft_p90_s": round(p90(ttft), 4),
        "ttft_mean_s": round(statistics.fmean(ttft), 4),
        "retrieval_median_s": round(median([r["retrieval_s"] for r in runs]), 4),
        "final_prompt_n_median": median([r["final"]["prompt_n"] for r in runs]),
        "final_cache_n_median": median([r["final"]["cache_n"] for r in runs]),
        "final_prefill_median_s": round(median([r["final"]["prompt_ms"] / 1000 for r in runs]), 4),
    }
    if variant == "parallel":
        warm = [r for r in runs if "warmup" in r]
        out.update(
            warmup_prompt_n_median=median([r["warmup"]["prompt_n"] for r in warm]),
            warmup_cache_n_median=median([r["warmup"]["cache_n"] for r in warm]),
            warmup_prefill_median_s=round(median([r["warmup"]["prompt_ms"] / 1000 for r in warm]), 4),
            warmup_wall_median_s=round(median([r["warmup_wall_s"] for r in warm]), 4),
            wait_after_retrieval_median_s=round(median([r["wait_after_retrieval_s"] for r in warm]), 4),
            # the final request reuses everything the warm-up prefilled (up to the chat template's end)
            final_reused_warmup_prefix=sum(
                r["final"]["cache_n"] >= r["warmup"]["cache_n"] + r["warmup"]["prompt_n"] - 8 for r in warm
            ),
        )
    return out


def environment_line(args: argparse.Namespace, server: BenchServer, kb_info: dict[str, Any],
                     torch_threads: int) -> dict[str, Any]:
    return {
        "record": "environment",
        **environment(BENCH, None, machine=platform.machine(), cpu_count=os.cpu_count(), loadavg_start=loadavg(),
                      xllamacpp=package_version("xllamacpp", None), torch=package_version("torch", None),
                      torch_threads=torch_threads),
        "server": server.effective,
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "knowledge": kb_info,
        "questions": args.questions,
        "repeats": args.repeats,
        "max_tokens": args.max_tokens,
        "cold_system": args.cold_system,
        "offbox_reranker": args.offbox_reranker,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20, help="questions per pass (at most 20)")
    parser.add_argument("--repeats", type=int, default=2, help="passes over the questions")
    parser.add_argument("--candidates", default="auto", help="retrieved candidates reranked to 1, or auto")
    parser.add_argument("--llm-threads", type=int, default=1, help="llama.cpp threads (default 1)")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads: embedder, reranker")
    parser.add_argument("--n-parallel", type=int, default=1, help="llama.cpp slots")
    parser.add_argument("--slot-similarity", type=float, default=None, help="slot_prompt_similarity")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens generated per answer")
    parser.add_argument("--cold-system", action="store_true", help="the system message is not cached either")
    parser.add_argument(
        "--offbox-reranker",
        action="store_true",
        help="emulate a reranker on another machine: the same scores and latency, none of this CPU",
    )
    parser.add_argument("--doc", default=DEFAULT_DOC, help="the document to ingest")
    parser.add_argument("--workdir", default=DEFAULT_WORKDIR, help="knowledge base and cross-encoder cache")
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 questions, 1 repeat")
    parser.add_argument("--runs-out", default=None, help="also write every run as JSON lines here")
    args = parser.parse_args(argv)
    if args.quick:
        args.questions, args.repeats = min(args.questions, 4), 1
    args.questions = max(1, min(args.questions, len(QUESTIONS)))

    torch_threads = pin_torch_threads(args.torch_threads)
    from mx_rag.reranker.local.reranker import LocalReranker

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    kb, kb_info = open_knowledge(workdir, Path(args.doc))
    reranker: Reranker = LocalReranker(str(cross_encoder_dir(workdir)), dev_id=0, k=1)
    if args.offbox_reranker:
        reranker = OffBoxReranker(reranker)
    server = BenchServer(
        n_ctx=4096, n_parallel=args.n_parallel, n_threads=args.llm_threads, slot_prompt_similarity=args.slot_similarity
    )
    problems: list[str] = []
    with server, contextlib.ExitStack() as stack:
        sink = stack.enter_context(open(args.runs_out, "w")) if args.runs_out else None
        bench = Bench(args, server, kb, reranker)
        emit(environment_line(args, server, kb_info, torch_threads))
        questions = QUESTIONS[: args.questions]
        calibration = bench.calibrate(questions[: min(6, len(questions))])
        emit(calibration)
        candidates = calibration["candidates"]
        chains = {v: bench.chain(v, candidates) for v in VARIANTS}
        for question in questions:  # untimed; with --offbox-reranker this records the scores and latency
            chains["single"]._retrieve(question)
        for question in WARMUP_QUESTIONS:  # untimed: server, embedder, reranker, HTTP pool all warm
            for variant in VARIANTS:
                bench.run_query(chains[variant], question)
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for rep in range(args.repeats):
            for i, question in enumerate(questions):
                per_question = {}
                for variant in rotated(VARIANTS, i + rep):  # ABC, BCA, CAB, ...
                    per_question[variant] = run = bench.run_query(chains[variant], question)
                    runs[variant].append(run)
                    if sink:
                        slim = {k: v for k, v in run.items() if k not in ("sources", "final_content")}
                        sink.write(json.dumps({"variant": variant, "rep": rep, "q": i, **slim}) + "\n")
                problems += check_documents(per_question, question)
    summaries = {v: summarize(v, runs[v]) for v in VARIANTS}
    for line in summaries.values():
        emit(line)
    par = summaries["parallel"]
    ref = summaries["single_playout"]
    retrieval_alone = calibration["retrieval_alone_s_by_candidates"][str(candidates)]
    prefix_alone = calibration["prefix_prefill_alone_s"]
    # The most the overlap can save, from the single_playout runs themselves (same load): it hides
    # at most min(retrieval, prefix prefill) of retrieval + whole prefill; the prefix's share of the
    # prefill is its share of the tokens. At best (retrieval = prefix prefill) that is P / (P + S).
    prefill_s, prefill_n = ref["final_prefill_median_s"], ref["final_prompt_n_median"]
    prefix_s = prefill_s * par["warmup_prompt_n_median"] / prefill_n
    ceiling = min(ref["retrieval_median_s"], prefix_s) / (ref["retrieval_median_s"] + prefill_s)
    best_case = par["warmup_prompt_n_median"] / (par["warmup_prompt_n_median"] + prefill_n)
    # paired per run: each question/repeat measured with both chains
    paired = [p["ttft_s"] / s["ttft_s"] for p, s in zip(runs["parallel"], runs["single_playout"], strict=True)]
    summary = {
        "record": "summary",
        "candidates": candidates,
        "retrieval_alone_s": retrieval_alone,
        "prefix_prefill_alone_s": prefix_alone,
        "ttft_median_s": {v: summaries[v]["ttft_median_s"] for v in VARIANTS},
        "ttft_p90_s": {v: summaries[v]["ttft_p90_s"] for v in VARIANTS},
        "reduction_vs_single": round(1 - par["ttft_median_s"] / summaries["single"]["ttft_median_s"], 4),
        "reduction_vs_single_playout": round(1 - par["ttft_median_s"] / ref["ttft_median_s"], 4),
        "paired_ratio_parallel_over_single_playout_median": round(median(paired), 4),
        "ceiling": round(ceiling, 4),
        "ceiling_if_retrieval_equals_prefix_prefill": round(best_case, 4),
        "goal_30pct_met": 1 - par["ttft_median_s"] / summaries["single"]["ttft_median_s"] >= 0.30,
        "same_documents_all_runs": not problems,
        "loadavg_end": loadavg(),
    }
    emit(summary)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
