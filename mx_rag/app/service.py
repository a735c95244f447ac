# SPDX-License-Identifier: Apache-2.0
"""``KnowledgeService``: the knowledge bases of one data folder, for ``mxrag``, ``mxrag serve`` and MCP.

All knowledge bases share one registry, one chunk store and one vector store (``workspace``
wires them from the settings); each user reaches only the knowledge bases they belong to, and
every retriever is scoped to one knowledge base by construction (``KnowledgeDB.as_retriever``).
``ingest`` is the one way files get in: the command line, the server's upload jobs, MCP and
``LocalKnowledge`` all go through ``mx_rag.knowledge.ingest.ingest_files`` with its batching.

A knowledge base made with ``graph=True`` also keeps a knowledge graph (a ``GraphRAGPipeline`` in
``<data>/graphs/<user>/<knowledge base>/``), extended with the chunks each ingestion stored and
cut when a document is deleted; its ``graph`` chain answers from it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mx_rag.app import workspace
from mx_rag.app.query_batch import QueryBatcher
from mx_rag.app.settings import ServerSettings
from mx_rag.app.users import LOCAL_USER, Principal
from mx_rag.errors import KnowledgeError, KnowledgeNotFound, ParameterError, PermissionDenied
from mx_rag.knowledge.ingest import FileEvent, IngestReport, ingest_files, prune_documents
from mx_rag.knowledge.knowledge import KnowledgeDB
from mx_rag.knowledge.retriever import KnowledgeRetriever
from mx_rag.knowledge.store import choose_embedding, recorded_int8

__all__ = ["KBNAME_PATTERN", "LOCAL_USER", "KnowledgeService", "check_kb_name"]

KBNAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # no "/": a chat model is "<kb>" or "<kb>/<chain>"
GRAPH_UPLOAD_BATCH = 100  # files per GraphRAGPipeline.upload_files call (its limit)
PG_GRAPH_MARK = "graph_store"  # in a graph folder: the graph is in PostgreSQL, not a networkx file


class KnowledgeService:
    """Knowledge bases, documents, ingestion, graphs and retrievers for the users of one data folder.

    Args:
        settings: the settings (data folder, stores, embedding, upload limits).
        llm: a ``Text2TextLLM``; graph builds extract with it when ``[graph] extractor = "llm"``
            (the default extractor needs no LLM).
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
        self.registry = workspace.open_registry(settings)
        recorded = self.registry.embedding_models()
        self.embedding_model = choose_embedding(settings.embedding.model, recorded)
        self.embedding = TextEmbedding(self.embedding_model, int8=recorded_int8(self.embedding_model, recorded))
        self.queries = QueryBatcher(self.embedding)  # the questions of concurrent requests, embedded together
        self.chunks = workspace.chunk_store(settings)
        self.vectors = workspace.vector_store(settings, self.embedding.dimension)
        self.loader = LoaderMng.with_defaults(
            chunk_size=settings.upload.chunk_size, chunk_overlap=settings.upload.chunk_overlap
        )
        self._open: dict[tuple[str, str], KnowledgeDB] = {}
        self._graphs: dict[tuple[str, str], Any] = {}
        self._open_lock = threading.Lock()
        self._reranker: Any = None

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
        """Release what the service holds (nothing here; the server's service stops its jobs)."""

    def local_principal(self) -> Principal:
        return Principal.local()

    # -- knowledge bases -------------------------------------------------------------------------

    def create(self, who: Principal, name: str, *, graph: bool = False) -> dict[str, Any]:
        """Create a knowledge base owned by ``who`` (KnowledgeError if another user has that name);
        ``graph=True`` also keeps a knowledge graph of its documents."""
        check_kb_name(name)
        if graph:
            self._check_graph_extra()
            if self.settings.graph.store == "postgres" and self.settings.stores.postgres_url is None:
                raise ParameterError('[graph] store = "postgres" needs [stores] postgres_url (the graph database)')
        self.registry.add_knowledge(name, who.user_id, "admin")
        if graph:
            self._graph_dir(who, name).mkdir(parents=True, exist_ok=True)
            if self.settings.graph.store == "postgres":  # recorded: a later change of the setting keeps it
                (self._graph_dir(who, name) / PG_GRAPH_MARK).write_text("postgres\n", encoding="utf-8")
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
            raise PermissionDenied(f"{who.user_id!r} is not an admin of knowledge base {name!r}: only its admins "
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
            if self.graph_in_postgres(user, name):
                self._pg_graph(user, name).clear()
            shutil.rmtree(self._folder(user, name), ignore_errors=True)
            shutil.rmtree(self._graph_dir(user, name), ignore_errors=True)

    def delete_document(self, who: Principal, name: str, document_id: int) -> None:
        """Delete one document; its file too when it is an upload kept under ``<data>/uploads``
        (a document ingested from the user's own folder, by ``mxrag ingest``, keeps its file)."""
        kb = self.open(who, name)
        row = next((r for r in kb.get_all_documents() if r.document_id == document_id), None)
        if row is None:
            raise KnowledgeNotFound(f"knowledge base {name!r} has no document {document_id}")
        kb.delete_file(row.document_file_path)
        if self.is_graph(who, name):
            self.graph(who, name).delete_document(row.document_file_path)
        path = Path(row.document_file_path)
        if path.resolve().is_relative_to(self.uploads.resolve()):  # our copy of an upload; never a user's own file
            path.unlink(missing_ok=True)

    def retriever(self, who: Principal, name: str, k: int | None = None) -> KnowledgeRetriever:
        chain = self.settings.chain
        return self.open(who, name).as_retriever(self.queries.embed_documents, k=k or chain.k,
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

    def graph_in_postgres(self, who: Principal, name: str) -> bool:
        """Whether graph knowledge base ``name`` keeps its graph in PostgreSQL (made with ``[graph]
        store = "postgres"``; its chunk registry and vectors stay in the data folder)."""
        return (self._graph_dir(who, name) / PG_GRAPH_MARK).is_file()

    def _pg_graph(self, who: Principal, name: str) -> Any:
        """The ``PostgresGraphStore`` of a graph kept in PostgreSQL (graph ``<user>/<knowledge
        base>``, on the chunk store's engine), else None (a networkx file)."""
        if not self.graph_in_postgres(who, name):
            return None
        if self.settings.stores.postgres_url is None:
            raise KnowledgeError(f"knowledge base {name!r} keeps its graph in PostgreSQL, but [stores] postgres_url "
                                 "is not set")
        from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

        return PostgresGraphStore(self.chunks.engine, f"{who.user_id}/{name}")

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
                                                     rerank_model=self.reranker(),
                                                     graph_store=self._pg_graph(who, name))
            return self._graphs[key]

    def build_graph(self, who: Principal, name: str, files: list[Path] | None = None) -> int:
        """Add ``files`` (default: every document of the knowledge base) that the graph lacks to it,
        parsing them, and build what is new; returns the graph's node count. Ingestion stages the
        chunks it stored instead (``ingest``): this is for a graph made after its documents."""
        pipeline = self.graph(who, name)
        if files is None:
            files = [Path(row.document_file_path) for row in self.open(who, name).get_all_documents()]
        known = set(pipeline.documents())
        todo = [str(p.resolve()) for p in files if p.exists() and str(p.resolve()) not in known]
        for start in range(0, len(todo), GRAPH_UPLOAD_BATCH):
            pipeline.upload_files(todo[start:start + GRAPH_UPLOAD_BATCH], self.loader)
        return _built(pipeline)

    # -- ingestion -------------------------------------------------------------------------------

    def ingest(self, who: Principal, name: str, files: Sequence[str | Path], *,
               progress: Callable[[FileEvent], None] | None = None, stop: Any = None,
               white_paths: Sequence[str | Path] | None = None, batch_chunks: int | None = None,
               on_graph: Callable[[int], None] | None = None) -> IngestReport:
        """Ingest ``files`` into knowledge base ``name``: new and changed files are parsed once,
        embedded and stored in batches across files (unchanged ones are skipped by content hash).
        A graph knowledge base stages the same chunks for its graph and builds it once at the end
        (not after a ``stop``; ``on_graph`` is told how many documents it adds first). ``progress``
        and ``stop`` as in ``ingest_files``; ``white_paths``: the folders the files may come from
        (default: this service's uploads).

        Raises:
            KnowledgeNotFound: ``who`` has no knowledge base ``name``.
        """
        kb = self.open(who, name)
        if white_paths is not None:
            kb = kb.allowing([str(p) for p in white_paths])
        graph = self.graph(who, name) if self.is_graph(who, name) else None
        report = IngestReport()
        given = [str(f) for f in files]
        step = kb.max_file_count
        options: dict[str, Any] = {} if batch_chunks is None else {"batch_chunks": batch_chunks}
        for start in range(0, len(given), step):
            part = ingest_files(kb, given[start:start + step], self.loader, self.embedding.embed_documents, force=True,
                                progress=progress, stop=stop, on_stored=None if graph is None else graph.add_chunks,
                                **options)
            _merge(report, part)
            if part.not_done or (stop is not None and stop.is_set()):
                report.not_done += given[start + step:]
                return report
        if graph is not None and graph.pending():
            if on_graph is not None:
                on_graph(len(graph.pending()))
            _built(graph)
        return report

    def prune(self, who: Principal, name: str, roots: Sequence[str | Path], keep: Sequence[str | Path]) -> list[str]:
        """Delete the documents under ``roots`` whose files are not in ``keep`` (``prune_documents``),
        from the graph too; returns their paths."""
        gone = prune_documents(self.open(who, name), roots, keep)
        if gone and self.is_graph(who, name):
            graph = self.graph(who, name)
            for path in gone:
                with contextlib.suppress(KnowledgeError):  # never built into the graph
                    graph.delete_document(path)
        return gone

    def _folder(self, who: Principal, name: str) -> Path:
        return self.uploads / who.user_id / name


def _built(pipeline: Any) -> int:
    """Build what is staged in ``pipeline`` (nothing staged: nothing to do); its node count."""
    if pipeline.pending():
        pipeline.build_graph()
    return int(pipeline.graph.count_nodes())


def _merge(report: IngestReport, part: IngestReport) -> None:
    for name in ("added", "replaced", "unchanged", "failed", "not_done"):
        getattr(report, name).extend(getattr(part, name))
    for name in ("reasons", "chunks", "skipped", "ocr_pages"):
        getattr(report, name).update(getattr(part, name))


def check_kb_name(name: Any) -> str:
    if not isinstance(name, str) or not re.fullmatch(KBNAME_PATTERN, name):
        raise ParameterError(
            f"knowledge base name {name!r} must be 1 to 64 characters from [A-Za-z0-9_.-], "
            "starting with a letter or digit"
        )
    return name
