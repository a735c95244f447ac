# SPDX-License-Identifier: Apache-2.0
"""Throughput and latency of ``mxrag serve`` under concurrent clients, next to the same work done
in-process and to Hayhooks serving an equivalent Haystack pipeline.

Setup (everything on this machine, nothing from a network):

* the LLM: ``mx_rag.testing.ScriptedServer(default_delay=--delay-ms)`` in a process of its own
  (this script, re-run with ``--serve-scripted-llm``). Every chat completion echoes the user
  message (cut at ``max_tokens`` = 512 words) after a fixed delay, 200 ms by default, so the time
  of the LLM is known and the rest is what the servers spend;
* ``mxrag serve`` started as a subprocess (``python -m mx_rag.cli serve --data-dir D --port 0
  --llm-url URL --workers N``) in a fresh data folder; a knowledge base ``docs`` is created and
  this repository's ``docs/*.md`` are uploaded through the API (multipart, one job, polled until
  done): the embedding model ``--model`` (by default mx_rag's default model, multilingual-e5-small; int8 on
  a CPU when the ``int8`` extra is installed, as a user gets it) + FAISS + SQLite, 750-character
  chunks, the defaults;
* the peer: Hayhooks (``hayhooks run --workers N``) serving a pipeline wrapper that this script
  writes into the work folder: ``SentenceTransformersTextEmbedder`` (the same model, from the same
  local folder, with the same ``"query: "`` / ``"passage: "`` prefixes where the model has them,
  normalised; the run stops, printing no ratio, if the server's model folder is another) ->
  ``InMemoryEmbeddingRetriever`` (dot product) over the same
  chunk texts (read back from our chunk store after the upload, embedded by the peer's
  ``SentenceTransformersDocumentEmbedder`` when it starts) -> ``ChatPromptBuilder`` (the same user
  message as our ``SingleText2TextChain``: the chunks, the instruction, the question, each
  separated by a blank line) -> ``OpenAIChatGenerator`` on the same scripted LLM with the same
  ``max_tokens``, temperature and top_p. Retrieval is its ``POST /mxrag_peer/run`` (the
  pipeline without the LLM), chat its OpenAI-compatible ``POST /v1/chat/completions``.
  Hayhooks runs with its defaults (tracing and monitoring on, as installed);
* in-process: the same retrieval (``service.retriever(principal, "docs", k).invoke(q)``) and the
  same chain (``Answerer(service, server_llm(settings, llm_url))``: the chain built per request,
  then ``answer``) called in this process on a ``KnowledgeService`` over the same data folder,
  from 1, 8 or 32 threads. No HTTP in front, so the difference is what the server costs.

Each server gets ``--workers`` worker processes (default 1); torch runs with ``--torch-threads``
threads (default 1, ``OMP_NUM_THREADS``) everywhere: on a shared 2-core machine a second thread
per process slowed MiniLM down (see bench/ingest.py).

Load: for each endpoint (``retrieve``, ``chat`` non-streaming) and each level of ``--levels``
(default 1, 8, 32 concurrent clients) the three systems take turns (the order rotates per level
and per round), and the whole sweep is repeated ``--rounds`` times (default 3), so that a burst of
load from other jobs lands on one round of one system, not on a system's only figure. Clients are
asyncio tasks sharing one ``httpx.AsyncClient`` (a pool as large as the level, keep-alive), each
sending its next request as soon as the previous answer is read, with the questions of
``QUESTIONS`` in turn, ``k`` = ``top_k`` = 3. Every cell first runs ``--warmup-s`` (2) unmeasured,
then ``--seconds`` (8) measured: latencies of the requests started in that window, throughput =
those requests over the time until the last of them ended. A failure is any transport error, any
status other than 200, or a body without the expected documents (3) or answer (the echo). Before
timing, every question's retrieval is checked: our server must return the in-process documents
exactly, and the peer's overlap with ours is reported.

CPU: each cell also reads the CPU time (user + system, from ``/proc``) that the system measured
spent in the window: the server's process group (its workers included), or this process for the
in-process calls, divided by the requests that ended in the window (``cpu_ms_per_request``) and
by the window (``cores``). On a machine shared with other jobs the wall-clock figures stretch with
their load; the CPU a request costs much less so.

Output: JSON lines on stdout. An environment line (packages, load average, corpus, options); a
setup line (ingestion, start-up times, checks, and what one query's embedding costs here alone and
in a batch of 8); one ``cell`` line per system, endpoint and level (requests, failures with their
first messages, req/s, p50, p90, p99, mean in ms, CPU per request, cores) and round; one
``result`` line per system, endpoint and level (the median of each figure over the rounds,
failures summed, and each round's req/s and p50); one ``overhead`` line per endpoint and level,
from the medians (``server_p50 / in_process_p50`` and the difference, the same for CPU per
request, for mx_rag and for the peer); a summary. Exit status 1 if mx_rag failed any request or a check
failed.

The peer needs ``pip install --no-deps hayhooks`` on top of the ``bench`` extra (hayhooks asks for
``fastapi[standard]``, whose uvloop and httptools uvicorn would then put under our server too);
without it the run has no peer.

Run::

    .venv/bin/python bench/server.py                   # 3 rounds x 18 cells x 10 s: about 12 min
    .venv/bin/python bench/server.py --quick           # 1 round, 3 s per cell: about 5 min (mostly start-up)
    .venv/bin/python bench/server.py --workers 2 --delay-ms 500 --levels 1,16,64
    .venv/bin/python bench/server.py --peer none       # without Hayhooks
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
from _harness import (
    ROOT,
    emit,
    environment,
    loadavg,
    loadavg_1m,
    package_version,
    pin_torch_threads,
    rotated,
    worker_env,
)

BENCH = "server"
REPO = ROOT
DEFAULT_WORKDIR = "/tmp/mx_rag_bench/server"
KB = "docs"
PEER_PIPELINE = "mxrag_peer"
K = 3
HAYHOOKS_CLI = [sys.executable, "-c", "import sys; from hayhooks.cli import hayhooks_cli; "
                "sys.argv[0] = 'hayhooks'; sys.exit(hayhooks_cli())"]  # `hayhooks`, with this interpreter
SYSTEMS = ("mx_rag", "in_process", "hayhooks")
ENDPOINTS = ("retrieve", "chat")

QUESTIONS = [
    "How do I start the server with mxrag serve?",
    "Where does mx_rag store its data by default?",
    "Which embedding model is used by default?",
    "Which document types can be uploaded?",
    "How are uploads checked for safety?",
    "Can several processes share one knowledge base?",
    "How does the LLM client compare with the openai client?",
    "What recall does the hybrid retriever reach on HotpotQA?",
    "How fast is ingestion compared with LangChain and LlamaIndex?",
    "What does the parallel chain do to the time to first token?",
    "How much overhead does the Retriever add over bare faiss search?",
    "How is Graph RAG evaluated?",
    "What is CoRAG and how many questions per minute does it answer?",
    "How are API keys created and revoked?",
    "Which chains can a chat request name?",
    "How are TLS certificates verified by the HTTP clients?",
    "Why does ClientParam differ from the original SDK?",
    "How are Chinese documents split into chunks?",
    "What changed in the vector stores compared with the original?",
    "How does MultiQueryRetriever fuse the rewritten queries?",
    "What does the retrieval API of CoRAG expect?",
    "How are failed requests to the LLM retried?",
    "Which settings does mxrag.toml accept?",
    "How is a knowledge base deleted with its documents?",
]


PEER_WRAPPER = r'''# Written by bench/server.py: the Haystack pipeline that Hayhooks serves as the peer.
import json
import os
from pathlib import Path

from hayhooks import BasePipelineWrapper
from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import ComponentDevice, Secret
from haystack_integrations.components.embedders.sentence_transformers import (
    SentenceTransformersDocumentEmbedder,
    SentenceTransformersTextEmbedder,
)

# the user message of mx_rag's SingleText2TextChain: chunks, instruction, question, blank lines between
TEMPLATE = "{% for d in documents %}{{ d.content }}\n\n{% endfor %}{{ instruction }}\n\n{{ query }}"


class PipelineWrapper(BasePipelineWrapper):
    def setup(self) -> None:
        cfg = json.loads(Path(os.environ["MXRAG_BENCH_PEER_CONFIG"]).read_text())
        self.cfg = cfg
        device = ComponentDevice.from_str("cpu")
        chunks = json.loads(Path(cfg["chunks"]).read_text())
        indexer = SentenceTransformersDocumentEmbedder(model=cfg["model_dir"], device=device,
                                                       prefix=cfg["document_prefix"],
                                                       normalize_embeddings=True, progress_bar=False)
        indexer.warm_up()
        docs = indexer.run([Document(id=c["id"], content=c["text"]) for c in chunks])["documents"]
        self.store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
        self.store.write_documents(docs)

        def embedder():
            return SentenceTransformersTextEmbedder(model=cfg["model_dir"], device=device, prefix=cfg["query_prefix"],
                                                    normalize_embeddings=True, progress_bar=False)

        self.retrieval = Pipeline()
        self.retrieval.add_component("embedder", embedder())
        self.retrieval.add_component("retriever", InMemoryEmbeddingRetriever(self.store, top_k=cfg["k"]))
        self.retrieval.connect("embedder.embedding", "retriever.query_embedding")

        llm = OpenAIChatGenerator(
            api_key=Secret.from_token("none"), model=cfg["llm_model"], api_base_url=cfg["llm_url"],
            generation_kwargs={"max_tokens": cfg["max_tokens"], "temperature": cfg["temperature"], "top_p": 1.0},
            timeout=cfg["timeout"],
        )
        self.pipeline = Pipeline()
        self.pipeline.add_component("embedder", embedder())
        self.pipeline.add_component("retriever", InMemoryEmbeddingRetriever(self.store, top_k=cfg["k"]))
        self.pipeline.add_component("prompt_builder", ChatPromptBuilder(template=[ChatMessage.from_user(TEMPLATE)],
                                                                        required_variables="*"))
        self.pipeline.add_component("llm", llm)
        self.pipeline.connect("embedder.embedding", "retriever.query_embedding")
        self.pipeline.connect("retriever.documents", "prompt_builder.documents")
        self.pipeline.connect("prompt_builder.prompt", "llm.messages")
        self.retrieval.warm_up()
        self.pipeline.warm_up()

    def run_api(self, query: str, top_k: int = 3) -> dict:
        """The chunks nearest to the query."""
        out = self.retrieval.run({"embedder": {"text": query}, "retriever": {"top_k": top_k}})
        docs = out["retriever"]["documents"]
        return {"document_ids": [d.id for d in docs], "documents": [d.content for d in docs]}

    def run_chat_completion(self, model: str, messages: list[dict], body: dict) -> str:
        query = [m for m in messages if m.get("role") == "user"][-1]["content"]
        out = self.pipeline.run({
            "embedder": {"text": query},
            "retriever": {"top_k": self.cfg["k"]},
            "prompt_builder": {"query": query, "instruction": self.cfg["instruction"]},
        })
        return out["llm"]["replies"][0].text
'''


def log(message: str) -> None:
    print(f"[{BENCH}] {message}", file=sys.stderr, flush=True)


# -- the scripted LLM, in a process of its own ------------------------------------------------------


def serve_scripted_llm(delay_s: float) -> int:
    """``--serve-scripted-llm``: print the base URL, serve until stdin closes."""
    from mx_rag.testing import ScriptedServer

    with ScriptedServer(default_delay=delay_s) as srv:
        print(srv.base_url, flush=True)
        done = threading.Event()

        def wait_stdin() -> None:
            sys.stdin.read()
            done.set()

        threading.Thread(target=wait_stdin, daemon=True).start()
        while not done.wait(5.0):
            srv.reset()  # recorded requests are not needed: keep memory flat
    return 0


# -- processes ------------------------------------------------------------------------------------------


class Child:
    """A subprocess in its own process group, its stderr (and stdout after the first line) to a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path,
                 stdin: bool = False, banner: bool = True) -> None:
        self.name = name
        self.log_path = log_path
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, start_new_session=True,
                                     cwd=str(REPO))
        if not banner:  # nothing to read first: all of stdout goes to the log
            threading.Thread(target=self._drain, daemon=True).start()

    def first_line(self, timeout: float) -> str:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or not box[0].strip():
            raise RuntimeError(f"{self.name} printed no first line in {timeout:.0f} s (see {self.log_path})")
        threading.Thread(target=self._drain, daemon=True).start()
        return box[0].strip()

    def _drain(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self._log.write(line)
            self._log.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                with suppress(OSError):
                    self.proc.stdin.close()
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)  # the group this script started (uvicorn workers too)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()


