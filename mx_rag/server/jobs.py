# SPDX-License-Identifier: Apache-2.0
"""Upload jobs of ``mxrag serve``: their rows in the registry database, and leases that tell a
live job from one whose worker died.

A job is created with a lease held by the worker (the ``JobStore``) that accepted the upload:
the row ``ingest_job_leases`` names that worker, the job's files and when the lease ends. A
heartbeat thread renews the leases of its worker every third of ``lease_s``; a worker that dies
(kill -9, power loss) stops renewing them. The same thread, in every worker, reaps jobs whose
lease ran out, and jobs left unfinished by an earlier version (no lease, no change for
``lease_s``): it marks them ``failed`` ("its worker stopped") and hands their files to
``on_reaped``, which removes those no document holds. A job is never run twice: only the worker
holding the lease runs it, it moves the job from ``queued`` to ``running`` only while the job is
still queued (one conditional UPDATE), and no update changes a job once it has ended, so a
worker that was only slow cannot overwrite the ``failed`` of a reaper. Leases compare wall-clock
times: servers sharing a PostgreSQL registry need clocks within a few seconds of each other.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Float, Integer, MetaData, String, Text, delete, select, update
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from mx_rag.errors import KnowledgeNotFound
from mx_rag.knowledge.store import create_tables

__all__ = ["ACTIVE", "IngestJob", "JobStore"]

logger = logging.getLogger(__name__)

ACTIVE = ("queued", "running", "building graph")
REAPED = "its worker stopped before the job ended (killed, or the machine lost power); upload the files again"


class _Base(DeclarativeBase):
    metadata = MetaData()


class _JobRow(_Base):
    __tablename__ = "ingest_jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64), index=True)
    knowledge_name: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # queued, running, building graph, done, failed
    total: Mapped[int] = mapped_column(Integer)
    processed: Mapped[int] = mapped_column(Integer, default=0)
    results: Mapped[str] = mapped_column(Text, default="{}")  # file name -> stored | unchanged | failed: why
    error: Mapped[str] = mapped_column(Text, default="")
    created: Mapped[float] = mapped_column()
    updated: Mapped[float] = mapped_column()


class _LeaseRow(_Base):
    __tablename__ = "ingest_job_leases"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(32), index=True)
    expires: Mapped[float] = mapped_column(Float)
    files: Mapped[str] = mapped_column(Text, default="[]")  # the job's uploaded files (JSON list of paths)


@dataclass(frozen=True)
class IngestJob:
    """An upload's background ingestion, as ``GET /v1/knowledge-bases/{kb}/jobs/{id}`` shows it."""

    id: str
    knowledge_base: str
    status: str
    total: int
    processed: int
    results: dict[str, str]
    error: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "knowledge_base": self.knowledge_base, "status": self.status, "total": self.total,
                "processed": self.processed, "results": self.results, "error": self.error}


Reaped = Callable[[str, str, list[Path]], None]  # user id, knowledge base, files of a reaped job


