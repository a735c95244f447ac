# SPDX-License-Identifier: Apache-2.0
"""Benchmark scale-out ingestion (``mx_rag.distributed``) against the in-process ingestion, into the
same real stores: PostgreSQL (registry and chunks) and a Milvus 2.3.5 standalone.

Scenarios, one JSON line each, on one corpus (HotpotQA paragraphs of /work/shared/data/multihop
written as Markdown files) and one embedding model (``--model``):

* ``inprocess``: ``KnowledgeService.ingest``, what ``mxrag ingest`` runs;
* ``ray_nodes_1`` / ``ray_nodes_2``: ``ingest_on_ray`` on a local cluster made here: a head node
  (1 CPU: the load tasks and the writers) and 1 or 2 worker nodes of 1 CPU each, one embedding
  actor per worker node; with the cluster's start time and each node's peak resident memory (the
  raylet and its worker processes, the head's GCS too);
* ``simulated_N`` (N = ``--workers``): N embedding actors whose embedder sleeps, per batch, the
  time the real model took for a batch of the same size here (measured first: ``real_batch_s``),
  on one head node with N + 1 logical CPUs; the writers and the stores are real. Scaling
  efficiency = T1 / (N * TN) of the ingestion time.

Each scenario writes into a fresh PostgreSQL schema and Milvus collection. Run it under
``flock /tmp/mxrag-bench.lock``; the environment line has /proc/loadavg.
"""

from __future__ import annotations

import argparse
import functools
import json
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

BENCH = "ingest_ray"


