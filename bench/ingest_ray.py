# SPDX-License-Identifier: Apache-2.0
"""Benchmark scale-out ingestion (``mx_rag.distributed``) against the in-process ingestion, into the
same real stores: PostgreSQL (registry and chunks) and a Milvus 2.3.5 standalone.

Scenarios, one JSON line each, on one corpus (HotpotQA paragraphs of /work/shared/data/multihop
written as Markdown files) and one embedding model (``--model``). Start-up is reported apart from
the ingestion: ``cluster_start_s`` (the local cluster up and this process connected),
``actor_start_s`` (the pool's actors started, each model loaded, each writer's stores open) and
``seconds`` (the ingestion itself, through the warm pool: plan, registry rows, load-and-split
tasks, embedding, writes, commits, repair).

* ``inprocess``: ``KnowledgeService.ingest``, what ``mxrag ingest`` runs, the model loaded first
  (``model_load_s``);
* ``ray_nodes_1`` / ``ray_nodes_2``: a ``RayPool`` of ``ray_pool`` on a local cluster made here: a
  head node and 1 or 2 worker nodes, 1 CPU each, one 1-CPU embedding actor per worker node; with
  each node's peak resident memory (the raylet and its worker processes, the head's GCS too);
* ``break_even``: the corpus size above which Ray (actor start + chunks / its rate) beats
  in-process (model load + chunks / its rate), from the lines above;
* ``simulated_N`` (N = ``--workers``): N embedding actors of 0.1 CPU each (a sleeping actor needs
  no core, so 16 fit on this machine) whose embedder sleeps, per batch, the time the real model
  took for a batch of the same size here (measured first: ``real_batch_s``), and returns random
  unit vectors; the loads, the writers, the stores and the driver are the real ones. One cluster
  for every N (a head of 2 + 0.1 N CPUs); scaling efficiency = T1 / (N * TN) of ``seconds``;
* ``ceiling_W``: the same with an embedder that does not sleep (8 actors) and W = 1, 2, 4 writers:
  what the pipeline and the stores take at most here.

The writers' stores are wrapped to log each upsert's time: ``writer_busy`` = upsert seconds /
(writers * seconds); near 1, the writers are the bottleneck. Each scenario writes into a fresh
PostgreSQL schema and Milvus collection, checked after the run (``stored``: chunk rows, vectors).
Run it under ``flock /tmp/mxrag-bench.lock``; every line has /proc/loadavg.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _harness import MULTIHOP, ROOT, emit, environment, loadavg, package_version

sys.path.insert(0, str(ROOT))
from mx_rag.knowledge.store import DEFAULT_EMBEDDING

BENCH = "ingest_ray"
SIM_EMBED_CPUS = 0.1


def write_corpus(folder: Path, files: int, per_file: int) -> list[Path]:
    corpus = json.loads((MULTIHOP / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    items = list(corpus.items())
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        part = [items[(f * per_file + i) % len(items)] for i in range(per_file)]  # wraps: no file is empty
        text = "\n\n".join(f"## {title}\n\n{''.join(sentences)}" for title, sentences in part)
        path = folder / f"hotpot-{f:03d}.md"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


@contextmanager
def schema(url: str) -> Iterator[str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"bench_{uuid.uuid4().hex[:12]}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {name}"))
    try:
        scoped = make_url(url).update_query_dict({"options": f"-csearch_path={name}"})
        yield scoped.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {name} CASCADE"))
        engine.dispose()


def service_for(pg: str, milvus: str, data: Path, model: str) -> Any:
    from mx_rag.app.service import KnowledgeService
    from mx_rag.app.settings import load_settings

    collection = f"bench_{uuid.uuid4().hex[:12]}"
    settings = load_settings(data_dir=data, embedding={"model": model}, stores={
        "postgres_url": pg, "registry_url": pg, "milvus_url": milvus, "milvus_collection": collection})
    service = KnowledgeService(settings)
    service.create(service.local_principal(), "bench")
    return service


def drop(service: Any) -> None:
    service.vectors.drop_collection()


class NodeMemory:
    """Peak resident memory per node of ``cluster`` (its raylet with the raylet's process tree;
    the head's GCS too), sampled every 0.5 s. Only this cluster's processes: another cluster on
    the machine (a test session's) is not counted."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NodeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(0.5):
            nodes = [("head", self.cluster.head_node)] + [(f"worker_{n}", node) for n, node in
                                                          enumerate(self.cluster.worker_nodes, 1)]
            for name, node in nodes:
                try:
                    roots = [psutil.Process(info.process.pid) for kind in ("raylet", "gcs_server")
                             for info in node.all_processes.get(kind, [])]
                    rss = sum(p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
                              for p in roots)
                except psutil.Error:
                    continue
                self.peak[name] = max(self.peak.get(name, 0.0), round(rss / 2**20, 1))


@contextmanager
def cluster(worker_nodes: int, head_cpus: int = 1) -> Iterator[tuple[Any, float]]:
    import ray
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    store = 100 * 2**20
    head = {"num_cpus": head_cpus, "object_store_memory": store, "include_dashboard": False}
    try:
        made = Cluster(initialize_head=True, head_node_args=head)
    except Exception:  # the previous cluster's GCS not gone yet ("Timed out waiting for file .../gcs_server_port")
        time.sleep(5)
        started = time.perf_counter()
        made = Cluster(initialize_head=True, head_node_args=head)
    for _ in range(worker_nodes):
        add_node(made, num_cpus=1, object_store_memory=store)
    made.wait_for_nodes()
    ray.init(address=made.address, log_to_driver=False, logging_level=logging.WARNING)
    seconds = time.perf_counter() - started
    try:
        yield made, seconds
    finally:
        ray.shutdown()
        made.shutdown()
        time.sleep(3)  # let its processes go before the next cluster starts


def add_node(cluster: Any, **node: Any) -> None:
    """``cluster.add_node``, tried twice: Ray gives a raylet 30 s to register, which a loaded
    2-core machine sometimes misses."""
    try:
        cluster.add_node(**node)
    except Exception:  # "The current node timed out during startup"
        cluster.add_node(**node)


def timed_ingest(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    report = fn()
    return time.perf_counter() - started, report


class SleepingEmbedder:
    """Sleeps ``seconds_per_chunk`` per text (the real model's time here), returns unit vectors;
    appends ``pid start end texts`` (Unix times) to ``log`` per call."""

    def __init__(self, seconds_per_chunk: float, dimension: int, log: str) -> None:
        self.seconds, self.dimension, self.log = seconds_per_chunk, dimension, log

    def __call__(self, texts: list[str]) -> Any:
        import numpy as np

        started = time.time()
        time.sleep(self.seconds * len(texts))
        rng = np.random.default_rng(len(texts))
        vectors = rng.standard_normal((len(texts), self.dimension)).astype(np.float32)
        with open(self.log, "a", encoding="ascii") as handle:
            handle.write(f"{os.getpid()} {started:.6f} {time.time():.6f} {len(texts)}\n")
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def sleeping(seconds_per_chunk: float, dimension: int, log: str) -> SleepingEmbedder:
    return SleepingEmbedder(seconds_per_chunk, dimension, log)


def embed_timeline(log: Path, began: float) -> dict[str, Any]:
    """From a ``SleepingEmbedder`` log: seconds after ``began`` (the ingestion's start) at which
    the first and the last embedder started, and at which the first and the last one ended;
    the batches."""
    calls = [line.split() for line in log.read_text(encoding="ascii").splitlines()] if log.exists() else []
    if not calls:
        return {}
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for pid, start, end, _ in calls:
        starts[pid] = min(starts.get(pid, math.inf), float(start))
        ends[pid] = max(ends.get(pid, 0.0), float(end))
    return {"first_start_s": round(min(starts.values()) - began, 2),
            "last_start_s": round(max(starts.values()) - began, 2),
            "first_end_s": round(min(ends.values()) - began, 2),
            "last_end_s": round(max(ends.values()) - began, 2), "batches": len(calls)}


class TimedStore:
    """A store whose ``upsert`` appends its duration to ``log`` (one line per call)."""

    def __init__(self, store: Any, log: str) -> None:
        self.store, self.log = store, log

    def upsert(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = self.store.upsert(*args, **kwargs)
        with open(self.log, "a", encoding="ascii") as handle:
            handle.write(f"{time.perf_counter() - started:.6f}\n")
        return result


def timed_stores(settings: Any, dimension: int, log: str) -> tuple[Any, Any]:
    from mx_rag.app import workspace

    return (TimedStore(workspace.chunk_store(settings), log),
            TimedStore(workspace.vector_store(settings, dimension), log))


def busy_seconds(log: Path) -> float:
    return sum(float(line) for line in log.read_text(encoding="ascii").split()) if log.exists() else 0.0


def simulated(args: argparse.Namespace, paths: list[Path], address: str, work: Path, name: str, *,
              embedders: int, writers: int, per_chunk: float) -> dict[str, Any]:
    """One simulated run: a fresh pool (its start timed apart), then the ingestion through it."""
    from mx_rag.distributed import RayOptions, RayPool
    from mx_rag.document import LoaderMng

    with schema(args.postgres_url) as pg:
        service = service_for(pg, args.milvus, work / name, args.model)
        kb = service.open(service.local_principal(), "bench").allowing([str(paths[0].parent)])
        settings, dimension = service.settings, service.embedding.dimension
        log = work / f"{name}.writes"
        pool = RayPool(
            loader_factory=functools.partial(LoaderMng.with_defaults, chunk_size=settings.upload.chunk_size,
                                             chunk_overlap=settings.upload.chunk_overlap),
            embedder_factory=functools.partial(sleeping, per_chunk, dimension, str(work / f"{name}.embeds")),
            stores_factory=functools.partial(timed_stores, settings, dimension, str(log)), dimension=dimension,
            address=address, options=RayOptions(embedders=embedders, embed_cpus=SIM_EMBED_CPUS, writers=writers,
                                                batch_chunks=args.batch))
        started = time.perf_counter()
        with pool:  # starts it
            actor_s = time.perf_counter() - started
            began = time.time()
            seconds, report = timed_ingest(lambda: pool.ingest(kb, paths))
        chunks = sum(report.chunks.values())
        stored = (service.chunks.count(), service.vectors.count())
        drop(service)
    return {"embedders": embedders, "writers": writers, "files": len(paths), "chunks": chunks, "stored": stored,
            "actor_start_s": round(actor_s, 2), "seconds": round(seconds, 2),
            "chunks_per_s": round(chunks / seconds, 2),
            "writer_busy": round(busy_seconds(log) / (writers * seconds), 3),
            "phases_s": {k: round(v, 2) for k, v in pool.phases.items()},
            "embedders_s": embed_timeline(work / f"{name}.embeds", began),
            "failed": len(report.failed), "loadavg": loadavg()}


def real_runs(args: argparse.Namespace, paths: list[Path], work: Path) -> None:
    """``inprocess``, ``ray_nodes_1``, ``ray_nodes_2`` and ``break_even``."""
    from mx_rag.app.scale_out import ingest_on_ray, ray_pool
    from mx_rag.distributed import RayOptions

    rates: dict[str, tuple[float, float]] = {}  # scenario -> (fixed seconds, chunks/s)
    with schema(args.postgres_url) as pg:
        service = service_for(pg, args.milvus, work / "data-in", args.model)
        who = service.local_principal()
        started = time.perf_counter()
        service.embedding.embed_documents(["warm up"])  # the model loaded, as an actor does in its start
        load_s = time.perf_counter() - started
        seconds, report = timed_ingest(lambda: service.ingest(who, "bench", paths, white_paths=[paths[0].parent]))
        chunks = sum(report.chunks.values())
        emit({"bench": BENCH, "scenario": "inprocess", "files": len(paths), "chunks": chunks,
              "model_load_s": round(load_s, 2), "seconds": round(seconds, 2),
              "chunks_per_s": round(chunks / seconds, 2), "loadavg": loadavg()})
        rates["inprocess"] = (load_s, chunks / seconds)
        drop(service)
    for nodes in (1, 2):
        with schema(args.postgres_url) as pg, cluster(nodes) as (made, start_s), NodeMemory(made) as memory:
            address = made.address
            service = service_for(pg, args.milvus, work / f"data-{nodes}", args.model)
            who = service.local_principal()
            started = time.perf_counter()
            options = RayOptions(embedders=nodes, batch_chunks=args.batch)
            with ray_pool(service, address=address, options=options) as pool:
                actor_s = time.perf_counter() - started
                seconds, report = timed_ingest(functools.partial(
                    ingest_on_ray, service, who, "bench", paths, address=address, white_paths=[paths[0].parent],
                    pool=pool))
            chunks = sum(report.chunks.values())
            stored = (service.chunks.count(), service.vectors.count())
            drop(service)
        emit({"bench": BENCH, "scenario": f"ray_nodes_{nodes}", "worker_nodes": nodes, "files": len(paths),
              "chunks": chunks, "stored": stored, "cluster_start_s": round(start_s, 2),
              "actor_start_s": round(actor_s, 2), "seconds": round(seconds, 2),
              "chunks_per_s": round(chunks / seconds, 2), "node_peak_rss_mb": memory.peak,
              "failed": len(report.failed), "loadavg": loadavg()})
        rates[f"ray_nodes_{nodes}"] = (actor_s, chunks / seconds)
    fixed_in, rate_in = rates["inprocess"]
    for name in ("ray_nodes_1", "ray_nodes_2"):
        fixed, rate = rates[name]
        chunks = (fixed - fixed_in) / (1 / rate_in - 1 / rate) if rate > rate_in else None
        emit({"bench": BENCH, "scenario": "break_even", "ray": name, "chunks": None if chunks is None else
              max(0, math.ceil(chunks)), "why": "Ray's rate is not above in-process's" if chunks is None else
              "chunks above which Ray (on a started cluster) is faster, actor start included", "loadavg": loadavg()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--per-file", type=int, default=10, help="HotpotQA paragraphs per file")
    parser.add_argument("--model", default=DEFAULT_EMBEDDING, help="default: the SDK's default model")
    parser.add_argument("--batch", type=int, default=32, help="chunks per embedding call and per write")
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--ceiling-writers", default="1,2,4")
    parser.add_argument("--sim-files", type=int, default=80, help="files of the simulated runs")
    parser.add_argument("--sleep-per-chunk", type=float, default=None,
                        help="seconds the simulated embedder sleeps per chunk (default: the real batch's here)")
    parser.add_argument("--postgres-url", default=Path("/tmp/pg.url").read_text().strip()
                        if Path("/tmp/pg.url").exists() else None)
    parser.add_argument("--milvus", required=True, help="a Milvus server's URI")
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--skip-sim", action="store_true")
    args = parser.parse_args()

    from mx_rag.document import LoaderMng
    from mx_rag.embedding.local import TextEmbedding

    emit(environment(BENCH, loadavg=loadavg(), cpus=os.cpu_count(), ray=package_version("ray"), model=args.model,
                     batch=args.batch))
    work = Path(tempfile.mkdtemp(prefix="mxrag-ingest-ray-"))
    paths = write_corpus(work / "docs", args.files, args.per_file)
    sim_paths = write_corpus(work / "sim", args.sim_files, args.per_file)
    embedding = TextEmbedding(args.model)
    loader = LoaderMng.with_defaults()  # the settings' defaults: 750 characters, 150 overlap
    texts = [d.page_content for p in paths[:8] for d in loader.load_and_split(str(p))][: args.batch]
    embedding.embed_documents(texts)  # loads the model
    started = time.perf_counter()
    embedding.embed_documents(texts)
    batch_s = time.perf_counter() - started
    per_chunk = batch_s / len(texts) if args.sleep_per_chunk is None else args.sleep_per_chunk
    emit({"bench": BENCH, "scenario": "real_batch", "chunks": len(texts), "real_batch_s": round(batch_s, 3),
          "loadavg": loadavg()})
    if not args.skip_real:
        real_runs(args, paths, work)
    workers = [int(w) for w in args.workers.split(",")]
    head_cpus = 2 + math.ceil(SIM_EMBED_CPUS * max(workers))
    if args.skip_sim:
        return
    with cluster(0, head_cpus=head_cpus) as (made, start_s):
        address = made.address
        emit({"bench": BENCH, "scenario": "sim_cluster", "head_cpus": head_cpus, "cluster_start_s": round(start_s, 2),
              "loadavg": loadavg()})
        base = None
        for n in workers:
            line = simulated(args, sim_paths, address, work, f"sim-{n}", embedders=n, writers=2, per_chunk=per_chunk)
            base = base or line["seconds"]
            emit({"bench": BENCH, "scenario": f"simulated_{n}", **line, "sleep_per_chunk_s": round(per_chunk, 4),
                  "ideal_s": round(line["chunks"] * per_chunk / n, 2),
                  "overhead_s": round(line["seconds"] - line["chunks"] * per_chunk / n, 2),
                  "efficiency": round(base / (n * line["seconds"]), 3)})
        for w in [int(w) for w in args.ceiling_writers.split(",")]:
            line = simulated(args, sim_paths, address, work, f"ceiling-{w}", embedders=8, writers=w, per_chunk=0.0)
            emit({"bench": BENCH, "scenario": f"ceiling_{w}", **line})


if __name__ == "__main__":
    main()
