# SPDX-License-Identifier: Apache-2.0
"""A knowledge base's ingestion spread over a Ray cluster, written exactly once: the plan.

The driver plans the files as the in-process ingestion does (``mx_rag.knowledge.ingest``: paths
checked, unchanged files skipped by content hash) and registers each new or changed file as a
``pending`` registry row, a changed one as a staged new version. That row is the document's
manifest. A ``RayPool`` (``mx_rag.distributed.pool``; ``ray_ingest`` there for one run) then loads
and splits the files in tasks, embeds the chunks in an actor pool (the model loaded once per actor)
and writes them with a few writer actors, which upsert by deterministic chunk id
(``mx_rag.distributed.stages``). The driver counts the distinct chunks written per document and
commits it (``pending`` -> ``ready``, or the staged version swapped in) once all of them are in
both stores; only then do the registry and retrieval show it.

So a retried task or a restarted actor writes the same rows again, never new ones, and a killed
driver leaves ``pending`` rows that the next open of the knowledge base undoes (``KnowledgeDB``'s
repair) before the rerun skips what was committed and redoes the rest. The files go in waves of
``max_file_count`` files; each wave holds the registry's write lock while it runs, as one
in-process write does, so no other writer takes its pending rows for an interrupted run's.

Every node must read the files under the same paths (a shared file system) and import mx_rag.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.knowledge.ingest import FileEvent, FileJob, IngestReport
from mx_rag.knowledge.knowledge import KnowledgeDB
from mx_rag.utils.checks import check_int, check_number
from mx_rag.utils.lazy import extra_import

__all__ = ["Commits", "RayOptions", "check_scale_out_stores", "connect"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayOptions:
    """How the work is spread: ``embedders`` actors with ``embed_cpus`` CPUs each (a fraction
    lets several share a core, e.g. actors that wait on a remote model server), ``writers``
    writer actors, ``batch_chunks`` chunks per embedding call and per write, ``load_cpus`` CPUs
    per load-and-split task; ``send_files``: the driver reads each file and sends its bytes with
    its load task (files on the driver's disk only, as a server's uploads) instead of every node
    reading it under the same path."""

    embedders: int = 1
    embed_cpus: float = 1
    writers: int = 2
    batch_chunks: int = 256
    load_cpus: float = 1
    send_files: bool = False

    def __post_init__(self) -> None:
        check_int("embedders", self.embedders, 1, 1024)
        check_number("embed_cpus", self.embed_cpus, 0.01, 256)
        check_number("load_cpus", self.load_cpus, 0.01, 256)
        check_int("writers", self.writers, 1, 64)
        check_int("batch_chunks", self.batch_chunks, 1, 100_000)


def check_scale_out_stores(knowledge: KnowledgeDB) -> None:
    """Refuse a knowledge base whose stores live on one machine (ParameterError, one line)."""
    from mx_rag.storage.document_store.postgres_storage import PostgresDocstore
    from mx_rag.storage.vectorstore.milvus import MilvusDB

    local = [
        what for what, ok in (
            ("the registry is a SQLite file (set [stores] registry_url)", knowledge.knowledge_store.db_path is None),
            (f"chunks are in {type(knowledge.chunk_store).__name__} (set [stores] postgres_url)",
             isinstance(knowledge.chunk_store, PostgresDocstore)),
            (f"vectors are in {type(knowledge.vector_store).__name__} (set [stores] milvus_url)",
             isinstance(knowledge.vector_store, MilvusDB)),
        ) if not ok
    ]
    if local:
        raise ParameterError(f"--ray needs stores every node can reach (PostgreSQL and Milvus), but "
                             f"{'; '.join(local)}: FAISS and SQLite knowledge bases are ingested on one machine, "
                             "without --ray")


def connect(address: str) -> Any:
    """``ray``, connected to the cluster at ``address`` (``auto``: the one this machine belongs
    to) unless this process is connected already."""
    with extra_import("ray", "ray", only=("ray",)):
        import ray
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    return ray


class Commits:
    """The documents of one wave: their jobs, the chunks written so far, and their commits."""

    def __init__(self, knowledge: KnowledgeDB, report: IngestReport, progress: Callable[[FileEvent], None] | None):
        self.knowledge, self.report, self.progress = knowledge, report, progress
        self.jobs: dict[int, FileJob] = {}
        self.replaces: dict[int, int] = {}  # staged new version -> the document it replaces
        self.written: dict[int, set[int]] = defaultdict(set)
        self.total: dict[int, int] = {}
        self.done: set[int] = set()

    def register(self, jobs: list[FileJob]) -> list[int]:
        """Give ``jobs`` their pending registry rows (a changed file a staged version), in one transaction."""
        knowledge = self.knowledge
        staged = knowledge.knowledge_store.stage_files(knowledge.knowledge_name, knowledge.user_id,
                                                       [(str(job.path), job.digest) for job in jobs])
        for (doc_id, replaces), job in zip(staged, jobs, strict=True):
            self.jobs[doc_id] = job
            if replaces is not None:
                self.replaces[doc_id] = replaces
        return [doc_id for doc_id, _ in staged]

    def take(self, batch: dict[str, Any]) -> None:
        """Count what the writers wrote; commit the documents now complete in one transaction."""
        complete = []
        for doc_id, chunk, total, error in zip(batch["doc_id"], batch["chunk_id"], batch["total"], batch["error"],
                                               strict=True):
            doc_id = int(doc_id)
            if doc_id in self.done:
                continue
            if error:
                self.done.add(doc_id)
                self._tell_failed(doc_id, str(error))
                continue
            self.written[doc_id].add(int(chunk))
            self.total[doc_id] = int(total)
            if len(self.written[doc_id]) == self.total[doc_id]:
                self.done.add(doc_id)
                complete.append(doc_id)
        if complete:
            self.knowledge.knowledge_store.commit_documents(
                [d for d in complete if d not in self.replaces], [d for d in complete if d in self.replaces]
            )
            for doc_id in complete:
                job = self.jobs[doc_id]
                (self.report.replaced if job.replaces else self.report.added).append(job.given)
                self.report.chunks[job.given] = self.total[doc_id]
                self._tell(FileEvent(job.given, "replaced" if job.replaces else "added", chunks=self.total[doc_id]))

    def finish(self) -> None:
        """Documents that never completed failed (their pending rows are undone next)."""
        for doc_id in sorted(set(self.jobs) - self.done):
            self._tell_failed(doc_id, "not every chunk was written")

    def _tell_failed(self, doc_id: int, reason: str) -> None:
        given = self.jobs[doc_id].given
        logger.warning("cannot ingest %s: %s", Path(given).name, reason)
        self.report.failed.append(given)
        self.report.reasons[given] = reason
        self._tell(FileEvent(given, "failed", reason=reason))

    def _tell(self, event: FileEvent) -> None:
        if self.progress is not None:
            self.progress(event)
