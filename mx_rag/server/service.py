# SPDX-License-Identifier: Apache-2.0
"""The server's ``KnowledgeService``: the application's (``mx_rag.app.service``) with API keys,
uploads and background ingestion jobs.

Uploaded files are kept under ``<data>/uploads/<user>/<knowledge base>/`` and ingested by jobs
whose progress lives in the registry database, so any worker can report a job another worker
runs. A job ingests all its files in one ``ingest`` call (batched across files, as ``mxrag
ingest`` does), with its progress kept per file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from mx_rag.app import service as app_service
from mx_rag.app.keys import KeyStore, Principal
from mx_rag.app.scale_out import check_ray_graph, check_ray_settings, ingest_on_ray, ray_pool
from mx_rag.app.service import KBNAME_PATTERN, LOCAL_USER, check_kb_name
from mx_rag.app.settings import ServerSettings
from mx_rag.app.workspace import open_registry
from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.knowledge.ingest import FileEvent
from mx_rag.server import metrics
from mx_rag.server.jobs import IngestJob, JobStore
from mx_rag.utils.common import MB

__all__ = ["KBNAME_PATTERN", "LOCAL_USER", "IngestJob", "KnowledgeService", "check_kb_name", "open_registry"]

logger = logging.getLogger(__name__)

_FILENAME = re.compile(r"^[^/\\\x00]{1,255}$")
PARTIAL_STALE_S = 60.0  # a temporary upload file untouched this long belongs to a dead worker
_OCR_SKIPPED = 'skipped: a scan, and no OCR engine is installed: pip install "mxrag[ocr]"'


class KnowledgeService(app_service.KnowledgeService):
    """The application's service with the server's API keys, uploads and ingestion jobs."""

    def __init__(self, settings: ServerSettings, llm: Any = None) -> None:
        check_ray_settings(settings)
        super().__init__(settings, llm)
        engine = self.registry.engine
        self.keys = KeyStore(engine)
        self.jobs = JobStore(engine, lease_s=settings.upload.job_lease_s, on_reaped=self._drop_orphans,
                             on_beat=self._sweep_partials)
        self._swept = 0.0
        self._jobs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mx_rag-ingest")
        self._pool: Any = None  # a RayPool, once a job ran on the cluster (`_warm_pool`)

    def close(self) -> None:
        self._jobs.shutdown(wait=True, cancel_futures=False)
        self._close_pool()
        self.jobs.stop()

    # -- uploads ---------------------------------------------------------------------------------

    def check_upload_name(self, filename: str) -> str:
        """The base name of an uploaded file, if its type has a loader (ParameterError otherwise)."""
        base = filename if isinstance(filename, str) else ""  # a path part ("../x.txt", "a\\b.txt"): refused below
        if not _FILENAME.fullmatch(base) or base in (".", "..") or len(base.encode("utf-8", "replace")) > 255:
            raise ParameterError(f"file name {filename!r} is not a plain file name of 1 to 255 bytes (UTF-8)")
        suffix = Path(base).suffix.lower()
        if suffix not in {s.lower() for s in self.loader.loaders}:
            allowed = ", ".join(sorted({s.lower() for s in self.loader.loaders}))
            raise ParameterError(f"file type {suffix or '(none)'!r} of {base!r} is not supported; allowed: {allowed}")
        return base

    def save_upload(self, who: Principal, name: str, filename: str, stream: BinaryIO) -> Path:
        """Copy one uploaded file to a temporary name beside its final place, within the size
        limit (ParameterError over it; nothing is kept)."""
        self.open(who, name)
        base = self.check_upload_name(filename)
        folder = self._folder(who, name)
        folder.mkdir(parents=True, exist_ok=True)
        limit = self.settings.upload.max_file_mb * MB
        partial = folder / f".{uuid.uuid4().hex}.part"  # short: any allowed name fits beside it
        size = 0
        try:
            with partial.open("wb") as out:
                while block := stream.read(1 << 20):
                    size += len(block)
                    if size > limit:
                        limit_mb = self.settings.upload.max_file_mb
                        raise ParameterError(f"file {base!r} is over the upload limit of {limit_mb} MiB")
                    out.write(block)
            if size == 0:
                raise ParameterError(f"file {base!r} is empty")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return partial

    # -- jobs ------------------------------------------------------------------------------------

    def start_ingest(self, who: Principal, name: str, staged: dict[str, Path]) -> IngestJob:
        """Move the staged uploads into place and ingest them in the background."""
        self.open(who, name)
        folder = self._folder(who, name)
        files = []
        for base, partial in staged.items():
            final = folder / base
            partial.replace(final)
            files.append(final)
        job_id = self.jobs.create(who.user_id, name, files)
        self._jobs.submit(self._run_job, job_id, Principal(who.user_id, admin=True), name, files)
        return self.job(who, name, job_id)

    def _run_job(self, job_id: str, who: Principal, name: str, files: list[Path]) -> None:
        if not self.jobs.claim(job_id):  # reaped while it waited (this worker was stalled): not ours to run
            return
        results: dict[str, str] = {}
        graph = self.is_graph(who, name)

        def progress(event: FileEvent) -> None:  # kept per file, so progress can be seen
            path = Path(event.path)
            if event.status == "failed":
                why = (event.reason or "failed").replace(str(path.parent) + "/", "")
                results[path.name] = f"failed: {why}"[:500]
            elif event.status == "skipped":  # a scan and no OCR engine: the reason names the install
                results[path.name] = _OCR_SKIPPED
            else:
                results[path.name] = "unchanged" if event.status == "unchanged" else "stored"
            if event.status in ("failed", "skipped"):
                self._drop_orphans(who.user_id, name, [path], job_id)
            metrics.count_ingested(results[path.name].split(":")[0])
            self.jobs.update(job_id, processed=len(results), results=json.dumps(results))
            if graph and len(results) == len(files):  # the graph is built at the end of the one ingest call
                self.jobs.update(job_id, status="building graph")

        try:
            self._ingest_job(who, name, files, progress)
            self.jobs.update(job_id, status="done")
        except Exception as exc:  # a job must end with a status, whatever went wrong
            logger.exception("ingestion job %s failed", job_id)
            self.jobs.update(job_id, status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
            self._drop_orphans(who.user_id, name, files)

    def _ingest_job(self, who: Principal, name: str, files: list[Path], progress: Callable[[FileEvent], None]) -> None:
        """Ingest a job's files in this process, or, with ``[ingest] ray_address``, a job of at least
        ``ray_min_files`` files on the cluster through this worker's warm ``RayPool``, which sends each
        file's bytes with its load task (the uploads are on this machine's disk only). A graph kept
        in a networkx file is built here (``check_ray_graph``)."""
        ingest = self.settings.ingest
        if ingest.ray_address is not None and len(files) >= ingest.ray_min_files:
            try:
                check_ray_graph(self, who, name)
            except ParameterError as exc:
                logger.info("upload job of %s runs in this process: %s", name, exc)
            else:
                try:
                    ingest_on_ray(self, who, name, files, progress=progress, pool=self._warm_pool())
                except BaseException:
                    self._close_pool()  # a lost cluster: the next job connects again
                    raise
                return
        self.ingest(who, name, files, progress=progress)

    def _warm_pool(self) -> Any:
        """This worker's ``RayPool`` on ``[ingest] ray_address``, started by the first job that needs
        it and kept until ``close``."""
        if self._pool is None:
            from mx_rag.distributed import RayOptions

            ingest = self.settings.ingest
            options = RayOptions(embedders=ingest.ray_embedders, embed_cpus=ingest.ray_embed_cpus,
                                 batch_chunks=ingest.ray_batch_chunks, send_files=True)
            pool = ray_pool(self, address=str(ingest.ray_address), options=options)
            pool.start()
            self._pool = pool
        return self._pool

    def _close_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):  # its cluster may be gone
                pool.close()

    def _drop_orphans(self, user_id: str, name: str, files: list[Path], job_id: str | None = None) -> None:
        """Remove the uploaded ``files`` that no document holds and no running job (but
        ``job_id``) will ingest."""
        try:
            held = {row.document_file_path for row in self.registry.get_all_documents(name, user_id)}
        except KnowledgeError:  # the knowledge base is gone (deleted with its folder)
            held = set()
        held |= self.jobs.active_files(but=job_id)
        uploads = self.uploads.resolve()
        for path in files:
            if str(path) not in held and path.resolve().is_relative_to(uploads):
                path.unlink(missing_ok=True)

    def _sweep_partials(self) -> None:
        """Remove the temporary files of uploads whose worker died while saving them (at most once
        a minute: a live upload's temporary file is written without pause, from the spooled form)."""
        now = time.time()
        if now - self._swept < PARTIAL_STALE_S:
            return
        self._swept = now
        for partial in self.uploads.glob("*/*/.*.part"):
            try:
                if now - partial.stat().st_mtime > PARTIAL_STALE_S:
                    partial.unlink(missing_ok=True)
            except OSError:  # gone meanwhile
                continue

    def job(self, who: Principal, name: str, job_id: str) -> IngestJob:
        return self.jobs.get(who.user_id, name, job_id)