def child_env(torch_threads: int) -> dict[str, str]:
    env = worker_env(torch_threads)  # OMP, MKL and OpenBLAS threads; Hugging Face offline
    env.update(TOKENIZERS_PARALLELISM="false", HAYSTACK_TELEMETRY_ENABLED="False", PYTHONPATH=str(REPO))
    for name in list(env):  # our settings come from the command line only
        if name.startswith("MXRAG_"):
            del env[name]
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float, ready: Callable[[httpx.Response], bool], child: Child) -> float:
    started = time.monotonic()
    while True:
        if child.proc.poll() is not None:
            raise RuntimeError(f"{child.name} exited with {child.proc.returncode} (see {child.log_path})")
        try:
            response = httpx.get(url, timeout=5)
            if ready(response):
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{child.name} not ready at {url} after {timeout:.0f} s (see {child.log_path})")
        time.sleep(0.3)


# -- the knowledge base ---------------------------------------------------------------------------


def ingest(base_url: str, files: list[Path]) -> dict[str, Any]:
    started = time.monotonic()
    with httpx.Client(base_url=base_url, timeout=120) as client:
        created = client.post("/v1/knowledge-bases", json={"name": KB})
        if created.status_code != 201:
            raise RuntimeError(f"creating the knowledge base: {created.status_code} {created.text[:300]}")
        with ExitStack() as stack:
            parts = [("files", (f.name, stack.enter_context(f.open("rb")), "text/markdown")) for f in files]
            response = client.post(f"/v1/knowledge-bases/{KB}/documents", files=parts)
        if response.status_code != 202:
            raise RuntimeError(f"upload: {response.status_code} {response.text[:300]}")
        job = response.json()
        while job["status"] in ("queued", "running"):
            time.sleep(0.5)
            job = client.get(f"/v1/knowledge-bases/{KB}/jobs/{job['id']}").json()
        if job["status"] != "done" or any(v != "stored" for v in job["results"].values()):
            raise RuntimeError(f"ingestion job ended {job['status']}: {job}")
        described = client.get(f"/v1/knowledge-bases/{KB}").json()
    return {"files": [f.name for f in files], "bytes": sum(f.stat().st_size for f in files),
            "chunks": described["chunks"], "ingest_s": round(time.monotonic() - started, 2)}