def write_corpus(folder: Path, files: int, per_file: int) -> list[Path]:
    corpus = json.loads((MULTIHOP / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    items = list(corpus.items())
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        part = items[f * per_file : (f + 1) * per_file]
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
    """Peak resident memory per Ray node (a raylet with its process tree), sampled every 0.5 s."""

    def __init__(self) -> None:
        self.peak: dict[int, float] = {}
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
            gcs = sum(p.memory_info().rss for p in psutil.process_iter() if _named(p, "gcs_server"))
            raylets = sorted((p for p in psutil.process_iter() if _named(p, "raylet")), key=lambda p: p.pid)
            for n, raylet in enumerate(raylets):
                try:
                    rss = raylet.memory_info().rss + sum(c.memory_info().rss for c in raylet.children(recursive=True))
                except psutil.Error:
                    continue
                rss += gcs if n == 0 else 0
                self.peak[n] = max(self.peak.get(n, 0.0), round(rss / 2**20, 1))


def _named(process: Any, name: str) -> bool:
    try:
        return name in process.name()
    except Exception:
        return False


@contextmanager
def cluster(worker_nodes: int, head_cpus: int = 1) -> Iterator[tuple[str, float]]:
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
    ray.init(address=made.address, log_to_driver=False, logging_level="WARNING")
    seconds = time.perf_counter() - started
    try:
        yield made.address, seconds
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
    """Sleeps ``seconds_per_chunk`` per text (the real model's time here), returns unit vectors."""

    def __init__(self, seconds_per_chunk: float, dimension: int) -> None:
        self.seconds, self.dimension = seconds_per_chunk, dimension

    def __call__(self, texts: list[str]) -> Any:
        import numpy as np

        time.sleep(self.seconds * len(texts))
        rng = np.random.default_rng(len(texts))
        vectors = rng.standard_normal((len(texts), self.dimension)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def sleeping(seconds_per_chunk: float, dimension: int) -> SleepingEmbedder:
    return SleepingEmbedder(seconds_per_chunk, dimension)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--per-file", type=int, default=10, help="HotpotQA paragraphs per file")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--batch", type=int, default=32, help="chunks per embedding call and per write")
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--sim-files", type=int, default=80, help="files of the simulated runs")
    parser.add_argument("--postgres-url", default=Path("/tmp/pg.url").read_text().strip()
                        if Path("/tmp/pg.url").exists() else None)
    parser.add_argument("--milvus", required=True, help="a Milvus server's URI")
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args()

    from mx_rag.app.scale_out import ingest_on_ray
    from mx_rag.distributed import RayOptions, ray_ingest
    from mx_rag.embedding.local import TextEmbedding

    emit(environment(BENCH, loadavg=loadavg(), cpus=os.cpu_count(), ray=package_version("ray"), model=args.model,
                     batch=args.batch))
    work = Path(tempfile.mkdtemp(prefix="mxrag-ingest-ray-"))
    paths = write_corpus(work / "docs", args.files, args.per_file)
    sim_paths = write_corpus(work / "sim", args.sim_files, args.per_file)
    embedding = TextEmbedding(args.model)
    from mx_rag.document import LoaderMng

    loader = LoaderMng.with_defaults()  # the settings' defaults: 750 characters, 150 overlap
    texts = [d.page_content for p in paths[:8] for d in loader.load_and_split(str(p))][: args.batch]
    embedding.embed_documents(texts)  # loads the model
    started = time.perf_counter()
    embedding.embed_documents(texts)
    batch_s = time.perf_counter() - started
    emit({"bench": BENCH, "scenario": "real_batch", "chunks": len(texts), "real_batch_s": round(batch_s, 3),
          "loadavg": loadavg()})
    who = None
    if not args.skip_real:
        with schema(args.postgres_url) as pg:
            service = service_for(pg, args.milvus, work / "data-in", args.model)
            who = service.local_principal()
            seconds, report = timed_ingest(lambda: service.ingest(who, "bench", paths, white_paths=[paths[0].parent]))
            chunks = sum(report.chunks.values())
            emit({"bench": BENCH, "scenario": "inprocess", "files": len(paths), "chunks": chunks,
                  "seconds": round(seconds, 2), "chunks_per_s": round(chunks / seconds, 2), "loadavg": loadavg()})
            drop(service)
        for nodes in (1, 2):
            with schema(args.postgres_url) as pg, NodeMemory() as memory, cluster(nodes) as (address, start_s):
                service = service_for(pg, args.milvus, work / f"data-{nodes}", args.model)
                who = service.local_principal()
                seconds, report = timed_ingest(lambda s=service, w=who, a=address, n=nodes: ingest_on_ray(
                    s, w, "bench", paths, address=a, white_paths=[paths[0].parent],
                    options=RayOptions(embedders=n, batch_chunks=args.batch)))
                chunks = sum(report.chunks.values())
                stored = (service.chunks.count(), service.vectors.count())
                drop(service)
            emit({"bench": BENCH, "scenario": f"ray_nodes_{nodes}", "worker_nodes": nodes, "files": len(paths),
                  "chunks": chunks, "stored": stored, "seconds": round(seconds, 2),
                  "chunks_per_s": round(chunks / seconds, 2), "cluster_start_s": round(start_s, 2),
                  "node_peak_rss_mb": memory.peak, "failed": len(report.failed), "loadavg": loadavg()})
    base = None
    for workers in [int(w) for w in args.workers.split(",")]:
        with schema(args.postgres_url) as pg, cluster(0, head_cpus=workers + 1) as (address, start_s):
            service = service_for(pg, args.milvus, work / f"sim-{workers}", args.model)
            who = service.local_principal()
            kb = service.open(who, "bench").allowing([str(sim_paths[0].parent)])
            settings, dimension = service.settings, service.embedding.dimension
            from mx_rag.app.scale_out import _loader, _stores

            seconds, report = timed_ingest(lambda k=kb, a=address, w=workers, s=settings, d=dimension: ray_ingest(
                k, sim_paths, loader_factory=functools.partial(_loader, s.upload.chunk_size, s.upload.chunk_overlap),
                embedder_factory=functools.partial(sleeping, batch_s / len(texts), d),
                stores_factory=functools.partial(_stores, s, d), dimension=d, address=a,
                options=RayOptions(embedders=w, batch_chunks=args.batch, writers=2)))
            chunks = sum(report.chunks.values())
            stored = (service.chunks.count(), service.vectors.count())
            drop(service)
        base = base or seconds
        emit({"bench": BENCH, "scenario": f"simulated_{workers}", "embedders": workers, "writers": 2,
              "files": len(sim_paths), "chunks": chunks, "stored": stored, "seconds": round(seconds, 2),
              "chunks_per_s": round(chunks / seconds, 2), "sleep_per_chunk_s": round(batch_s / len(texts), 4),
              "efficiency": round(base / (workers * seconds), 3), "ideal_s": round(chunks * batch_s / len(texts)
                                                                                  / workers, 2),
              "cluster_start_s": round(start_s, 2), "failed": len(report.failed), "loadavg": loadavg()})


if __name__ == "__main__":
    main()
