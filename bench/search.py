# SPDX-License-Identifier: Apache-2.0
"""Benchmark ``Retriever.invoke`` over ``MindFAISS`` + ``SQLiteDocstore`` against bare faiss search.

For every size N (default 100,000 and 1,000,000) one SQLite docstore and two ``MindFAISS`` stores
(FLAT and HNSW, inner product, M=32, efConstruction=40, efSearch=64) are filled with the same N
chunks: 384-d random unit vectors and 200-character synthetic sentences with metadata
``{"source": "doc<d>.pdf", "page": <i>}``, 1,000 chunks per document, added one document per
``add`` call (as an ingestion would). The chunk ids the docstore returns are the vector ids.

Each query is a fixed vector (a stored vector plus noise of the same norm: cosine ~0.7 with its
"answer", ~0 with the rest); ``embed_func`` looks it up by query text, so what is timed is our code
and the stores, not a model. ``--queries`` (500) different queries are cycled. Measured per
(N, index, k, variant), one query at a time:

* ``retriever``: ``Retriever(vector_store=..., document_store=..., embed_func=..., k=...,
  score_threshold=..., filter_dict=...).invoke(text)``: LangChain's callback plumbing, the vector
  search, score scaling and thresholds, one docstore query, and the LangChain Documents built;
* ``faiss``: ``index.search(q, k)`` on the same faiss index object (the ``IndexIDMap2`` inside the
  store; for HNSW with efSearch 64, as the store searches), the floor. For the filter variants it
  is given ``SearchParameters(sel=IDSelectorBatch(allowed))`` with ``allowed`` (the chunk ids of
  the filtered documents) precomputed once: the selector is built per query, as faiss needs it.

Variants: ``plain``; ``threshold`` (``score_threshold``, default 0.2: random vectors score ~0.2 at
the top of 100k, so part of the hits are cut); ``filter_1doc`` (``filter_dict`` on one document,
1,000 chunks) and ``filter_10docs`` (10 documents, 10,000 chunks). For HNSW, a filter on at most
4,096 vectors makes ``MindFAISS`` search them exactly (it reconstructs them) where bare faiss
walks the graph with the selector: different work, hence a possibly negative overhead.

``overhead_p50_ms = retriever_p50_ms - faiss_p50_ms``. Where the faiss search itself takes tens of
ms (FLAT, 1M), that difference drowns in the noise of a shared machine, so each retriever call
also times its own ``FaissIndex.search`` (the store's internal index object, wrapped by this
script) and ``inner_overhead_p50_ms`` is the p50 of (retriever call - its own index search): the
time spent in everything but the index search, measured within the same call. The same p50s are
also given in thread CPU time (``*_cpu_p50_ms``, ``cpu_overhead_p50_ms``), which time slices lost
to other processes do not inflate.

Noise control: the two systems take turns query by query (alternating who goes first); every
configuration is run ``--reps`` times (the repetitions are interleaved across configurations),
and each figure is the median over repetitions of the per-repetition percentile. A repetition of
a configuration stops after ``--samples`` queries or ``--budget-s`` seconds (at least
``--min-samples``). faiss runs with ``--omp-threads`` threads (default 1): on a shared 2-core
machine, 2 threads made single-query searches many times slower (barrier spinning), and made
HNSW construction 2.5 times slower. Answers are checked: the retriever's ids must equal bare
faiss's (with a threshold, those scoring at least the threshold), except for HNSW filters that the
store searches exactly; else the run exits 1.

Output: JSON lines on stdout. The environment first; per size one ``build`` line (seconds per
store, rows per second, resident memory now and at peak; with ``--cache-dir`` the figures of the
run that built the stores, and ``this_run_s`` for loading them); one line per configuration; a
summary with the largest overheads against the 1 ms bar.

Run::

    .venv/bin/python bench/search.py                       # 100k and 1M: 1.5 h on a busy 2-core VM,
                                                           # 66 min of it building the 1M HNSW graph
    .venv/bin/python bench/search.py --sizes 100000        # 100k only: about 10 min
    .venv/bin/python bench/search.py --quick               # 10k, a few queries: seconds
    .venv/bin/python bench/search.py --cache-dir /tmp/sb   # keep the stores; later runs load them
                                                           # (a rerun of the default: about 16 min)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss as _faiss
import numpy as np
from _harness import emit, environment, loadavg, memory_mb, package_version, rotated

from mx_rag.retrievers.retriever import Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

faiss: Any = _faiss  # the bundled type stubs lag the library (SearchParametersHNSW, sel=)
BENCH = "search"
DIM = 384
CHUNKS_PER_DOC = 1_000
TEXT_LEN = 200
HNSW = {"M": 32, "efConstruction": 40, "efSearch": 64}
INDEXES = ("FLAT", "HNSW")
VARIANTS = ("plain", "threshold", "filter_1doc", "filter_10docs")
BAR_MS = 1.0
EXACT_FILTER_MAX = 4096  # MindFAISS searches filters on at most this many vectors exactly (_faiss_index.py)
SENTENCE = (
    "the package manager installs and removes software while the kernel schedules processes on every "
    "core network interfaces get addresses from a server a user edits configuration files in etc and "
    "restarts services logs rotate daily backups run at night disks are mounted read only at boot time"
)


# ------------------------------------------------------------------------------------------------
# data: everything is a pure function of (seed, document), so a document can be regenerated alone


def doc_vectors(seed: int, doc: int) -> np.ndarray:
    x = np.random.default_rng([seed, doc]).standard_normal((CHUNKS_PER_DOC, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def fragments(seed: int) -> list[str]:
    """4,096 distinct 40-character word runs; a chunk text is 5 of them, picked by its number."""
    rng = np.random.default_rng([seed, 1 << 30])
    vocabulary = SENTENCE.split(" ")
    out: list[str] = []
    while len(out) < 4096:
        words = [vocabulary[i] for i in rng.integers(0, len(vocabulary), 12)]
        out.append((" ".join(words) + " " * 40)[:39] + " ")
    return out


def doc_chunks(frags: list[str], doc: int) -> list[MxDocument]:
    docs = []
    for page in range(CHUNKS_PER_DOC):
        n = doc * CHUNKS_PER_DOC + page
        picks = [n % 4096, n // 4096 % 4096, n // 4096**2 % 4096, n * 40503 % 4096, (n * 7 + doc) % 4096]
        text = "".join(frags[p] for p in picks)
        docs.append(MxDocument(page_content=text[:TEXT_LEN], metadata={"source": f"doc{doc}.pdf", "page": page},
                               document_name=f"doc{doc}.pdf"))  # fmt: skip
    return docs


def chunk_id(doc: int, page: int) -> int:
    """The id the docstore gives a chunk: a fresh SQLite table numbers rows 1, 2, ... in add order."""
    return doc * CHUNKS_PER_DOC + page + 1


def make_queries(seed: int, n: int, count: int) -> np.ndarray:
    """Unit vectors at cosine ~0.7 from ``count`` random stored vectors."""
    rng = np.random.default_rng([seed, 1 << 31])
    targets = rng.integers(0, n, count)
    rows = np.stack([doc_vectors(seed, int(t) // CHUNKS_PER_DOC)[int(t) % CHUNKS_PER_DOC] for t in targets])
    noise = rng.standard_normal((count, DIM)).astype(np.float32)
    q = rows + noise / np.linalg.norm(noise, axis=1, keepdims=True)
    return np.ascontiguousarray(q / np.linalg.norm(q, axis=1, keepdims=True), dtype=np.float32)


# ------------------------------------------------------------------------------------------------
# building (or loading from --cache-dir)


@dataclass
class Stores:
    n: int
    docstore: SQLiteDocstore
    vector: dict[str, MindFAISS]
    build: dict[str, Any] = field(default_factory=dict)


def new_store(kind: str, path: Path | None) -> MindFAISS:
    params = HNSW if kind == "HNSW" else None
    where = None if path is None else str(path)
    return MindFAISS(x_dim=DIM, load_local_index=where, index_type=kind, metric_type="IP", auto_save=False,
                     index_params=params)  # fmt: skip


def build(n: int, seed: int, folder: Path, kinds: Sequence[str], persist: bool, threads: tuple[int, int]) -> Stores:
    """Fill a docstore and one store per index kind, one document (1,000 chunks) per add call.

    With ``persist``, what is built is saved in ``folder`` with a ``built_<n>_<seed>.json`` marker
    (its build figures), and what the marker lists is loaded instead of built.
    """
    marker = folder / f"built_{n}_{seed}.json"
    stats: dict[str, Any] = json.loads(marker.read_text()) if persist and marker.exists() else {}
    db = folder / f"chunks_{n}_{seed}.db"
    start = time.perf_counter()
    if "docstore_s" in stats:
        stores = Stores(n, SQLiteDocstore(db), {})
        if stores.docstore.count() != n:
            raise SystemExit(f"{db} does not hold {n} chunks; delete {folder}")
    else:
        stats = {}
        for path in folder.glob(f"*_{n}_{seed}.*"):
            path.unlink()
        stores = Stores(n, build_docstore(n, seed, db, stats), {})
    build_threads, search_threads = threads
    for kind in kinds:
        path = folder / f"{kind.lower()}_{n}_{seed}.faiss"
        if f"{kind.lower()}_s" in stats:
            stores.vector[kind] = store = new_store(kind, path)
            if store.count() != n:
                raise SystemExit(f"{path} does not hold {n} vectors; delete {folder}")
            continue
        faiss.omp_set_num_threads(build_threads)
        stores.vector[kind] = store = build_vectors(n, seed, kind, path, stats)
        faiss.omp_set_num_threads(search_threads)
        if persist:
            store.save_local()
    if persist:
        marker.write_text(json.dumps(stats))
    stats["db_mb"] = round(sum(p.stat().st_size for p in folder.glob(db.name + "*")) / 2**20, 1)
    stores.build = {**stats, "this_run_s": round(time.perf_counter() - start, 1)}
    return stores


def build_docstore(n: int, seed: int, db: Path, stats: dict[str, Any]) -> SQLiteDocstore:
    docstore = SQLiteDocstore(db)
    frags = fragments(seed)
    spent = 0.0
    for doc in range(n // CHUNKS_PER_DOC):
        chunks = doc_chunks(frags, doc)
        start = time.perf_counter()
        ids = docstore.add(chunks, doc)
        spent += time.perf_counter() - start
        if ids[0] != chunk_id(doc, 0) or ids[-1] != chunk_id(doc, CHUNKS_PER_DOC - 1):
            raise SystemExit(f"unexpected chunk ids from the docstore: {ids[0]}..{ids[-1]} for document {doc}")
    stats["docstore_s"], stats["docstore_rows_per_s"] = round(spent, 1), round(n / spent, 1)
    return docstore


def build_vectors(n: int, seed: int, kind: str, path: Path, stats: dict[str, Any]) -> MindFAISS:
    store = new_store(kind, path)
    spent = 0.0
    for doc in range(n // CHUNKS_PER_DOC):
        vectors = doc_vectors(seed, doc)
        ids = list(range(chunk_id(doc, 0), chunk_id(doc, CHUNKS_PER_DOC)))
        start = time.perf_counter()
        store.add(ids, vectors, document_id=doc)
        spent += time.perf_counter() - start
    stats[f"{kind.lower()}_s"], stats[f"{kind.lower()}_vectors_per_s"] = round(spent, 1), round(n / spent, 1)
    return store


# ------------------------------------------------------------------------------------------------
# measuring


class TimedSearch:
    """Wraps a store's internal ``FaissIndex.search`` to record how long the last call took."""

    def __init__(self, store: MindFAISS) -> None:
        self.index = store._index
        self.inner = self.index.search
        self.last = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.last = time.perf_counter() - start

    @contextmanager
    def installed(self) -> Iterator[TimedSearch]:
        self.index.search = self  # type: ignore[method-assign]
        try:
            yield self
        finally:
            del self.index.search