# -- measurement ----------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group ``pgid``."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp, ..., utime, stime
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


class Cell:
    """What one (system, endpoint, level) run measured; ``cpu`` samples the CPU seconds of the
    system measured (its server's processes, or this process for in-process calls)."""

    def __init__(self, cpu: Callable[[], float]) -> None:
        self.latencies: list[float] = []
        self.failures = 0
        self.errors: dict[str, int] = {}
        self.window_start = 0.0
        self.last_end = 0.0
        self.completed = 0  # requests that ended in the window, whenever they started
        self.lock = threading.Lock()
        self.cpu = cpu
        self.cpu_start = self.cpu_end = 0.0

    def start_window(self, warmup: float) -> threading.Timer:
        self.window_start = time.perf_counter() + warmup

        def mark() -> None:
            self.cpu_start = self.cpu()

        timer = threading.Timer(max(0.0, self.window_start - time.perf_counter()), mark)
        timer.start()
        return timer

    def end_window(self) -> None:
        self.cpu_end = self.cpu()

    def record(self, started: float, ended: float, error: str | None) -> None:
        if ended >= self.window_start:
            with self.lock:
                self.completed += 1
        if started < self.window_start:
            return  # warm-up
        with self.lock:
            self.last_end = max(self.last_end, ended)
            if error is None:
                self.latencies.append(ended - started)
            else:
                self.failures += 1
                key = error[:300]
                self.errors[key] = self.errors.get(key, 0) + 1

    def result(self) -> dict[str, Any]:
        ms = [x * 1000 for x in self.latencies]
        span = max(self.last_end - self.window_start, 1e-9)
        return {
            "requests": len(ms) + self.failures, "ok": len(ms), "failures": self.failures,
            "rps": round(len(ms) / span, 2),
            "p50_ms": round(percentile(ms, 50), 2), "p90_ms": round(percentile(ms, 90), 2),
            "p99_ms": round(percentile(ms, 99), 2), "mean_ms": round(statistics.fmean(ms), 2) if ms else None,
            "window_s": round(span, 2),
            # CPU of the system per request and in cores: what wall-clock figures on a shared
            # machine blur (other jobs' load lengthens latencies, not the CPU a request costs)
            "cpu_ms_per_request": round((self.cpu_end - self.cpu_start) * 1000 / self.completed, 2)
            if self.completed else None,
            "cores": round((self.cpu_end - self.cpu_start) / span, 2),
            "errors": sorted(self.errors.items(), key=lambda kv: -kv[1])[:3],
        }


