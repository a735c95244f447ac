# SPDX-License-Identifier: Apache-2.0
"""Benchmark every mx_rag store in one run: full-text search of the chunk stores and vector search
of the vector stores, the new Milvus and openGauss stores next to the ones mx_rag already had.

Full text (the chunks of bench/docstore.py: default 5,000 of about 300 characters, half English,
half Chinese; its 8 questions, top_k=5):

* ``sqlite``: ``SQLiteDocstore`` (FTS5, BM25 ranking; jieba tokens made by mx_rag);
* ``postgres``: ``PostgresDocstore`` (tsvector + GIN) on ``--postgres-url``;
* ``opengauss_pg``: ``OpenGaussDocstore`` (the same index, named) on ``--pgvector-url``;
* ``milvus_lite``: ``MilvusDocstore`` on milvus-lite (Milvus's BM25 function, jieba analyzer).

Measured: ``bulk_add`` seconds (one ``add`` of every chunk) and ``full_text`` p50/p90 ms, stores
taking turns query by query; ``agree_top1_with_sqlite``: the share of questions whose first hit is
SQLite's (the rankers differ: BM25 in SQLite and Milvus, matched words then ts_rank in PostgreSQL).

Vectors (default 10,000 random unit vectors of 128 dimensions, inner product, 200 queries, k=10):

* ``faiss_flat`` / ``faiss_hnsw``: ``MindFAISS`` in memory (HNSW M=32, efSearch 64);
* ``milvus_lite``: ``MilvusDB`` on milvus-lite (FLAT);
* ``opengauss_pg``: ``OpenGaussDB`` HNSW (m=32 and ef_search 64, as MindFAISS; ef_construction
  64, the least pgvector takes for m=32, where faiss builds with 40) on PostgreSQL with pgvector.

faiss runs with one OpenMP thread (as bench/vectorstore.py's default: on a shared 2-core machine
more threads make a single query many times slower).

Measured: ``add_vps`` (vectors per second, batches of 1,000), single-query p50/p90 ms (turns,
query by query) and ``recall_at_10`` against the exact answer (numpy).

Output: JSON lines on stdout; the first holds the environment and the load average, the last the
load average again. Skips a store (with the reason) whose server is not given.

Run::

    flock /tmp/mxrag-bench.lock .venv/bin/python bench/stores.py \\
        --postgres-url "$(scripts/ensure_postgres.sh)" --pgvector-url "$(scripts/ensure_pgvector.sh)"
    .venv/bin/python bench/stores.py --quick ...   # a smoke run
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit, environment, loadavg, ms, package_version, percentile, positive_int, timed
from docstore import QUERIES, make_chunks

from mx_rag.storage.document_store import MxDocument

BENCH = "stores"
SEED = 5


def full_text_stores(workdir: Path, args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[], None]]:
    """The chunk stores to compare, and a function that drops what they created."""
    from pymilvus import MilvusClient
    from sqlalchemy import create_engine

    from mx_rag.storage.document_store import MilvusDocstore, OpenGaussDocstore, PostgresDocstore, SQLiteDocstore

    stores: dict[str, Any] = {"sqlite": SQLiteDocstore(db_path=workdir / "bench.db")}
    cleanups: list[Callable[[], None]] = []
    table = f"bench_{uuid.uuid4().hex[:12]}"
    if args.postgres_url:
        stores["postgres"] = PostgresDocstore(args.postgres_url, table_name=table)
        cleanups.append(lambda: stores["postgres"].engine.dispose())
    if args.pgvector_url:
        schema = table
        admin = create_engine(args.pgvector_url)
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        engine = create_engine(args.pgvector_url, connect_args={"options": f"-csearch_path={schema}"})
        stores["opengauss_pg"] = OpenGaussDocstore(engine=engine)

        def drop_schema() -> None:
            engine.dispose()
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
            admin.dispose()

        cleanups.append(drop_schema)
    client = MilvusClient(str(workdir / "milvus.db"))
    stores["milvus_lite"] = MilvusDocstore(client, collection_name="bench_docs")
    cleanups.append(client.close)
    if args.postgres_url:
        cleanups.insert(0, lambda: _drop_table(stores["postgres"], table))
    return stores, lambda: [cleanup() for cleanup in cleanups]


def _drop_table(store: Any, table: str) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {table}")


def run_full_text(workdir: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    docs = make_chunks(args.chunks)
    stores, cleanup = full_text_stores(workdir, args)
    lines: list[dict[str, Any]] = []
    try:
        for name, store in stores.items():
            store.add([MxDocument("预热 warm-up")], 0)  # connections, jieba's dictionary: outside the timing
            seconds, _ = timed(functools.partial(store.add, docs, 1))
            lines.append({"bench": BENCH, "scenario": "bulk_add", "system": name, "chunks": len(docs),
                          "seconds": round(seconds, 3), "chunks_per_s": round(len(docs) / seconds)})
        times: dict[str, list[float]] = {name: [] for name in stores}
        firsts: dict[str, list[str]] = {name: [] for name in stores}
        for turn in range(args.fts_rounds):
            for query in QUERIES:
                order = list(stores)[turn % len(stores):] + list(stores)[: turn % len(stores)]
                for name in order:
                    seconds, hits = timed(functools.partial(stores[name].full_text_search, query, top_k=5))
                    if not hits:
                        raise SystemExit(f"{name}: no hit for {query!r}")
                    times[name].append(seconds)
                    if turn == 0:
                        firsts[name].append(hits[0].page_content)
        for name, values in times.items():
            agree = np.mean([a == b for a, b in zip(firsts[name], firsts["sqlite"], strict=True)])
            lines.append({"bench": BENCH, "scenario": "full_text", "system": name, "calls": len(values),
                          "p50_ms": ms(percentile(values, 0.5)), "p90_ms": ms(percentile(values, 0.9)),
                          "agree_top1_with_sqlite": round(float(agree), 2)})
    finally:
        cleanup()
    return lines


def unit(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, dim)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def vector_stores(workdir: Path, args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[], None]]:
    from pymilvus import MilvusClient
    from sqlalchemy import create_engine

    from mx_rag.storage.vectorstore import MilvusDB, MindFAISS, OpenGaussDB

    stores: dict[str, Any] = {
        "faiss_flat": MindFAISS(x_dim=args.dim, devs=[0], metric_type="IP"),
        "faiss_hnsw": MindFAISS(x_dim=args.dim, devs=[0], metric_type="IP", index_type="HNSW",
                                index_params={"M": 32, "efSearch": 64}),
    }
    client = MilvusClient(str(workdir / "milvus_vectors.db"))
    stores["milvus_lite"] = MilvusDB.create(client=client, collection_name="bench_vectors", x_dim=args.dim,
                                            metric_type="IP")
    cleanups: list[Callable[[], None]] = [client.close]
    if args.pgvector_url:
        engine = create_engine(args.pgvector_url)
        store = OpenGaussDB.create(engine=engine, collection_name=f"bench_{uuid.uuid4().hex[:12]}",
                                   dense_dim=args.dim, params={"dense": {"m": 32, "ef_construction": 64}})
        stores["opengauss_pg"] = store
        cleanups.insert(0, store.drop_collection)
        cleanups.append(engine.dispose)
    return stores, lambda: [cleanup() for cleanup in cleanups]


def run_vectors(workdir: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    data, queries = unit(args.vectors, args.dim, SEED), unit(args.queries, args.dim, SEED + 1)
    exact = np.argsort(-(queries @ data.T), axis=1)[:, :10]
    stores, cleanup = vector_stores(workdir, args)
    lines: list[dict[str, Any]] = []
    try:
        for name, store in stores.items():
            def fill(store: Any = store) -> None:
                for start in range(0, len(data), 1000):
                    store.add(list(range(start, min(start + 1000, len(data)))), data[start : start + 1000])

            seconds, _ = timed(fill)
            lines.append({"bench": BENCH, "scenario": "vector_add", "system": name, "vectors": len(data),
                          "dim": args.dim, "seconds": round(seconds, 3), "add_vps": round(len(data) / seconds)})
        times: dict[str, list[float]] = {name: [] for name in stores}
        found: dict[str, list[list[int]]] = {name: [] for name in stores}
        names = list(stores)
        for i, query in enumerate(queries):
            for name in names[i % len(names):] + names[: i % len(names)]:
                seconds, (_, ids) = timed(functools.partial(stores[name].search, query[None, :], k=10))
                times[name].append(seconds)
                found[name].append(ids[0])
        for name, values in times.items():
            recall = np.mean([len(set(row) & set(want.tolist())) / 10 for row, want in zip(found[name], exact,
                                                                                          strict=True)])
            lines.append({"bench": BENCH, "scenario": "vector_search", "system": name, "calls": len(values),
                          "p50_ms": ms(percentile(values, 0.5)), "p90_ms": ms(percentile(values, 0.9)),
                          "recall_at_10": round(float(recall), 3)})
    finally:
        cleanup()
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=positive_int, default=5_000, help="chunks added to each chunk store")
    parser.add_argument("--fts-rounds", type=positive_int, default=10, help="rounds of the 8 full-text questions")
    parser.add_argument("--vectors", type=positive_int, default=10_000, help="vectors added to each vector store")
    parser.add_argument("--dim", type=positive_int, default=128, help="vector dimension")
    parser.add_argument("--queries", type=positive_int, default=200, help="single-vector searches per store")
    parser.add_argument("--postgres-url", default=None, help="PostgreSQL for PostgresDocstore")
    parser.add_argument("--pgvector-url", default=None, help="PostgreSQL with pgvector for the openGauss stores")
    parser.add_argument("--quick", action="store_true", help="smoke run: 500 chunks, 1 round, 1,000 vectors")
    args = parser.parse_args(argv)
    if args.quick:
        args.chunks, args.fts_rounds, args.vectors, args.queries = 500, 1, 1_000, 20
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import faiss

    faiss.omp_set_num_threads(1)
    emit(environment(BENCH, mxrag=package_version("mxrag"), pymilvus=package_version("pymilvus"),
                     milvus_lite=package_version("milvus-lite"), faiss=package_version("faiss-cpu"),
                     cpu_count=os.cpu_count(), platform=platform.platform(), loadavg=loadavg(),
                     chunks=args.chunks, fts_rounds=args.fts_rounds, vectors=args.vectors, dim=args.dim,
                     queries=args.queries, postgres=bool(args.postgres_url), pgvector=bool(args.pgvector_url)))
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-") as workdir:
        for line in run_full_text(Path(workdir), args) + run_vectors(Path(workdir), args):
            emit(line)
    emit({"bench": BENCH, "scenario": "end", "loadavg": loadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
