# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeService``: the knowledge bases one server (or one ``mxrag mcp``) serves.

All knowledge bases share one registry, one chunk store and one vector store in the data folder
(``sql.db`` and ``faiss.index``; PostgreSQL and Milvus by URL), as the seeds wire them; each
user reaches only the knowledge bases they belong to, and every retriever is scoped to one
knowledge base by construction (``KnowledgeDB.as_retriever``). Uploaded files are kept under
``<data>/uploads/<user>/<knowledge base>/`` and ingested by background jobs whose progress lives
in the registry database, so any worker can report a job another worker runs.

A knowledge base made with ``graph=True`` also keeps a knowledge graph (a ``GraphRAGPipeline`` in
``<data>/graphs/<user>/<knowledge base>/``), extended after every upload job and cut when a
document is deleted; its ``graph`` chain answers from it.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import Engine

from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.knowledge.ingest import ingest_files
from mx_rag.knowledge.knowledge import KnowledgeDB
from mx_rag.knowledge.retriever import KnowledgeRetriever
from mx_rag.knowledge.store import KnowledgeStore, choose_embedding, recorded_int8
from mx_rag.server import metrics
from mx_rag.server.jobs import IngestJob, JobStore
from mx_rag.server.keys import KeyStore, Principal
from mx_rag.server.settings import ServerSettings
from mx_rag.utils.common import MB

__all__ = ["KBNAME_PATTERN", "IngestJob", "KnowledgeService", "check_kb_name", "open_registry"]

logger = logging.getLogger(__name__)

KBNAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # no "/": a chat model is "<kb>" or "<kb>/<chain>"
_FILENAME = re.compile(r"^[^/\\\x00]{1,255}$")
GRAPH_UPLOAD_BATCH = 100  # files per GraphRAGPipeline.upload_files call (its limit)
PARTIAL_STALE_S = 60.0  # a temporary upload file untouched this long belongs to a dead worker
LOCAL_USER = "Default"  # the user of local mode (no API keys configured)