def check_retrieve(body: Any, peer: bool) -> str | None:
    if peer:
        body = body.get("result") if isinstance(body, dict) else None
    docs = body.get("documents") if isinstance(body, dict) else None
    if not isinstance(docs, list) or len(docs) != K or not all(isinstance(d, str) and d for d in docs):
        return f"unexpected retrieval body: {str(body)[:200]}"
    return None


def check_chat(body: Any) -> str | None:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return f"unexpected chat body: {str(body)[:200]}"
    if not isinstance(content, str) or not content.startswith("echo: "):
        return f"unexpected answer: {str(content)[:200]}"
    return None


def http_request(system: str, endpoint: str, question: str) -> tuple[str, dict[str, Any]]:
    if endpoint == "retrieve":
        path = f"/v1/knowledge-bases/{KB}/retrieve" if system == "mx_rag" else f"/{PEER_PIPELINE}/run"
        return path, {"query": question, "top_k": K}
    model = KB if system == "mx_rag" else PEER_PIPELINE
    return "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": question}],
                                    "stream": False}


async def http_cell(base_url: str, system: str, endpoint: str, clients: int, warmup: float,
                    seconds: float, cpu: Callable[[], float]) -> Cell:
    cell = Cell(cpu)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=httpx.Timeout(120.0)) as client:
        timer = cell.start_window(warmup)
        end = cell.window_start + seconds

        async def worker(index: int) -> None:
            turn = index
            while True:
                started = time.perf_counter()
                if started >= end:
                    return
                path, body = http_request(system, endpoint, QUESTIONS[turn % len(QUESTIONS)])
                turn += clients
                error: str | None
                try:
                    response = await client.post(path, json=body)
                    if response.status_code != 200:
                        error = f"HTTP {response.status_code}: {response.text[:200]}"
                    elif endpoint == "retrieve":
                        error = check_retrieve(response.json(), peer=system != "mx_rag")
                    else:
                        error = check_chat(response.json())
                except Exception as exc:  # every failure is counted, none stops the run
                    error = f"{type(exc).__name__}: {exc}"
                cell.record(started, time.perf_counter(), error)

        await asyncio.gather(*(worker(i) for i in range(clients)))
        cell.end_window()
        timer.join()
    return cell


