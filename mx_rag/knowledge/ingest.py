# SPDX-License-Identifier: Apache-2.0
"""The ingestion pipeline behind ``upload_files``.

Files are parsed and split in worker threads while the main thread embeds and stores what is
ready, so parsing overlaps embedding. Chunks of several small files are embedded in one call
and stored in one vector-store write. A file whose content hash is unchanged is not parsed or
embedded again. Every file still succeeds or fails on its own.

``progress`` is told what became of each file as soon as it is known (the command line draws its
progress from it), and a ``stop`` event ends the run between batches: what was stored stays stored,
the files not reached are listed in ``IngestReport.not_done``. ``prune_documents`` removes the
documents of a folder whose files are gone (the command's ``--prune``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from langchain_core.documents import Document

from mx_rag.errors import DocumentError, KnowledgeError, MxRagError, OcrUnavailableError
from mx_rag.knowledge.knowledge import KnowledgeDB, PreparedFile, check_embeddings, run_embedders
from mx_rag.utils.checks import fail
from mx_rag.utils.common import MAX_FILE_SIZE
from mx_rag.utils.file_check import check_file
from mx_rag.utils.tracing import stage

__all__ = ["FileEvent", "FileJob", "IngestReport", "ingest_files", "plan_files", "prune_documents"]

logger = logging.getLogger(__name__)

BATCH_CHUNKS = 256  # chunks embedded per call and stored per vector-store write
PREFETCH = 4  # files parsed ahead of the embedder


class FileHandlerError(KnowledgeError):
    """A file cannot be uploaded (duplicate without ``force``, too many files)."""


@dataclass
class IngestReport:
    """What ``ingest_files`` did with each file (paths as given)."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # failed file -> why
    chunks: dict[str, int] = field(default_factory=dict)  # added or replaced file -> its chunk count
    not_done: list[str] = field(default_factory=list)  # files a ``stop`` left untouched
    skipped: dict[str, str] = field(default_factory=dict)  # scans not read (no OCR engine) -> why
    ocr_pages: dict[str, int] = field(default_factory=dict)  # stored file -> pages it had read by OCR

    @property
    def interrupted(self) -> bool:
        """Whether a ``stop`` ended the run before every file was handled."""
        return bool(self.not_done)


@dataclass(frozen=True)
class FileEvent:
    """What became of one file: ``status`` is added, replaced, unchanged or failed."""

    path: str
    status: str  # or "skipped": a scan and no OCR engine (the reason names the install)
    chunks: int = 0
    reason: str = ""
    ocr_pages: int = 0  # pages (and images) read by OCR