@dataclass
class Config:
    n: int
    index: str
    k: int
    variant: str
    retriever: Retriever
    faiss_search: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    timer: TimedSearch
    threshold: float | None
    retriever_p50: list[float] = field(default_factory=list)
    retriever_p99: list[float] = field(default_factory=list)
    faiss_p50: list[float] = field(default_factory=list)
    faiss_p99: list[float] = field(default_factory=list)
    inner_p50: list[float] = field(default_factory=list)
    retriever_cpu_p50: list[float] = field(default_factory=list)
    faiss_cpu_p50: list[float] = field(default_factory=list)
    hits: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)

    def key(self) -> str:
        return f"n={self.n}/{self.index}/k={self.k}/{self.variant}"


def filter_docs(n: int, variant: str) -> list[int]:
    docs = n // CHUNKS_PER_DOC
    if variant == "filter_1doc":
        return [docs // 2]
    return sorted({(docs * i) // 10 for i in range(10)})


def faiss_searcher(index: Any, kind: str, k: int, allowed: np.ndarray | None) -> Callable[[np.ndarray], Any]:
    if allowed is None:
        return lambda q: index.search(q, k)
    if kind == "HNSW":

        def hnsw_filtered(q: np.ndarray) -> Any:
            selector = faiss.IDSelectorBatch(allowed)
            return index.search(q, k, params=faiss.SearchParametersHNSW(sel=selector, efSearch=HNSW["efSearch"]))

        return hnsw_filtered

    def flat_filtered(q: np.ndarray) -> Any:
        selector = faiss.IDSelectorBatch(allowed)
        return index.search(q, k, params=faiss.SearchParameters(sel=selector))

    return flat_filtered


def configs(stores: Stores, queries: dict[str, np.ndarray], args: argparse.Namespace) -> list[Config]:
    embed = lambda texts: queries[texts[0]]  # noqa: E731 - a dict lookup: no model in the timing
    out = []
    for kind in args.indexes:
        store = stores.vector[kind]
        index = store._index.index
        if kind == "HNSW":
            faiss.downcast_index(index.index).hnsw.efSearch = HNSW["efSearch"]
        timer = TimedSearch(store)
        for k in args.k:
            for variant in VARIANTS:
                threshold = args.threshold if variant == "threshold" else None
                docs = filter_docs(stores.n, variant) if variant.startswith("filter") else None
                allowed = None
                if docs is not None:
                    allowed = np.concatenate([np.arange(chunk_id(d, 0), chunk_id(d, CHUNKS_PER_DOC)) for d in docs])
                retriever = Retriever(
                    vector_store=store,
                    document_store=stores.docstore,
                    embed_func=embed,
                    k=k,
                    score_threshold=threshold,
                    filter_dict={"document_id": docs} if docs else {},
                )
                searcher = faiss_searcher(index, kind, k, allowed)
                out.append(Config(stores.n, kind, k, variant, retriever, searcher, timer, threshold))
    return out


def doc_ids(docs: Sequence[Any]) -> list[int]:
    return [chunk_id(int(d.metadata["source"][3:-4]), d.metadata["page"]) for d in docs]


def check_answers(config: Config, texts: list[str], vectors: dict[str, np.ndarray]) -> str | None:
    """None if the retriever returns what bare faiss returns (where both do the same search)."""
    filtered = len(filter_docs(config.n, config.variant)) * CHUNKS_PER_DOC if config.variant.startswith("filter") else 0
    if config.index == "HNSW" and 0 < filtered <= EXACT_FILTER_MAX:
        return None  # MindFAISS searches a small filtered set exactly; faiss walks the graph
    for text in texts[:20]:
        got = doc_ids(config.retriever.invoke(text))
        distances, labels = config.faiss_search(vectors[text])
        expected = [int(i) for d, i in zip(distances[0], labels[0], strict=True)
                    if i >= 0 and (config.threshold is None or min(float(d), 1.0) >= config.threshold)]  # fmt: skip
        if got != expected:
            return f"{config.key()}: query {text!r}: retriever ids {got} != faiss ids {expected}"
    return None


def measure(
    config: Config, texts: list[str], vectors: dict[str, np.ndarray], rep: int, args: argparse.Namespace
) -> None:
    """One repetition: the two systems take turns query by query."""
    retriever_lat, faiss_lat, inner_lat, retriever_cpu, faiss_cpu, hits = [], [], [], [], [], 0
    invoke, search, timer = config.retriever.invoke, config.faiss_search, config.timer
    for text in texts[:3]:  # warm: statement caches, first-touch pages
        invoke(text)
        search(vectors[text])
    gc.collect()
    offset = rep * 7919
    deadline = time.perf_counter() + args.budget_s
    count = 0
    for count in range(1, args.samples + 1):
        text = texts[(offset + count) % len(texts)]
        q = vectors[text]
        for first in (count % 2 == 0, count % 2 == 1):
            if first:
                start, cpu = time.perf_counter(), time.thread_time()
                docs = invoke(text)
                took, cpu = time.perf_counter() - start, time.thread_time() - cpu
                retriever_lat.append(took)
                retriever_cpu.append(cpu)
                inner_lat.append(took - timer.last)
                hits += len(docs)
            else:
                start, cpu = time.perf_counter(), time.thread_time()
                search(q)
                faiss_lat.append(time.perf_counter() - start)
                faiss_cpu.append(time.thread_time() - cpu)
        if count >= args.min_samples and time.perf_counter() > deadline:
            break
    ms = lambda values, p: float(np.percentile(np.asarray(values), p)) * 1000  # noqa: E731
    config.retriever_p50.append(ms(retriever_lat, 50))
    config.retriever_p99.append(ms(retriever_lat, 99))
    config.faiss_p50.append(ms(faiss_lat, 50))
    config.faiss_p99.append(ms(faiss_lat, 99))
    config.inner_p50.append(ms(inner_lat, 50))
    config.retriever_cpu_p50.append(ms(retriever_cpu, 50))
    config.faiss_cpu_p50.append(ms(faiss_cpu, 50))
    config.hits.append(hits / count)
    config.samples.append(count)


def result_line(config: Config) -> dict[str, Any]:
    med = lambda values: round(float(np.median(values)), 3)  # noqa: E731
    line: dict[str, Any] = {
        "bench": BENCH, "n": config.n, "index": config.index, "k": config.k, "variant": config.variant,
        "retriever_p50_ms": med(config.retriever_p50), "retriever_p99_ms": med(config.retriever_p99),
        "faiss_p50_ms": med(config.faiss_p50), "faiss_p99_ms": med(config.faiss_p99),
    }  # fmt: skip
    line["overhead_p50_ms"] = round(line["retriever_p50_ms"] - line["faiss_p50_ms"], 3)
    line["inner_overhead_p50_ms"] = med(config.inner_p50)
    line["retriever_cpu_p50_ms"], line["faiss_cpu_p50_ms"] = med(config.retriever_cpu_p50), med(config.faiss_cpu_p50)
    line["cpu_overhead_p50_ms"] = round(line["retriever_cpu_p50_ms"] - line["faiss_cpu_p50_ms"], 3)
    line["hits_mean"] = round(float(np.mean(config.hits)), 2)
    line["samples"] = config.samples
    if config.threshold is not None:
        line["score_threshold"] = config.threshold
    return line


# ------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    threads = (args.build_threads, args.omp_threads)
    faiss.omp_set_num_threads(args.omp_threads)
    emit(environment(
        BENCH, "kind", "when", cpus=os.cpu_count(), loadavg=loadavg(), faiss=faiss.__version__,
        faiss_threads=args.omp_threads, build_threads=args.build_threads, sqlalchemy=package_version("sqlalchemy"),
        langchain_core=package_version("langchain-core"), sqlite=__import__("sqlite3").sqlite_version,
        sizes=args.sizes, dim=DIM, chunks_per_document=CHUNKS_PER_DOC, text_chars=TEXT_LEN, queries=args.queries,
        k=args.k, reps=args.reps, samples=args.samples, budget_s=args.budget_s, hnsw=HNSW,
        score_threshold=args.threshold,
    ))
    lines: list[dict[str, Any]] = []
    wrong: list[str] = []
    temp = None if args.cache_dir else tempfile.mkdtemp(prefix="mxrag_search_bench_")
    folder = Path(args.cache_dir or temp)  # type: ignore[arg-type]
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for n in args.sizes:
            stores = build(n, args.seed, folder, args.indexes, bool(args.cache_dir), threads)
            gc.collect()
            emit({"bench": BENCH, "kind": "build", "n": n, **stores.build, **memory_mb()})
            matrix = make_queries(args.seed, n, args.queries)
            texts = [f"query {j}: what does chunk {j} say?" for j in range(args.queries)]
            vectors = {text: matrix[j : j + 1] for j, text in enumerate(texts)}
            todo = configs(stores, vectors, args)
            wrong += [problem for c in todo if (problem := check_answers(c, texts, vectors))]
            for rep in range(args.reps):  # rotated, and backwards every other repetition
                for config in rotated(todo, rep)[:: 1 if rep % 2 == 0 else -1]:
                    with config.timer.installed():
                        measure(config, texts, vectors, rep, args)
            for config in todo:
                line = result_line(config)
                lines.append(line)
                emit(line)
            del todo, stores
            gc.collect()
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
    name = lambda x: f"n={x['n']}/{x['index']}/k={x['k']}/{x['variant']}"  # noqa: E731
    over = [name(x) for x in lines if x["overhead_p50_ms"] > BAR_MS]
    inner_over = [name(x) for x in lines if x["inner_overhead_p50_ms"] > BAR_MS]
    emit(
        {
            "bench": BENCH, "kind": "summary", "bar_ms": BAR_MS, "answers_identical": not wrong,
            "overhead_p50_ms_median": round(float(np.median([x["overhead_p50_ms"] for x in lines])), 3),
            "overhead_p50_ms_max": max(x["overhead_p50_ms"] for x in lines),
            "inner_overhead_p50_ms_median": round(float(np.median([x["inner_overhead_p50_ms"] for x in lines])), 3),
            "inner_overhead_p50_ms_max": max(x["inner_overhead_p50_ms"] for x in lines),
            "cpu_overhead_p50_ms_median": round(float(np.median([x["cpu_overhead_p50_ms"] for x in lines])), 3),
            "cpu_overhead_p50_ms_max": max(x["cpu_overhead_p50_ms"] for x in lines),
            "over_bar": over, "inner_over_bar": inner_over, "peak_rss_mb": memory_mb()["peak_rss_mb"],
            "loadavg": loadavg(),
        }
    )  # fmt: skip
    if wrong:
        print("search benchmark FAILED: " + "; ".join(wrong), file=sys.stderr)
        return 1
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=ints, default=[100_000, 1_000_000], help="comma-separated chunk counts")
    parser.add_argument("--k", type=ints, default=[5, 10], help="comma-separated top-k values")
    parser.add_argument("--indexes", type=lambda t: t.upper().split(","), default=list(INDEXES))
    parser.add_argument("--queries", type=int, default=500, help="distinct query vectors, cycled")
    parser.add_argument("--samples", type=int, default=300, help="timed queries per configuration and repetition")
    parser.add_argument("--min-samples", type=int, default=40)
    parser.add_argument("--budget-s", type=float, default=6.0, help="seconds per configuration and repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.2, help="score_threshold of the threshold variant")
    parser.add_argument("--omp-threads", type=int, default=1, help="faiss OpenMP threads while searching")
    parser.add_argument("--build-threads", type=int, default=1, help="faiss OpenMP threads while adding")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cache-dir", help="keep the built stores here and load them on later runs")
    parser.add_argument("--quick", action="store_true", help="10,000 chunks, 50 queries, 2 repetitions")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.samples, args.min_samples, args.reps = [10_000], 50, 50, 20, 2
    bad = [n for n in args.sizes if n < CHUNKS_PER_DOC * 10 or n % CHUNKS_PER_DOC]
    if bad:
        parser.error(f"sizes must be multiples of {CHUNKS_PER_DOC} and at least {CHUNKS_PER_DOC * 10}: {bad}")
    if unknown := set(args.indexes) - set(INDEXES):
        parser.error(f"unknown index types {sorted(unknown)}")
    return args


if __name__ == "__main__":
    sys.exit(run(parse_args(None)))