def thread_cell(call: Callable[[str], str | None], clients: int, warmup: float, seconds: float) -> Cell:
    cell = Cell(time.process_time)
    timer = cell.start_window(warmup)
    end = cell.window_start + seconds

    def worker(index: int) -> None:
        turn = index
        while True:
            started = time.perf_counter()
            if started >= end:
                return
            question = QUESTIONS[turn % len(QUESTIONS)]
            turn += clients
            try:
                error = call(question)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            cell.record(started, time.perf_counter(), error)

    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(worker, range(clients)))
    cell.end_window()
    timer.join()
    return cell


# -- in-process --------------------------------------------------------------------------------------


class InProcess:
    """The server's retrieval and chain, called in this process on the same data folder."""

    def __init__(self, data_dir: Path, llm_url: str) -> None:
        from mx_rag.app.answers import Answerer
        from mx_rag.server.app import server_llm
        from mx_rag.server.service import KnowledgeService
        from mx_rag.server.settings import load_settings

        self.settings = load_settings(data_dir=data_dir)
        self.service = KnowledgeService(self.settings)
        self.who = self.service.local_principal()
        self.answerer = Answerer(self.service, server_llm(self.settings, llm_url))

    def documents(self, question: str) -> list[str]:
        return [d.page_content for d in self.service.retriever(self.who, KB, K).invoke(question)]

    def retrieve(self, question: str) -> str | None:
        docs = self.documents(question)
        return None if len(docs) == K else f"{len(docs)} documents"

    def chat(self, question: str) -> str | None:
        from mx_rag.app.answers import Question
        from mx_rag.llm.llm_parameter import LLMParameterConfig

        q = Question(question, [])
        chain = self.answerer.chain(self.who, KB, self.settings.chain.type, q, None)
        llm = self.settings.llm
        config = LLMParameterConfig(max_tokens=llm.max_tokens, temperature=llm.temperature, top_p=1.0)
        result = self.answerer.answer(chain, q, config)
        answer = result.get("result", "")
        if isinstance(answer, str) and answer.startswith("echo: "):
            return None
        return f"unexpected answer {str(answer)[:100]!r}"

    def chunks(self) -> list[dict[str, str]]:
        kb = self.service.open(self.who, KB)
        out = []
        for row in kb.get_all_documents():
            for chunk in self.service.chunks.search_by_document_id(row.document_id):
                out.append({"id": str(chunk.chunk_id), "text": chunk.page_content})
        return out

    def close(self) -> None:
        self.service.close()