class _Stop(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class FileJob:
    """One file to ingest: the path as given, resolved, its content hash, and whether it replaces a stored version."""

    given: str
    path: Path
    digest: str
    replaces: bool


def file_digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def ingest_files(
    knowledge: KnowledgeDB,
    files: Sequence[str | Path],
    loader_mng: Any,
    embed_func: Callable[[list[str]], Any] | dict[str, Any],
    force: bool = False,
    *,
    batch_chunks: int = BATCH_CHUNKS,
    parse_workers: int = 2,
    progress: Callable[[FileEvent], None] | None = None,
    stop: _Stop | None = None,
    on_stored: Callable[[Path, list[Document]], None] | None = None,
) -> IngestReport:
    """Load, split, embed and store ``files`` (see ``upload_files``); report per file.

    Args:
        progress: called with a ``FileEvent`` for each file once its fate is known (unchanged
            files first, then each batch as it is stored).
        stop: an event (``threading.Event``); once set, the files parsed so far are stored and
            the rest are left in ``IngestReport.not_done``.
        on_stored: called with each stored file's resolved path and its chunks (a graph stages
            them: ``GraphRAGPipeline.add_chunks``), so nothing is parsed twice.
    """
    report = IngestReport()
    tell = _Teller(report, progress, on_stored)
    jobs = plan_files(knowledge, files, force, report)
    for given in report.unchanged:
        tell(FileEvent(given, "unchanged"))
    batch: list[tuple[FileJob, list[Document]]] = []
    for handled, (job, outcome) in enumerate(_parsed(jobs, loader_mng, parse_workers), start=1):
        if isinstance(outcome, OcrUnavailableError):
            tell.skipped(job.given, str(outcome))
        elif isinstance(outcome, Exception):
            logger.warning("cannot load %s: %s", job.path.name, outcome)
            tell.failed(job.given, str(outcome))
        else:
            batch.append((job, outcome))
        if batch and (sum(len(docs) for _, docs in batch) >= batch_chunks or _stopped(stop)):
            _store(knowledge, batch, embed_func, tell)
            batch = []
        if _stopped(stop):
            report.not_done = [job.given for job in jobs[handled:]]
            break
    if batch:
        _store(knowledge, batch, embed_func, tell)
    return report


def _stopped(stop: _Stop | None) -> bool:
    return stop is not None and stop.is_set()


class _Teller:
    """Records each file's outcome in the report and passes it to ``progress``."""

    def __init__(self, report: IngestReport, progress: Callable[[FileEvent], None] | None,
                 on_stored: Callable[[Path, list[Document]], None] | None = None) -> None:
        self.report, self.progress, self.on_stored = report, progress, on_stored

    def __call__(self, event: FileEvent) -> None:
        if self.progress is not None:
            self.progress(event)

    def failed(self, given: str, reason: str) -> None:
        self.report.failed.append(given)
        self.report.reasons[given] = reason or "failed"
        self(FileEvent(given, "failed", reason=reason or "failed"))

    def skipped(self, given: str, reason: str) -> None:
        self.report.skipped[given] = reason
        self(FileEvent(given, "skipped", reason=reason))

    def stored(self, job: FileJob, docs: list[Document]) -> None:
        if self.on_stored is not None:
            self.on_stored(job.path, docs)
        (self.report.replaced if job.replaces else self.report.added).append(job.given)
        self.report.chunks[job.given] = len(docs)
        ocr = len({(d.metadata.get("page"), d.metadata.get("image")) for d in docs if d.metadata.get("ocr")})
        if ocr:
            self.report.ocr_pages[job.given] = ocr
        self(FileEvent(job.given, "replaced" if job.replaces else "added", chunks=len(docs), ocr_pages=ocr))


def plan_files(knowledge: KnowledgeDB, files: Any, force: bool, report: IngestReport) -> list[FileJob]:
    """Check every path before anything is stored; sort files into new, changed and unchanged."""
    if not isinstance(files, (list, tuple)) or not all(isinstance(f, (str, Path)) for f in files):
        raise fail("files", files, "a list of file paths")
    if len(files) > knowledge.max_file_count:
        raise FileHandlerError(f"{len(files)} files exceed max_file_count={knowledge.max_file_count}")
    paths = [knowledge.check_file_path(check_file(f"files[{i}]", f, MAX_FILE_SIZE)) for i, f in enumerate(files)]
    if len(set(paths)) != len(paths):
        raise FileHandlerError("files lists the same file twice")
    stored = {row.document_file_path: row.content_hash for row in knowledge.get_all_documents()}
    duplicates = [str(p) for p in paths if str(p) in stored]
    if duplicates and not force:
        raise FileHandlerError(f"already in the knowledge base (pass force=True to replace): {duplicates}")
    jobs = []
    for given, path in zip(files, paths, strict=True):
        digest = file_digest(path)
        if stored.get(str(path)) == digest:
            report.unchanged.append(str(given))
        else:
            jobs.append(FileJob(str(given), path, digest, replaces=str(path) in stored))
    return jobs


def _parsed(jobs: list[FileJob], loader_mng: Any, workers: int) -> Iterator[tuple[FileJob, list[Document] | Exception]]:
    """Each job with its chunks (or the error), in order, parsed ``PREFETCH`` files ahead."""

    def load(job: FileJob) -> list[Document]:
        docs = [d for d in loader_mng.load_and_split(str(job.path)) if d.page_content.strip()]
        if not docs:
            raise DocumentError(f"{job.path.name}: no text could be extracted")
        return docs

    pending: deque[tuple[FileJob, Future[list[Document]]]] = deque()
    queue = iter(jobs)
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="mx_rag-parse")
    try:
        for job in queue:
            pending.append((job, pool.submit(load, job)))
            if len(pending) >= PREFETCH:
                break
        while pending:
            job, future = pending.popleft()
            following = next(queue, None)
            if following is not None:
                pending.append((following, pool.submit(load, following)))
            try:
                result = future.result()
            except (MxRagError, OSError) as exc:
                yield job, exc
            else:
                yield job, result
    finally:  # a stopped run (or an error) does not wait for the files parsed ahead
        pool.shutdown(wait=True, cancel_futures=True)


