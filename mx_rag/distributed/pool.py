# SPDX-License-Identifier: Apache-2.0
"""``RayPool``: the actors of scale-out ingestion, started once and kept for every wave of files
and every run that goes through the pool.

A pool holds ``embedders`` embedding actors (each loads the model once, in its constructor) and
``writers`` writer actors (each opens the shared stores once), spread over the cluster's nodes.
``ingest`` plans the files (``mx_rag.distributed.ingest``), then drives the stages from this
process: registry rows, load-and-split tasks (retried by Ray when their worker or node dies),
batches of ``batch_chunks`` chunks sent to the least busy embedder and on, as an object
reference, to a writer; at most two batches per embedder in flight, the last ones smaller so
that the embedders end together. Ray restarts a dead actor (``max_restarts``)
and runs its calls again (``max_task_retries``); a batch whose write still fails (its object lost
with a node, a store error) is sent again, up to ``BATCH_ATTEMPTS`` times, and the writers'
upserts by chunk id make every repeat harmless.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mx_rag.distributed.ingest import Commits, RayOptions, check_scale_out_stores, connect
from mx_rag.distributed.stages import Embedder, Writer, columns, load_and_split, warm_loader
from mx_rag.knowledge.ingest import FileEvent, FileJob, IngestReport, plan_files
from mx_rag.knowledge.knowledge import KnowledgeDB

__all__ = ["BATCH_ATTEMPTS", "RayPool", "ray_ingest"]

logger = logging.getLogger(__name__)

BATCH_ATTEMPTS = 5  # sends of one batch before its documents are reported failed
LOAD_RETRIES = 5  # Ray's retries of a load task whose worker or node died
IN_FLIGHT_PER_EMBEDDER = 2  # batches queued per embedding actor: one running, one waiting
REGISTER_AHEAD = 16  # files given their registry rows in one transaction


@dataclass
class _Batch:
    rows: list[dict[str, Any]]
    attempts: int = 0
    embedder: int = 0
    writer: int = 0
    docs: list[int] = field(default_factory=list)


class RayPool:
    """The embedding and writer actors of scale-out ingestion on the cluster at ``address``.

    Use it as a context manager (or call ``start`` and ``close``); ``ingest`` may be called many
    times, on several knowledge bases with the same stores, and the actors stay warm in between.

    Args:
        loader_factory: makes the ``LoaderMng`` (once per worker process).
        embedder_factory: makes the embedding function ``texts -> vectors`` (once per actor).
        stores_factory: makes ``(chunk_store, vector_store)`` for a writer: the knowledge base's
            stores, reached from another machine.
        dimension: the vectors' dimension.
        address: the cluster (``auto``: the one this machine belongs to).
        options: how the work is spread (``RayOptions``).
    """

    def __init__(self, *, loader_factory: Callable[[], Any], embedder_factory: Callable[[], Callable[[list[str]], Any]],
                 stores_factory: Callable[[], tuple[Any, Any]], dimension: int, address: str = "auto",
                 options: RayOptions | None = None) -> None:
        self.loader_factory, self.embedder_factory = loader_factory, embedder_factory
        self.stores_factory = stores_factory
        self.dimension, self.address = dimension, address
        self.options = options or RayOptions()
        self._ray: Any = None
        self._load: Any = None
        self._embedders: list[Any] = []
        self._writers: list[Any] = []
        # seconds of the last ``ingest`` per phase (logged at INFO): plan (paths, hashes), pipeline,
        # repair; and parts of the pipeline: register (registry rows), ramp (until the first batch
        # is sent), results (the driver taking loaded chunks and written batches: counts, commits)
        self.phases: dict[str, float] = {}

    def __enter__(self) -> RayPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> float:
        """Start the actors and wait until every model is loaded and every store open (and a
        loader made in the load tasks' worker processes); the seconds that took (0 when the pool
        was started already).

        Raises:
            ExtraNotInstalledError: Ray is not installed (``mxrag[ray]``).
        """
        if self._embedders:
            return 0.0
        started = time.perf_counter()
        ray = self._ray = connect(self.address)
        options = self.options
        restart = {"max_restarts": -1, "max_task_retries": -1, "scheduling_strategy": "SPREAD"}
        self._load = ray.remote(load_and_split).options(num_cpus=options.load_cpus, max_retries=LOAD_RETRIES,
                                                        scheduling_strategy="SPREAD")
        embedder = ray.remote(Embedder).options(num_cpus=options.embed_cpus, **restart)
        writer = ray.remote(Writer).options(num_cpus=0, **restart)
        threads = max(1, int(options.embed_cpus))
        self._embedders = [embedder.remote(self.embedder_factory, self.dimension, threads)
                           for _ in range(options.embedders)]
        self._writers = [writer.remote(self.stores_factory) for _ in range(options.writers)]
        # the load tasks' worker processes too: one loader made per CPU free for loads (Ray keeps
        # idle workers up to a node's CPU count), so that the first files wait for no imports
        warm = ray.remote(warm_loader).options(num_cpus=options.load_cpus, scheduling_strategy="SPREAD")
        free = float(ray.available_resources().get("CPU", 0.0)) - options.embed_cpus * options.embedders
        loads = [warm.remote(self.loader_factory) for _ in range(max(1, min(8, int(free / options.load_cpus))))]
        try:
            ray.get([actor.ready.remote() for actor in self._embedders + self._writers] + loads)
        except BaseException:
            self.close()
            raise
        return time.perf_counter() - started

    def close(self) -> None:
        """Stop the actors (the pool can be started again)."""
        for actor in self._embedders + self._writers:
            self._ray.kill(actor, no_restart=True)
        self._embedders, self._writers = [], []

    def ingest(self, knowledge: KnowledgeDB, files: Sequence[str | Path], *,
               progress: Callable[[FileEvent], None] | None = None) -> IngestReport:
        """Ingest ``files`` into ``knowledge`` exactly once; report per file (as ``ray_ingest``).

        Raises:
            ParameterError: the knowledge base's stores are not PostgreSQL and Milvus.
        """
        check_scale_out_stores(knowledge)
        self.start()
        self.phases = dict.fromkeys(("plan", "pipeline", "register", "ramp", "results", "repair"), 0.0)
        report = IngestReport()
        given = [str(f) for f in files]
        for start in range(0, len(given), knowledge.max_file_count):
            clean = False
            try:
                with knowledge.knowledge_store.write_lock():
                    clean = self._wave(knowledge, given[start : start + knowledge.max_file_count], report, progress)
            finally:  # (under the knowledge base's own lock) failed documents undone, replaced versions removed;
                # the two stores compared unless every file of the wave was written at the first try
                began = time.perf_counter()
                knowledge.repair(compare_stores=not clean)
                self.phases["repair"] += time.perf_counter() - began
        logger.info("ingested %d files: %s", len(given), ", ".join(f"{k} {v:.2f} s" for k, v in self.phases.items()))
        return report

    def _wave(self, knowledge: KnowledgeDB, files: list[str], report: IngestReport,
              progress: Callable[[FileEvent], None] | None) -> bool:
        """Run one wave; whether it was clean: no file failed and no batch was sent twice."""
        before, failed = len(report.unchanged), len(report.failed)
        began = time.perf_counter()
        jobs = plan_files(knowledge, files, True, report)
        for given in report.unchanged[before:]:
            if progress is not None:
                progress(FileEvent(given, "unchanged"))
        self.phases["plan"] += time.perf_counter() - began
        if not jobs:
            return True
        commits = Commits(knowledge, report, progress)
        began = time.perf_counter()
        run = _Run(self, commits)
        run.drive(jobs)
        commits.finish()
        self.phases["pipeline"] += time.perf_counter() - began
        return not run.resent and len(report.failed) == failed


class _Run:
    """One wave's flow through the pool: registry rows, loads, batches, embeds, writes, commits.

    Files get their ``pending`` registry rows ``REGISTER_AHEAD`` at a time, in one transaction,
    just before their load tasks are sent, so the rows are written while earlier files are
    embedded. A batch goes to the embedder with the fewest
    chunks queued, at most ``IN_FLIGHT_PER_EMBEDDER`` batches each; the last ones get smaller
    (``_send_waiting``)."""

    def __init__(self, pool: RayPool, commits: Commits) -> None:
        self.ray, self.pool, self.commits = pool._ray, pool, commits
        self.batch = pool.options.batch_chunks
        self.smallest = max(1, self.batch // 16)  # the last batches' size at least
        self.embedders = len(pool._embedders)
        self.loading: dict[Any, dict[str, Any]] = {}
        self.waiting: list[dict[str, Any]] = []  # chunks loaded, not yet in a batch
        self.writing: dict[Any, _Batch] = {}
        self.embed_batches: Counter[int] = Counter()  # batches sent to each embedder, not yet written
        self.embed_chunks: Counter[int] = Counter()  # and their chunks
        self.write_busy: Counter[int] = Counter()
        cpus = float(self.ray.cluster_resources().get("CPU", 1.0))
        self.max_loads = max(2, int(2 * cpus / pool.options.load_cpus))
        self.started = time.perf_counter()
        self.first_sent: float | None = None
        self.resent = False  # a batch had to be sent again (a writer or embedder failed)

    def drive(self, jobs: list[FileJob]) -> None:
        todo = deque(jobs)
        registered: deque[dict[str, Any]] = deque()  # rows written, files not yet sent
        phases = self.pool.phases
        most_waiting = self.batch * IN_FLIGHT_PER_EMBEDDER * self.embedders
        while todo or registered or self.loading or self.waiting or self.writing:
            while (todo or registered) and len(self.loading) < self.max_loads and len(self.waiting) < most_waiting:
                if not registered:
                    registered.extend(self._register([todo.popleft() for _ in range(min(REGISTER_AHEAD, len(todo)))]))
                row = registered.popleft()
                sent = {**row, "data": Path(row["path"]).read_bytes()} if self.pool.options.send_files else row
                self.loading[self.pool._load.remote(sent, self.pool.loader_factory)] = row
            self._send_waiting(loaded=not (todo or self.loading))
            pending = list(self.loading) + list(self.writing)
            if not pending:
                continue
            done, _ = self.ray.wait(pending, num_returns=1, timeout=5.0)
            if done:  # and whatever else is finished by now
                done, _ = self.ray.wait(pending, num_returns=len(pending), timeout=0)
            began = time.perf_counter()
            for ref in done:
                if ref in self.loading:
                    self._loaded(ref)
                else:
                    self._written(ref)
            phases["results"] += time.perf_counter() - began
        phases["ramp"] += (self.first_sent or time.perf_counter()) - self.started

    def _register(self, jobs: list[FileJob]) -> list[dict[str, Any]]:
        began = time.perf_counter()
        knowledge_id = self.commits.knowledge.knowledge_id
        rows = [{"doc_id": doc_id, "path": str(job.path), "digest": job.digest, "knowledge_id": knowledge_id}
                for doc_id, job in zip(self.commits.register(jobs), jobs, strict=True)]
        self.pool.phases["register"] += time.perf_counter() - began
        return rows

    def _send_waiting(self, loaded: bool) -> None:
        """Batches to the embedders with a free place: full ones while files are still loading
        (an idle embedder takes what is there, so that each starts as early as it can); once
        every file is ``loaded``, smaller and smaller ones (what is left over twice the
        embedders), so that they all end at about the same time, however fast each one is."""
        while self.waiting:
            free = [i for i in range(self.embedders) if self.embed_batches[i] < IN_FLIGHT_PER_EMBEDDER]
            if not free:
                return
            embedder = self._least_queued(free)
            if loaded:
                size = max(self.smallest, math.ceil(len(self.waiting) / (IN_FLIGHT_PER_EMBEDDER * self.embedders)))
            elif len(self.waiting) >= self.batch or self.embed_batches[embedder] == 0:
                size = self.batch
            else:
                return
            self._send_rows(min(size, self.batch), embedder)

    def _least_queued(self, embedders: Iterable[int]) -> int:
        return min(embedders, key=lambda i: (self.embed_chunks[i], i))

    def _send_rows(self, size: int, embedder: int) -> None:
        rows, self.waiting = self.waiting[:size], self.waiting[size:]
        self._send(_Batch(rows, docs=sorted({int(r["doc_id"]) for r in rows})), embedder)

    def _send(self, batch: _Batch, embedder: int | None = None) -> None:
        if embedder is None:
            embedder = self._least_queued(range(self.embedders))
        writer = min(range(len(self.pool._writers)), key=lambda i: (self.write_busy[i], i))
        batch.embedder, batch.writer = embedder, writer
        self.embed_batches[embedder] += 1
        self.embed_chunks[embedder] += len(batch.rows)
        self.write_busy[writer] += 1
        embedded = self.pool._embedders[embedder].embed.remote(columns(batch.rows))
        self.writing[self.pool._writers[writer].write.remote(embedded)] = batch
        if self.first_sent is None:
            self.first_sent = time.perf_counter()

    def _loaded(self, ref: Any) -> None:
        row = self.loading.pop(ref)
        try:
            chunks = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:  # its worker or node died LOAD_RETRIES times
            chunks = [{"doc_id": row["doc_id"], "chunk_id": -1, "total": 0, "error": f"cannot load it: {_reason(exc)}"}]
        failed = [c for c in chunks if c["error"]]
        if failed:
            self.commits.take(columns([{k: c[k] for k in ("doc_id", "chunk_id", "total", "error")} for c in failed]))
        self.waiting.extend(c for c in chunks if not c["error"])

    def _written(self, ref: Any) -> None:
        batch = self.writing.pop(ref)
        self.embed_batches[batch.embedder] -= 1
        self.embed_chunks[batch.embedder] -= len(batch.rows)
        self.write_busy[batch.writer] -= 1
        try:
            result = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            batch.attempts += 1
            self.resent = True
            if batch.attempts < BATCH_ATTEMPTS:
                logger.warning("a batch of %d chunks was not written (%s): sending it again", len(batch.rows),
                               type(exc).__name__)
                self._send(batch)
            else:
                reason = f"its chunks could not be written: {_reason(exc)}"
                self.commits.take({"doc_id": np.asarray(batch.docs), "chunk_id": np.full(len(batch.docs), -1),
                                   "total": np.zeros(len(batch.docs), dtype=np.int64),
                                   "error": np.asarray([reason] * len(batch.docs))})
            return
        self.commits.take(result)


def _reason(exc: BaseException) -> str:
    """One line for a Ray error: the last line of its text (a remote traceback ends with the
    exception's own message)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def ray_ingest(
    knowledge: KnowledgeDB,
    files: Sequence[str | Path],
    *,
    loader_factory: Callable[[], Any],
    embedder_factory: Callable[[], Callable[[list[str]], Any]],
    stores_factory: Callable[[], tuple[Any, Any]],
    dimension: int,
    address: str = "auto",
    options: RayOptions | None = None,
    progress: Callable[[FileEvent], None] | None = None,
) -> IngestReport:
    """Ingest ``files`` into ``knowledge`` on the Ray cluster at ``address``; report per file.

    The factories, ``dimension``, ``address`` and ``options`` are those of ``RayPool``, which this
    starts for the one call and closes after it.

    Raises:
        ParameterError: the knowledge base's stores are not PostgreSQL and Milvus.
        ExtraNotInstalledError: Ray is not installed (``mxrag[ray]``).
    """
    check_scale_out_stores(knowledge)
    with RayPool(loader_factory=loader_factory, embedder_factory=embedder_factory, stores_factory=stores_factory,
                 dimension=dimension, address=address, options=options) as pool:
        return pool.ingest(knowledge, files, progress=progress)
