# SPDX-License-Identifier: Apache-2.0
"""Benchmark ``MindFAISS`` against plain faiss-cpu and LangChain's FAISS wrapper.

Every system gets the same random unit vectors (default 20,000 x 384, float32), inner-product
metric, ids 0..n-1, and the same 1,000 query vectors, k = 10, all in one process and one run:

* ``mx_rag`` FLAT and HNSW: ``MindFAISS`` in memory (``load_local_index=None``);
* ``mx_rag_file``: ``MindFAISS`` FLAT with an index file and ``auto_save`` (an atomic save with
  fsync after every add call): the price of crash safety;
* ``faiss`` FLAT and HNSW: ``IndexIDMap2`` over ``IndexFlatIP`` / ``IndexHNSWFlat`` called
  directly (the floor: no validation, no locking, no bookkeeping);
* ``langchain``: ``langchain_community.vectorstores.FAISS`` over ``IndexFlatIP`` (skipped if it is
  not importable). It has no batch search, so its batch figure is a loop of single searches.

Measured per system: ``add_vps`` (vectors per second, added in batches of ``--batch`` as an
ingestion would); ``batch_qps`` (all queries in one call; systems take turns, best of two rounds);
single-query latency ``p50_ms``, ``p90_ms`` and ``single_qps`` over the first ``--single``
queries (default 500; systems take turns query by query, so machine noise hits all alike); and for
HNSW ``recall_at_10`` against the exact FLAT answer (M=32, efConstruction=40, efSearch=64 in both
mx_rag and faiss), plus a recall curve of the faiss HNSW graph at efSearch 64 to 512 (random 384-d
vectors have no structure: the hardest case for a graph index). FLAT answers of all systems must
be identical, else the run exits 1.

faiss runs with ``--omp-threads`` OpenMP threads (default 1, all systems alike): on a shared
2-core machine two threads made a single-query search 20 times slower (barrier spinning while
the other core is busy), which hid every difference between the systems.

Output: JSON lines on stdout. The first line describes the environment, then one line per
system, then one summary line with ratios (``mx_rag / peer``; above 1 means mx_rag is faster).

Run::

    .venv/bin/python bench/vectorstore.py           # default: under a minute on 2 cores
    .venv/bin/python bench/vectorstore.py --quick   # a few seconds
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import faiss
import numpy as np
from _harness import emit, environment, package_version, rotated, rotating_rounds

from mx_rag.storage.vectorstore import MindFAISS

BENCH = "vectorstore"
DIM = 384
HNSW = {"M": 32, "efConstruction": 40, "efSearch": 64}
Search = Callable[[np.ndarray, int], list[list[int]]]


class System:
    """A name, an add function and two search functions (batch, single) returning id rows."""

    def __init__(self, name: str, index: str, add: Callable[[list[int], np.ndarray], None], search: Search) -> None:
        self.name, self.index, self.add, self.search = name, index, add, search
        self.line: dict[str, Any] = {"bench": BENCH, "system": name, "index": index}
        self.latencies: list[float] = []
        self.index_object: Any = None


def mx_rag_system(index_type: str, path: str | None = None) -> System:
    params = HNSW if index_type == "HNSW" else None
    store = MindFAISS(x_dim=DIM, load_local_index=path, index_type=index_type, metric_type="IP", index_params=params)
    return System(
        "mx_rag_file" if path else "mx_rag",
        index_type,
        lambda ids, x: store.add(ids, x),
        lambda q, k: store.search(q, k=k)[1],
    )


def faiss_system(index_type: str) -> System:
    if index_type == "HNSW":
        inner = faiss.IndexHNSWFlat(DIM, HNSW["M"], faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = HNSW["efConstruction"]
        inner.hnsw.efSearch = HNSW["efSearch"]
    else:
        inner = faiss.IndexFlatIP(DIM)
    index = faiss.IndexIDMap2(inner)

    def search(q: np.ndarray, k: int) -> list[list[int]]:
        _, ids = index.search(q, k)
        return [[int(i) for i in row if i >= 0] for row in ids]

    system = System("faiss", index_type, lambda ids, x: index.add_with_ids(x, np.asarray(ids, dtype=np.int64)), search)
    system.index_object = index
    return system


def langchain_system() -> System | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langchain_community.docstore.in_memory import InMemoryDocstore
            from langchain_community.vectorstores import FAISS
            from langchain_community.vectorstores.utils import DistanceStrategy
    except ImportError:
        return None
    from langchain_core.embeddings import Embeddings

    class NoEmbeddings(Embeddings):  # vectors are given precomputed; nothing is embedded
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise NotImplementedError

        def embed_query(self, text: str) -> list[float]:
            raise NotImplementedError

    store = FAISS(
        embedding_function=NoEmbeddings(),
        index=faiss.IndexFlatIP(DIM),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
        distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
    )

    def add(ids: list[int], x: np.ndarray) -> None:
        pairs = [(str(i), row) for i, row in zip(ids, x.tolist(), strict=True)]
        store.add_embeddings(pairs, metadatas=[{"id": i} for i in ids], ids=[str(i) for i in ids])

    def search(q: np.ndarray, k: int) -> list[list[int]]:
        return [
            [doc.metadata["id"] for doc, _ in store.similarity_search_with_score_by_vector(row, k=k)]
            for row in q.tolist()
        ]

    return System("langchain", "FLAT", add, search)


def unit_vectors(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def measure_add(system: System, data: np.ndarray, batch: int) -> None:
    start = time.perf_counter()
    for first in range(0, len(data), batch):
        rows = data[first : first + batch]
        system.add(list(range(first, first + len(rows))), rows)
    system.line["add_vps"] = round(len(data) / (time.perf_counter() - start), 1)


def measure_batch(systems: Sequence[System], queries: np.ndarray, k: int, rounds: int = 2) -> dict[str, Any]:
    """All queries in one call, the systems taking turns; the best of ``rounds`` runs each."""
    best = {id(s): float("inf") for s in systems}
    answers: dict[tuple[str, str], list[list[int]]] = {}
    for _, system in rotating_rounds(systems, rounds):
        start = time.perf_counter()
        answers[system.name, system.index] = system.search(queries, k)
        best[id(system)] = min(best[id(system)], time.perf_counter() - start)
    for system in systems:
        system.line["batch_qps"] = round(len(queries) / best[id(system)], 1)
    return answers


def warm_up() -> None:
    """Pay one-time costs (lazy imports inside numpy and faiss) before any timing."""
    store = MindFAISS(x_dim=DIM)
    vectors = unit_vectors(20, 3)
    store.add(list(range(20)), vectors)
    store.search(vectors, k=5)
    store.search(vectors, k=5, filter_dict={"document_id": [0]})


def measure_single(systems: Sequence[System], queries: np.ndarray, k: int) -> None:
    for n, query in enumerate(queries):
        for system in rotated(systems, n):
            start = time.perf_counter()
            system.search(query[None, :], k)
            system.latencies.append(time.perf_counter() - start)
    for system in systems:
        lat = np.sort(np.asarray(system.latencies))
        system.line.update(
            p50_ms=round(float(np.percentile(lat, 50)) * 1000, 3),
            p90_ms=round(float(np.percentile(lat, 90)) * 1000, 3),
            single_qps=round(len(lat) / float(lat.sum()), 1),
        )


def hnsw_recall_curve(
    system: System, queries: np.ndarray, answers: dict[tuple[str, str], list[list[int]]], k: int
) -> dict[str, Any]:
    """Recall@k of the same faiss HNSW graph at several efSearch values (random data is hard)."""
    index = system.index_object
    curve: dict[str, Any] = {"bench": BENCH, "kind": "hnsw_recall_by_efSearch", "system": system.name}
    for ef in (64, 128, 256, 512):
        faiss.downcast_index(index.index).hnsw.efSearch = ef
        start = time.perf_counter()
        _, ids = index.search(queries, k)
        qps = len(queries) / (time.perf_counter() - start)
        curve[str(ef)] = {"recall_at_10": recall(ids.tolist(), answers["faiss", "FLAT"], k), "batch_qps": round(qps, 1)}
    return curve


def recall(found: list[list[int]], exact: list[list[int]], k: int) -> float:
    return round(float(np.mean([len(set(a) & set(b)) / k for a, b in zip(found, exact, strict=True)])), 4)


def ratio(a: Any, b: Any) -> float | None:
    return round(a / b, 2) if a and b else None


def run(args: argparse.Namespace) -> int:
    faiss.omp_set_num_threads(args.omp_threads)
    emit(environment(
        BENCH, "kind", "when", cpus=os.cpu_count(), faiss=faiss.__version__, faiss_threads=faiss.omp_get_max_threads(),
        langchain_community=package_version("langchain-community"), vectors=args.vectors, dim=DIM,
        queries=args.queries, k=args.k, batch=args.batch,
    ))
    data, queries = unit_vectors(args.vectors, 1), unit_vectors(args.queries, 2)
    with tempfile.TemporaryDirectory() as tmp:
        systems = [mx_rag_system("FLAT"), faiss_system("FLAT"), mx_rag_system("FLAT", os.path.join(tmp, "f.index"))]
        lc = langchain_system()
        systems += [lc] if lc else []
        systems += [mx_rag_system("HNSW"), faiss_system("HNSW")]
        warm_up()
        for system in systems:
            measure_add(system, data, args.batch)
        answers = measure_batch(systems, queries, args.k)
        measure_single(systems, queries[: args.single], args.k)
        curve = hnsw_recall_curve(systems[-1], queries, answers, args.k)
    exact = answers["faiss", "FLAT"]
    wrong = [f"{name}/{index}" for (name, index), ids in answers.items() if index == "FLAT" and ids != exact]
    for system in systems:
        if system.index == "HNSW":
            system.line["recall_at_10"] = recall(answers[system.name, "HNSW"], exact, args.k)
        emit(system.line)
    emit(curve)
    by = {(s.name, s.index): s.line for s in systems}
    summary: dict[str, Any] = {"bench": BENCH, "kind": "summary", "flat_answers_identical": not wrong}
    for metric in ("add_vps", "batch_qps", "single_qps"):
        for peer, index in (("faiss", "FLAT"), ("langchain", "FLAT"), ("faiss", "HNSW")):
            if (peer, index) in by:
                key = f"{metric}_mx_rag_over_{peer}_{index.lower()}"
                summary[key] = ratio(by["mx_rag", index].get(metric), by[peer, index].get(metric))
    summary["add_vps_file_over_memory"] = ratio(by["mx_rag_file", "FLAT"]["add_vps"], by["mx_rag", "FLAT"]["add_vps"])
    emit(summary)
    if wrong:
        print(f"vectorstore benchmark FAILED: FLAT answers differ from faiss for {wrong}", file=sys.stderr)
        return 1
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--vectors", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--single", type=int, default=500, help="queries (the first ones) timed one by one")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=1_000, help="vectors per add call")
    parser.add_argument("--omp-threads", type=int, default=1, help="faiss OpenMP threads, the same for all")
    parser.add_argument("--quick", action="store_true", help="2,000 vectors, 200 queries")
    args = parser.parse_args(argv)
    if args.quick:
        args.vectors, args.queries, args.single = 2_000, 200, 200
    args.single = min(args.single, args.queries)
    return args


if __name__ == "__main__":
    sys.exit(run(parse_args(None)))