def _store(knowledge: KnowledgeDB, batch: list[tuple[FileJob, list[Document]]], embed_func: Any, tell: _Teller) -> None:
    """Embed a batch in one call and store it in one write; isolate failing files if that fails.

    A malformed result of ``embed_func`` is an argument error and raises; an embedder or store
    failure fails its files, as in the original.
    """
    texts = [d.page_content for _, docs in batch for d in docs]
    try:
        with stage("embed", chunks=len(texts)):
            raw = run_embedders(embed_func, texts)
    except Exception as exc:
        _store_failed(knowledge, batch, embed_func, tell, exc)
        return
    dense, sparse = check_embeddings(raw, len(texts))  # malformed: raises for every file
    try:
        prepared, start = [], 0
        for job, docs in batch:
            end = start + len(docs)
            prepared.append(
                PreparedFile(
                    path=job.path,
                    texts=texts[start:end],
                    metadatas=[dict(d.metadata) for d in docs],
                    dense=None if dense is None else dense[start:end],
                    sparse=None if sparse is None else sparse[start:end],
                    content_hash=job.digest,
                    replace=job.replaces,
                )
            )
            start = end
        knowledge.add_prepared(prepared)  # a replaced document stays until its new version is in
    except Exception as exc:
        _store_failed(knowledge, batch, embed_func, tell, exc)
        return
    for job, docs in batch:
        tell.stored(job, docs)


def _store_failed(
    knowledge: KnowledgeDB,
    batch: list[tuple[FileJob, list[Document]]],
    embed_func: Any,
    tell: _Teller,
    exc: Exception,
) -> None:
    if len(batch) == 1:
        logger.warning("cannot store %s: %s", batch[0][0].path.name, exc)
        tell.failed(batch[0][0].given, f"cannot store it: {exc}")
        return
    logger.info("a batch of %d files failed (%s); storing them one by one", len(batch), exc)
    for item in batch:
        _store(knowledge, [item], embed_func, tell)


def prune_documents(knowledge: KnowledgeDB, roots: Sequence[str | Path], keep: Sequence[str | Path]) -> list[str]:
    """Delete the documents whose file lies under one of ``roots`` (folders, or files named
    themselves) and is not in ``keep``; return their paths, sorted. Documents elsewhere stay.

    This is an incremental sync's cleanup: ``roots`` are the folders just walked, ``keep`` the
    files found there (stored, unchanged or failed alike: a file still present is never pruned).
    """
    under = [Path(r).expanduser().resolve() for r in roots]
    kept = {str(Path(k).expanduser().resolve()) for k in keep}
    gone = sorted(
        row.document_file_path
        for row in knowledge.get_all_documents()
        if row.document_file_path not in kept
        and any(Path(row.document_file_path) == r or Path(row.document_file_path).is_relative_to(r) for r in under)
    )
    for path in gone:
        knowledge.delete_file(path)
    return gone