# -- the run -------------------------------------------------------------------------------------------------


@contextmanager
def started(children: list[Child]) -> Iterator[None]:
    try:
        yield
    finally:
        for child in reversed(children):
            child.stop()


def environment_line(args: argparse.Namespace, files: list[Path]) -> dict[str, Any]:
    packages = ("mxrag", "fastapi", "starlette", "uvicorn", "httpx", "torch", "transformers", "faiss-cpu", "hayhooks",
                "haystack-ai", "sentence-transformers-haystack", "sentence-transformers", "openai", "uvloop",
                "httptools")
    return environment(
        BENCH, "record", machine=platform.machine(), cpu_count=os.cpu_count(), loadavg_start=loadavg(),
        packages={name: package_version(name, None) for name in packages}, workers=args.workers,
        delay_ms=args.delay_ms, levels=args.levels, seconds=args.seconds, warmup_s=args.warmup_s, rounds=args.rounds,
        torch_threads=args.torch_threads, k=K, questions=len(QUESTIONS),
        corpus=[str(f.relative_to(REPO)) for f in files], peer=args.peer, model=args.model,
    )


def run(args: argparse.Namespace) -> int:
    os.environ.update({k: v for k, v in child_env(args.torch_threads).items()
                       if k.endswith("_THREADS") or k in ("TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE",
                                                          "TRANSFORMERS_OFFLINE")})
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    files = sorted((REPO / "docs").glob("*.md"))
    emit(environment_line(args, files))
    env = child_env(args.torch_threads)
    children: list[Child] = []
    problems: list[str] = []
    setup: dict[str, Any] = {"record": "setup", "bench": BENCH}
    with started(children):
        llm = Child("scripted LLM", [sys.executable, str(Path(__file__).resolve()), "--serve-scripted-llm",
                                     str(args.delay_ms / 1000)], env, workdir / "llm.log", stdin=True)
        children.append(llm)
        llm_url = llm.first_line(60) + "/v1"
        t0 = time.monotonic()
        ours = Child("mxrag serve", [sys.executable, "-m", "mx_rag.cli", "serve", "--data-dir", str(workdir / "data"),
                                     "--port", "0", "--llm-url", llm_url, "--workers", str(args.workers)],
                     {**env, "MXRAG_EMBEDDING__MODEL": args.model}, workdir / "mxrag.log")
        children.append(ours)
        our_url = ours.first_line(120)
        wait_http(our_url + "/readyz", 600, lambda r: r.status_code == 200, ours)
        setup["mx_rag_start_s"] = round(time.monotonic() - t0, 2)
        log(f"mxrag serve ready at {our_url} in {setup['mx_rag_start_s']} s; uploading {len(files)} files")
        setup["knowledge_base"] = ingest(our_url, files)
        log(f"ingested: {setup['knowledge_base']}")

        pin_torch_threads(args.torch_threads)
        inproc = InProcess(workdir / "data", llm_url)
        from mx_rag.app.answers import ANSWER_PROMPT as instruction

        urls = {"mx_rag": our_url}
        servers = {"mx_rag": ours}
        if args.peer == "hayhooks":
            chunks = inproc.chunks()
            (workdir / "chunks.json").write_text(json.dumps(chunks))
            settings = inproc.settings
            from mx_rag.embedding.local.model_info import read_model_info
            from mx_rag.embedding.local.text_embedding import TextEmbedding

            info = read_model_info(TextEmbedding(args.model).model_dir)
            if info.path.resolve() != inproc.service.embedding.model_dir.resolve():  # like with like, or no figures
                raise SystemExit(f"bench/server.py: the server embeds with {inproc.service.embedding.model_dir}, "
                                 f"the peer with {info.path}: no ratio between two models")
            config = {"chunks": str(workdir / "chunks.json"), "model_dir": str(info.path), "k": K,
                      "document_prefix": info.document_prefix, "query_prefix": info.query_prefix,
                      "llm_url": llm_url, "llm_model": settings.llm.model, "max_tokens": settings.llm.max_tokens,
                      "temperature": settings.llm.temperature, "timeout": settings.llm.timeout,
                      "instruction": instruction}
            (workdir / "peer.json").write_text(json.dumps(config))
            pipeline_dir = workdir / "pipelines" / PEER_PIPELINE
            pipeline_dir.mkdir(parents=True)
            (pipeline_dir / "pipeline_wrapper.py").write_text(PEER_WRAPPER)
            port = free_port()
            t0 = time.monotonic()
            peer = Child("hayhooks", [*HAYHOOKS_CLI, "run", "--host", "127.0.0.1", "--port", str(port),
                                      "--pipelines-dir", str(workdir / "pipelines"), "--workers", str(args.workers)],
                         {**env, "MXRAG_BENCH_PEER_CONFIG": str(workdir / "peer.json"),
                          "HAYHOOKS_LOG_LEVEL": "WARNING"},  # as quiet as our server (warnings, no access log)
                         workdir / "hayhooks.log", banner=False)
            children.append(peer)
            servers["hayhooks"] = peer
            urls["hayhooks"] = f"http://127.0.0.1:{port}"
            wait_http(urls["hayhooks"] + "/status", 900,
                      lambda r: r.status_code == 200 and PEER_PIPELINE in r.json().get("pipelines", []), peer)
            setup["hayhooks_start_s"] = round(time.monotonic() - t0, 2)
            log(f"hayhooks ready in {setup['hayhooks_start_s']} s")

        setup["checks"] = checks(urls, inproc, problems)
        setup["embedding"] = embedding_costs(inproc)
        setup["loadavg"] = loadavg()
        emit(setup)

        systems = [s for s in SYSTEMS if s in urls or s == "in_process"]
        runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        for rnd in range(args.rounds):
            for endpoint in ENDPOINTS:
                for index, clients in enumerate(args.levels):
                    for system in rotated(systems, index + rnd):
                        if system == "in_process":
                            call = inproc.retrieve if endpoint == "retrieve" else inproc.chat
                            cell = thread_cell(call, clients, args.warmup_s, args.seconds)
                        else:
                            pgid = servers[system].proc.pid  # each server is a process group of its own
                            cell = asyncio.run(http_cell(urls[system], system, endpoint, clients, args.warmup_s,
                                                         args.seconds, lambda pgid=pgid: group_cpu_s(pgid)))
                        line = {"bench": BENCH, "record": "cell", "round": rnd, "system": system,
                                "endpoint": endpoint, "clients": clients, **cell.result(),
                                "loadavg_1m": loadavg_1m()}
                        runs.setdefault((system, endpoint, clients), []).append(line)
                        emit(line)
                        if system == "mx_rag" and line["failures"]:
                            problems.append(f"mx_rag {endpoint} at {clients} clients, round {rnd}: "
                                            f"{line['failures']} failures: {line['errors']}")
        results = {key: combined(key, lines) for key, lines in runs.items()}
        for line in results.values():
            emit(line)
        for endpoint in ENDPOINTS:
            for clients in args.levels:
                base = results[("in_process", endpoint, clients)]
                line: dict[str, Any] = {"bench": BENCH, "record": "overhead", "endpoint": endpoint, "clients": clients,
                                        "in_process_p50_ms": base["p50_ms"]}
                for system in (s for s in systems if s != "in_process"):
                    served = results[(system, endpoint, clients)]
                    line[f"{system}_p50_ms"] = served["p50_ms"]
                    line[f"{system}_ratio_p50"] = round(served["p50_ms"] / base["p50_ms"], 3)
                    line[f"{system}_diff_p50_ms"] = round(served["p50_ms"] - base["p50_ms"], 2)
                    line[f"{system}_rps_share"] = round(served["rps"] / base["rps"], 3) if base["rps"] else None
                    cpu, cpu_base = served["cpu_ms_per_request"], base["cpu_ms_per_request"]
                    if cpu and cpu_base:
                        line[f"{system}_cpu_ratio"] = round(cpu / cpu_base, 3)
                        line[f"{system}_cpu_diff_ms"] = round(cpu - cpu_base, 2)
                emit(line)
        inproc.close()
    emit({"bench": BENCH, "record": "summary", "ok": not problems, "problems": problems,
          "mx_rag_failures": sum(r["failures"] for (s, _, _), r in results.items() if s == "mx_rag"),
          "peer_failures": sum(r["failures"] for (s, _, _), r in results.items() if s not in ("mx_rag", "in_process")),
          "loadavg_end": loadavg()})
    return 0 if not problems else 1