class KnowledgeService:
    """Knowledge bases, documents, uploads and retrievers for the users of one server.

    Args:
        settings: the server's settings (data folder, stores, embedding, upload limits).
        llm: the server's ``Text2TextLLM``; graph builds extract with it when ``[graph]
            extractor = "llm"`` (the default extractor needs no LLM).
    """

    def __init__(self, settings: ServerSettings, llm: Any = None) -> None:
        from mx_rag.document import LoaderMng
        from mx_rag.embedding.local import TextEmbedding

        self.settings = settings
        self.root = settings.data_dir.resolve()
        self.uploads = self.root / "uploads"
        self.uploads.mkdir(parents=True, exist_ok=True)
        self.graphs = self.root / "graphs"
        self.llm = llm
        self.registry = open_registry(settings)
        self._engine: Engine = self.registry.engine
        self.keys = KeyStore(self._engine)
        self.jobs = JobStore(self._engine, lease_s=settings.upload.job_lease_s, on_reaped=self._drop_orphans,
                             on_beat=self._sweep_partials)
        self._swept = 0.0
        recorded = self.registry.embedding_models()
        self.embedding_model = choose_embedding(settings.embedding.model, recorded)
        self.embedding = TextEmbedding(self.embedding_model, int8=recorded_int8(self.embedding_model, recorded))
        self.chunks = self._chunk_store()
        self.vectors = self._vector_store()
        self.loader = LoaderMng.with_defaults(
            chunk_size=settings.upload.chunk_size, chunk_overlap=settings.upload.chunk_overlap
        )
        self._open: dict[tuple[str, str], KnowledgeDB] = {}
        self._graphs: dict[tuple[str, str], Any] = {}
        self._open_lock = threading.Lock()
        self._reranker: Any = None
        self._jobs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mx_rag-ingest")

    # -- stores ----------------------------------------------------------------------------------

    def _chunk_store(self) -> Any:
        from mx_rag.storage.document_store import SQLiteDocstore

        url = self.settings.stores.postgres_url
        if url is None:
            return SQLiteDocstore(db_path=str(self.root / "sql.db"))
        from mx_rag.storage.document_store import PostgresDocstore

        return PostgresDocstore(url.get_secret_value())

    def _vector_store(self) -> Any:
        if self.settings.stores.milvus_url is None:
            from mx_rag.storage.vectorstore import MindFAISS

            return MindFAISS(x_dim=self.embedding.dimension, load_local_index=str(self.root / "faiss.index"))
        from pymilvus import MilvusClient

        from mx_rag.storage.vectorstore import MilvusDB

        stores = self.settings.stores
        token = "" if stores.milvus_token is None else stores.milvus_token.get_secret_value()
        client = MilvusClient(uri=stores.milvus_url, token=token)
        # no flush per write: a flush costs 1-2.5 s on a Milvus server, and new rows are searchable without one
        return MilvusDB.create(client=client, collection_name=stores.milvus_collection,
                               x_dim=self.embedding.dimension, metric_type="IP", auto_flush=False)

    def reranker(self) -> Any:
        """The local reranker of ``[chain] reranker``, loaded on first use; None when not set.

        Raises:
            MxRagError: the configured model cannot be loaded.
        """
        model = self.settings.chain.reranker
        if model is None:
            return None
        with self._open_lock:
            if self._reranker is None:
                from mx_rag.reranker.local import LocalReranker

                self._reranker = LocalReranker(model)
            return self._reranker

    def close(self) -> None:
        self._jobs.shutdown(wait=True, cancel_futures=False)
        self.jobs.stop()

    # -- knowledge bases -------------------------------------------------------------------------

    def create(self, who: Principal, name: str, *, graph: bool = False) -> dict[str, Any]:
        """Create a knowledge base owned by ``who`` (KnowledgeError if another user has that name);
        ``graph=True`` also keeps a knowledge graph of its documents."""
        check_kb_name(name)
        if graph:
            self._check_graph_extra()
        self.registry.add_knowledge(name, who.user_id, "admin")
        if graph:
            self._graph_dir(who, name).mkdir(parents=True, exist_ok=True)
        return self.describe(who, name)

    def names(self, who: Principal) -> list[str]:
        return [row.knowledge_name for row in self.registry.get_all_knowledge_info(who.user_id)]

    def open(self, who: Principal, name: str) -> KnowledgeDB:
        """The knowledge base ``name`` of ``who`` (KnowledgeError: no such knowledge base for them)."""
        check_kb_name(name)
        key = (who.user_id, name)
        kb = self._open.get(key)
        # one registry query, outside the lock: the knowledge base may have been deleted (and made
        # again, with a new id) through another worker since it was opened here
        if kb is not None and self.registry.get_knowledge_id(name, who.user_id) == kb.knowledge_id:
            return kb
        with self._open_lock:
            kb = KnowledgeDB(knowledge_store=self.registry, chunk_store=self.chunks, vector_store=self.vectors,
                             knowledge_name=name, white_paths=[str(self.uploads)], user_id=who.user_id)
            self.registry.check_embedding(name, who.user_id, self.embedding.embedding_id, self.embedding.dimension)
            self._open[key] = kb
            return kb

    def describe(self, who: Principal, name: str) -> dict[str, Any]:
        """A knowledge base's documents with their chunk counts and sizes."""
        kb = self.open(who, name)
        documents = []
        for row in kb.get_all_documents():
            path = Path(row.document_file_path)
            documents.append({
                "id": row.document_id,
                "name": row.document_name,
                "chunks": len(self.chunks.search_by_document_id(row.document_id)),
                "bytes": path.stat().st_size if path.exists() else None,
                "created": row.create_time.isoformat() if row.create_time else None,
            })
        return {"name": name, "documents": documents, "chunks": sum(d["chunks"] for d in documents),
                "graph": self.is_graph(who, name)}

    def require_admin(self, who: Principal, name: str) -> KnowledgeDB:
        """The knowledge base ``name`` if ``who`` has its admin role (KnowledgeError otherwise:
        no such knowledge base for them, or only a member's role)."""
        kb = self.open(who, name)
        if self.registry.get_all_usr_role_by_knowledge(name).get(who.user_id) != "admin":
            raise KnowledgeError(f"{who.user_id!r} is not an admin of knowledge base {name!r}: only its admins "
                                 "may change it")
        return kb

    def delete(self, who: Principal, name: str) -> None:
        """Delete a knowledge base with its documents and uploaded files (admins only)."""
        kb = self.require_admin(who, name)
        users = [Principal(user, admin=True) for user in self.registry.get_all_usr_role_by_knowledge(name)]
        kb.delete_all()
        for user in users:  # the uploads and graph of every member, kept under their own folders
            with self._open_lock:
                self._open.pop((user.user_id, name), None)
                self._graphs.pop((user.user_id, name), None)
            shutil.rmtree(self._folder(user, name), ignore_errors=True)
            shutil.rmtree(self._graph_dir(user, name), ignore_errors=True)

    def delete_document(self, who: Principal, name: str, document_id: int) -> None:
        """Delete one document; its file too when it is an upload kept under ``<data>/uploads``
        (a document ingested from the user's own folder, by ``mxrag ingest``, keeps its file)."""
        kb = self.open(who, name)
        row = next((r for r in kb.get_all_documents() if r.document_id == document_id), None)
        if row is None:
            raise KnowledgeError(f"knowledge base {name!r} has no document {document_id}")
        kb.delete_file(row.document_file_path)
        if self.is_graph(who, name):
            self.graph(who, name).delete_document(row.document_file_path)
        path = Path(row.document_file_path)
        if path.resolve().is_relative_to(self.uploads.resolve()):  # our copy of an upload; never a user's own file
            path.unlink(missing_ok=True)

    def retriever(self, who: Principal, name: str, k: int | None = None) -> KnowledgeRetriever:
        chain = self.settings.chain
        return self.open(who, name).as_retriever(self.embedding.embed_documents, k=k or chain.k,
                                                  score_threshold=chain.score_threshold)

    # -- knowledge graphs ------------------------------------------------------------------------

    def _graph_dir(self, who: Principal, name: str) -> Path:
        return self.graphs / who.user_id / name

    def _check_graph_extra(self) -> None:
        """Refuse a graph knowledge base before it is made when its graph could not be built:
        networkx, and spaCy with its English model for the offline extractor (extra ``graph``)."""
        from mx_rag.graphrag.offline_extractor import SPACY_MODEL
        from mx_rag.utils.lazy import check_extra

        offline = self.settings.graph.extractor != "llm"
        check_extra("graph", "networkx", *(("spacy", SPACY_MODEL) if offline else ()))

    def is_graph(self, who: Principal, name: str) -> bool:
        """Whether knowledge base ``name`` keeps a knowledge graph."""
        return self._graph_dir(who, name).is_dir()

    def graph(self, who: Principal, name: str) -> Any:
        """The ``GraphRAGPipeline`` of graph knowledge base ``name`` (KnowledgeError if it has none)."""
        self.open(who, name)
        if not self.is_graph(who, name):
            raise KnowledgeError(f"knowledge base {name!r} keeps no graph (create it with graph=True)")
        key = (who.user_id, name)
        with self._open_lock:
            if key not in self._graphs:
                from mx_rag.graphrag import GraphRAGPipeline

                use_llm = self.settings.graph.extractor == "llm"
                if use_llm and self.llm is None:
                    raise KnowledgeError('[graph] extractor = "llm" needs the server\'s LLM, and none is configured')
                self._graphs[key] = GraphRAGPipeline(self._graph_dir(who, name), self.llm if use_llm else None,
                                                     self.embedding, self.embedding.dimension,
                                                     rerank_model=self.reranker())
            return self._graphs[key]

    def build_graph(self, who: Principal, name: str, files: list[Path] | None = None) -> int:
        """Add ``files`` (default: every document of the knowledge base) to its graph and build
        what is new; returns the graph's node count. Unchanged documents cost nothing."""
        pipeline = self.graph(who, name)
        if files is None:
            files = [Path(row.document_file_path) for row in self.open(who, name).get_all_documents()]
        paths = files
        known = set(pipeline.documents())
        todo = [str(p.resolve()) for p in paths if p.exists() and str(p.resolve()) not in known]
        for start in range(0, len(todo), GRAPH_UPLOAD_BATCH):
            pipeline.upload_files(todo[start:start + GRAPH_UPLOAD_BATCH], self.loader)
        pipeline.build_graph()
        return int(pipeline.graph.count_nodes())

    # -- uploads ---------------------------------------------------------------------------------

    def _folder(self, who: Principal, name: str) -> Path:
        return self.uploads / who.user_id / name

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

    def start_ingest(self, who: Principal, name: str, staged: dict[str, Path]) -> IngestJob:
        """Move the staged uploads into place and ingest them in the background."""
        kb = self.open(who, name)
        folder = self._folder(who, name)
        files = []
        for base, partial in staged.items():
            final = folder / base
            partial.replace(final)
            files.append(final)
        job_id = self.jobs.create(who.user_id, name, files)
        self._jobs.submit(self._run_job, job_id, kb, files)
        return self.job(who, name, job_id)

    def _run_job(self, job_id: str, kb: KnowledgeDB, files: list[Path]) -> None:
        if not self.jobs.claim(job_id):  # reaped while it waited (this worker was stalled): not ours to run
            return
        results: dict[str, str] = {}
        try:
            for path in files:  # one file at a time, so progress can be seen and kept per file
                report = ingest_files(kb, [str(path)], self.loader, self.embedding.embed_documents, force=True)
                if report.failed:
                    why = report.reasons.get(str(path), "failed").replace(str(path.parent) + "/", "")
                    results[path.name] = f"failed: {why}"[:500]
                    self._drop_orphans(kb.user_id, kb.knowledge_name, [path], job_id)
                elif report.skipped:  # a scan and no OCR engine: the reason names the install
                    results[path.name] = 'skipped: a scan, and no OCR engine is installed: pip install "mxrag[ocr]"'
                    self._drop_orphans(kb.user_id, kb.knowledge_name, [path], job_id)
                elif report.unchanged:
                    results[path.name] = "unchanged"
                else:
                    results[path.name] = "stored"
                metrics.count_ingested(results[path.name].split(":")[0])
                self.jobs.update(job_id, processed=len(results), results=json.dumps(results))
            who = Principal(kb.user_id, admin=True)
            if self.is_graph(who, kb.knowledge_name):
                self.jobs.update(job_id, status="building graph")
                stored = [p for p in files if results.get(p.name) == "stored"]
                self.build_graph(who, kb.knowledge_name, stored)
            self.jobs.update(job_id, status="done")
        except Exception as exc:  # a job must end with a status, whatever went wrong
            logger.exception("ingestion job %s failed", job_id)
            self.jobs.update(job_id, status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
            self._drop_orphans(kb.user_id, kb.knowledge_name, files)

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

    # -- principals ------------------------------------------------------------------------------

    def local_principal(self) -> Principal:
        return Principal(LOCAL_USER, admin=True)


def open_registry(settings: ServerSettings) -> KnowledgeStore:
    """The registry of ``settings``: ``[stores] registry_url``, else ``sql.db`` in the data folder.
    The server's API keys and upload jobs live in the same database."""
    url = settings.stores.registry_url
    if url is not None:
        return KnowledgeStore(url=url.get_secret_value())
    root = settings.data_dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    return KnowledgeStore(db_path=str(root / "sql.db"))


def check_kb_name(name: Any) -> str:
    if not isinstance(name, str) or not re.fullmatch(KBNAME_PATTERN, name):
        raise ParameterError(
            f"knowledge base name {name!r} must be 1 to 64 characters from [A-Za-z0-9_.-], "
            "starting with a letter or digit"
        )
    return name