class JobStore:
    """The jobs in ``engine``'s database; this object is one worker, holding the leases of the
    jobs it accepted (see the module docstring).

    Args:
        engine: the registry database.
        lease_s: how long a lease lasts without a heartbeat (a dead worker's jobs fail after
            about this long).
        on_reaped: called with the user, knowledge base and files of each job this worker reaps.
        on_beat: called on every beat, after reaping (the service sweeps stale temporary files).
    """

    def __init__(self, engine: Engine, *, lease_s: float, on_reaped: Reaped,
                 on_beat: Callable[[], None] | None = None) -> None:
        self._engine = engine
        self.lease_s = lease_s
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:24]}"  # the process id tells an operator which worker
        self._on_reaped = on_reaped
        self._on_beat = on_beat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        create_tables(_Base.metadata, engine, "the ingest_jobs tables")

    # -- jobs ------------------------------------------------------------------------------------

    def create(self, user_id: str, knowledge_name: str, files: list[Path]) -> str:
        """A new ``queued`` job over ``files``, leased to this worker; returns its id."""
        self.start()
        now, job_id = time.time(), uuid.uuid4().hex
        with self._session() as session:
            session.add(_JobRow(id=job_id, user_id=user_id, knowledge_name=knowledge_name, status="queued",
                                total=len(files), processed=0, results="{}", error="", created=now, updated=now))
            session.add(_LeaseRow(job_id=job_id, owner=self.owner, expires=now + self.lease_s,
                                  files=json.dumps([str(f) for f in files])))
        return job_id

    def claim(self, job_id: str) -> bool:
        """Move a queued job this worker leases to ``running``; False if it is not ours to run
        (it was reaped meanwhile)."""
        with self._session() as session:
            held = session.execute(update(_LeaseRow).where(_LeaseRow.job_id == job_id, _LeaseRow.owner == self.owner)
                                   .values(expires=time.time() + self.lease_s))
            if not held.rowcount:  # type: ignore[attr-defined]
                return False
            done = session.execute(update(_JobRow).where(_JobRow.id == job_id, _JobRow.status == "queued")
                                   .values(status="running", updated=time.time()))
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def update(self, job_id: str, **values: Any) -> bool:
        """Change a job that has not ended (False if it has: done, or failed by a reaper); a
        final ``status`` releases its lease."""
        with self._session() as session:
            done = session.execute(update(_JobRow).where(_JobRow.id == job_id, _JobRow.status.in_(ACTIVE))
                                   .values(**values, updated=time.time()))
            if values.get("status") in ("done", "failed"):
                session.execute(delete(_LeaseRow).where(_LeaseRow.job_id == job_id))
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def get(self, user_id: str, knowledge_name: str, job_id: str) -> IngestJob:
        """The job (KnowledgeError when the user's knowledge base has no such job)."""
        with self._session() as session:
            row = session.get(_JobRow, job_id)
            if row is None or row.user_id != user_id or row.knowledge_name != knowledge_name:
                raise KnowledgeNotFound(f"knowledge base {knowledge_name!r} has no job {job_id!r}")
            return IngestJob(row.id, row.knowledge_name, row.status, row.total, row.processed,
                             json.loads(row.results), row.error)

    def active_files(self, *, but: str | None = None) -> set[str]:
        """The files of the jobs (other than ``but``) that still hold a lease: not to be removed."""
        with self._session() as session:
            rows = session.scalars(select(_LeaseRow.files).where(_LeaseRow.job_id != (but or "")))
            return {f for files in rows for f in json.loads(files)}

    # -- leases ----------------------------------------------------------------------------------

    def heartbeat(self) -> None:
        """Renew the leases of this worker's jobs."""
        with self._session() as session:
            session.execute(update(_LeaseRow).where(_LeaseRow.owner == self.owner)
                            .values(expires=time.time() + self.lease_s))

    def reap(self) -> list[str]:
        """Fail the unfinished jobs whose lease ran out (or that have none and did not change for
        ``lease_s``), hand their files to ``on_reaped``; returns their ids."""
        now = time.time()
        with self._session() as session:
            rows = session.execute(
                select(_JobRow.id, _JobRow.user_id, _JobRow.knowledge_name, _JobRow.updated, _LeaseRow.expires,
                       _LeaseRow.files, _LeaseRow.owner)
                .outerjoin(_LeaseRow, _LeaseRow.job_id == _JobRow.id)
                .where(_JobRow.status.in_(ACTIVE))
            ).all()
        reaped = []
        for job_id, user_id, name, updated, expires, files, owner in rows:
            if owner == self.owner or (expires if expires is not None else updated + self.lease_s) >= now:
                continue  # this worker's own jobs are alive as long as it is, however late its heartbeat
            with self._session() as session:  # one conditional UPDATE: of two reapers, one wins
                won = session.execute(update(_JobRow).where(_JobRow.id == job_id, _JobRow.status.in_(ACTIVE))
                                      .values(status="failed", error=REAPED, updated=now))
                session.execute(delete(_LeaseRow).where(_LeaseRow.job_id == job_id))
            if won.rowcount:  # type: ignore[attr-defined]
                logger.warning("upload job %s of %s/%s failed: its worker stopped", job_id, user_id, name)
                reaped.append(job_id)
                self._on_reaped(user_id, name, [Path(f) for f in json.loads(files or "[]")])
        return reaped

    def start(self) -> None:
        """Start the heartbeat and reaper thread (idempotent); it reaps once at once."""
        with self._thread_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="mx_rag-job-leases", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10)

    def _beat(self) -> None:
        while True:
            try:
                self.heartbeat()
                self.reap()
                if self._on_beat is not None:
                    self._on_beat()
            except Exception:  # a database hiccup: try again on the next beat
                logger.exception("renewing or reaping upload job leases failed")
            if self._stop.wait(self.lease_s / 3):
                return

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self._engine, expire_on_commit=False) as session, session.begin():
            yield session