def combined(key: tuple[str, str, int], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """One system, endpoint and level over the rounds: the median of each figure, failures summed."""
    def median(name: str) -> float | None:
        values = [line[name] for line in lines if line[name] is not None]
        return round(statistics.median(values), 2) if values else None

    system, endpoint, clients = key
    return {"bench": BENCH, "record": "result", "system": system, "endpoint": endpoint, "clients": clients,
            "rounds": len(lines), "requests": sum(line["requests"] for line in lines),
            "failures": sum(line["failures"] for line in lines),
            **{name: median(name) for name in ("rps", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "cpu_ms_per_request",
                                               "cores")},
            "rps_runs": [line["rps"] for line in lines], "p50_runs": [line["p50_ms"] for line in lines]}


def embedding_costs(inproc: InProcess) -> dict[str, float]:
    """What one query's MiniLM embedding costs here, alone and within a batch of 8: the floor under
    every retrieval, and what batching concurrent queries would save."""
    embed = inproc.service.embedding.embed_documents
    single = []
    for question in QUESTIONS:
        started = time.perf_counter()
        embed([question])
        single.append((time.perf_counter() - started) * 1000)
    batched = []
    for start in range(0, len(QUESTIONS) - 7, 8):
        started = time.perf_counter()
        embed(QUESTIONS[start:start + 8])
        batched.append((time.perf_counter() - started) * 1000 / 8)
    return {"single_query_p50_ms": round(statistics.median(single), 2),
            "batch8_per_query_p50_ms": round(statistics.median(batched), 2)}


def checks(urls: dict[str, str], inproc: InProcess, problems: list[str]) -> dict[str, Any]:
    """Every question once through each system: same documents as in-process, answers well formed."""
    out: dict[str, Any] = {}
    overlaps = []
    with httpx.Client(timeout=120) as client:
        for question in QUESTIONS:
            expected = inproc.documents(question)
            ours = client.post(urls["mx_rag"] + f"/v1/knowledge-bases/{KB}/retrieve",
                               json={"query": question, "top_k": K}).json()["documents"]
            if ours != expected:
                problems.append(f"mx_rag retrieval differs from in-process for {question!r}")
            if "hayhooks" in urls:
                theirs = client.post(urls["hayhooks"] + f"/{PEER_PIPELINE}/run",
                                     json={"query": question, "top_k": K}).json()["result"]["documents"]
                overlaps.append(len(set(theirs) & set(ours)) / K)
        for system, url in urls.items():
            path, body = http_request(system, "chat", QUESTIONS[0])
            error = check_chat(client.post(url + path, json=body).json())
            if error:
                problems.append(f"{system} chat: {error}")
    out["mx_rag_retrieval_equals_in_process"] = not any("retrieval differs" in p for p in problems)
    if overlaps:
        out["peer_overlap_at_k"] = round(statistics.fmean(overlaps), 3)
    out["in_process_chat"] = inproc.chat(QUESTIONS[0]) or "ok"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve-scripted-llm", type=float, default=None, metavar="DELAY_S", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help="worker processes of each server (default 1)")
    parser.add_argument("--delay-ms", type=float, default=200.0, help="the scripted LLM's delay per answer")
    parser.add_argument("--levels", default="1,8,32", help="concurrent clients, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every cell (medians are reported)")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="unmeasured seconds before each cell")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads in every process")
    parser.add_argument("--peer", choices=("hayhooks", "none"), default="hayhooks")
    parser.add_argument("--workdir", default=DEFAULT_WORKDIR, help="data folder, logs (emptied first)")
    parser.add_argument("--quick", action="store_true", help="1 round, 3 s per cell, 0.5 s warm-up")
    parser.add_argument("--model", default="multilingual-e5-small",
                        help="the embedding model of both servers (mx_rag's default, multilingual-e5-small)")
    args = parser.parse_args(argv)
    if args.serve_scripted_llm is not None:
        return serve_scripted_llm(args.serve_scripted_llm)
    args.levels = [int(x) for x in str(args.levels).split(",") if x.strip()]
    if args.quick:
        args.seconds, args.warmup_s, args.rounds = min(args.seconds, 3.0), min(args.warmup_s, 0.5), 1
    if args.peer == "hayhooks" and (package_version("hayhooks", None) is None
                                   or package_version("sentence-transformers-haystack", None) is None):
        log("hayhooks or sentence-transformers-haystack is not installed: running without the peer")
        args.peer = "none"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
