# SPDX-License-Identifier: Apache-2.0
"""Ingestion of a knowledge base on a Ray cluster (``mxrag ingest --ray``, ``[ingest] ray_address``).

The same planning, loaders, splitter, embedding model and stores as ``KnowledgeService.ingest``,
spread by a ``mx_rag.distributed.RayPool`` (``ray_pool``): every worker opens the stores of the settings
(``workspace``), which must be PostgreSQL (registry and chunks) and Milvus (vectors).

A graph knowledge base whose graph is in PostgreSQL (made with ``[graph] store = "postgres"``)
then gets its graph extended as ``KnowledgeService.ingest`` extends it: the chunks of this run's
committed documents, read back from the chunk store in their order, are staged in its
``GraphRAGPipeline`` and built with a ``mx_rag.distributed.RayExtractor``, so the extraction runs
on the cluster and the pipeline's own build (extractions cached by chunk, one journaled change
written into the graph, registry and vectors) keeps the three consistent. A graph in a networkx
file lives on one machine and is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mx_rag.app import workspace
from mx_rag.app.service import GRAPH_UPLOAD_BATCH, KnowledgeService
from mx_rag.app.settings import ServerSettings
from mx_rag.app.users import Principal
from mx_rag.errors import ParameterError
from mx_rag.knowledge.ingest import FileEvent, IngestReport
from mx_rag.knowledge.knowledge import KnowledgeDB
from mx_rag.knowledge.store import recorded_int8

__all__ = ["build_graph_on_ray", "check_ray_graph", "check_ray_settings", "ingest_on_ray", "ray_pool"]

EXTRACT_BATCH = 16  # chunks per extraction actor in one build batch


def ray_pool(service: KnowledgeService, *, address: str = "auto", options: Any = None) -> Any:
    """A ``RayPool`` (not started: ``with`` or ``start`` starts it) with the settings' loaders,
    embedding model and stores; ``options`` (a ``RayOptions``) default to ``[ingest]
    ray_embedders``, ``ray_embed_cpus`` and ``ray_batch_chunks``."""
    from mx_rag.distributed.ingest import RayOptions
    from mx_rag.distributed.pool import RayPool

    settings = service.settings
    dimension = service.embedding.dimension
    int8 = recorded_int8(service.embedding_model, service.registry.embedding_models())
    return RayPool(
        loader_factory=functools.partial(_loader, settings.upload.chunk_size, settings.upload.chunk_overlap),
        embedder_factory=functools.partial(_embedder, service.embedding_model, int8),
        stores_factory=functools.partial(_stores, settings, dimension), dimension=dimension, address=address,
        options=options or RayOptions(embedders=settings.ingest.ray_embedders,
                                      embed_cpus=settings.ingest.ray_embed_cpus,
                                      batch_chunks=settings.ingest.ray_batch_chunks),
    )


def check_ray_settings(settings: ServerSettings) -> None:
    """Refuse ``[ingest] ray_address`` without the stores every node reaches (ParameterError, one
    line): a server checks it when it starts, not at its first large upload."""
    stores = settings.stores
    missing = [key for key, value in (("registry_url", stores.registry_url), ("postgres_url", stores.postgres_url),
                                      ("milvus_url", stores.milvus_url)) if value is None]
    if settings.ingest.ray_address is not None and missing:
        raise ParameterError(f"[ingest] ray_address = {settings.ingest.ray_address!r} needs stores every node reaches, "
                             f"but [stores] {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
                             "set them (PostgreSQL and Milvus), or remove ray_address")


def check_ray_graph(service: KnowledgeService, who: Principal, name: str) -> None:
    """Refuse (ParameterError, one line) a graph knowledge base whose graph the cluster cannot
    build: one in a networkx file, or an LLM extractor the cluster's nodes cannot reach."""
    if not service.is_graph(who, name):
        return
    if not service.graph_in_postgres(who, name):
        raise ParameterError(f"knowledge base {name!r} keeps its graph in a networkx file on this machine, which --ray "
                             "cannot build: ingest it without --ray (graph knowledge bases made with [graph] store = "
                             "\"postgres\" keep it in PostgreSQL and build on the cluster)")
    if service.settings.graph.extractor == "llm" and service.settings.llm.url is None:
        raise ParameterError('[graph] extractor = "llm" on a Ray cluster needs [llm] url (every node calls it); it '
                             "is not set")


def ingest_on_ray(service: KnowledgeService, who: Principal, name: str, files: Sequence[str | Path], *,
                  address: str = "auto", white_paths: Sequence[str | Path] | None = None,
                  progress: Callable[[FileEvent], None] | None = None, options: Any = None,
                  pool: Any = None) -> IngestReport:
    """Ingest ``files`` into knowledge base ``name`` on the Ray cluster at ``address`` (``auto``:
    the cluster of this machine), exactly once (``mx_rag.distributed``), through ``pool`` (a
    ``RayPool`` of ``ray_pool``, kept warm by the caller) or a pool started for this call; then
    extend the graph of a graph knowledge base (the module docstring).

    Raises:
        ParameterError: the settings' stores are FAISS or SQLite (single-machine), or the graph
            is a networkx file (``check_ray_graph``).
        ExtraNotInstalledError: Ray is not installed (``mxrag[ray]``).
    """
    from mx_rag.distributed.ingest import check_scale_out_stores

    kb = service.open(who, name)
    check_scale_out_stores(kb)
    check_ray_graph(service, who, name)
    if white_paths is not None:
        kb = kb.allowing([str(p) for p in white_paths])
    if pool is not None:
        report = pool.ingest(kb, files, progress=progress)
        address = pool.address
    else:
        with ray_pool(service, address=address, options=options) as started:
            report = started.ingest(kb, files, progress=progress)
    if service.is_graph(who, name):
        build_graph_on_ray(service, who, name, kb, report, address)
    return report


def build_graph_on_ray(service: KnowledgeService, who: Principal, name: str, kb: KnowledgeDB,
                       report: IngestReport, address: str) -> int:
    """Extend the graph with the committed documents of ``report`` (added, replaced, and unchanged
    ones the graph lacks or holds in another version: a run killed before its graph was built),
    extracting on the cluster; returns the graph's node count."""
    from mx_rag.distributed.graph import RayExtractor

    pipeline = service.graph(who, name)
    given = {str(Path(f).resolve()) for f in report.added + report.replaced + report.unchanged}
    rows = [row for row in kb.get_all_documents() if row.document_file_path in given]
    ingest = service.settings.ingest
    batch = min(1024, EXTRACT_BATCH * ingest.ray_extractors)
    extractor = RayExtractor(_extractor_factory(service.settings), address=address, actors=ingest.ray_extractors,
                             cpus=ingest.ray_extract_cpus)  # started by its first extraction: none, none started
    try:
        for start in range(0, len(rows), GRAPH_UPLOAD_BATCH):
            for row in rows[start:start + GRAPH_UPLOAD_BATCH]:
                pipeline.add_chunks(row.document_file_path, _stored_chunks(service, kb, row))
            pipeline.build_graph(extractor=extractor, batch_size=batch)
    finally:
        extractor.close()
    return int(pipeline.graph.count_nodes())


def _stored_chunks(service: KnowledgeService, kb: KnowledgeDB, row: Any) -> list[Any]:
    """A committed document's chunks from the chunk store, in the order the splitter made them
    (the order of their ids ``chunk_id(..., index)``; a document ingested in-process has ids
    ascending in that order)."""
    from mx_rag.distributed.stages import chunk_id

    stored = service.chunks.search_by_document_id(row.document_id)
    index = {chunk_id(kb.knowledge_id, row.document_file_path, row.content_hash or "", i): i
             for i in range(len(stored))}
    if all(doc.chunk_id in index for doc in stored):
        stored.sort(key=lambda doc: index[doc.chunk_id])
    return [doc.to_langchain() for doc in stored]


def _extractor_factory(settings: ServerSettings) -> Callable[[], Any]:
    if settings.graph.extractor == "llm":
        return functools.partial(_llm_extractor, settings)
    from mx_rag.graphrag.offline_extractor import OfflineExtractor

    return OfflineExtractor


def _llm_extractor(settings: ServerSettings) -> Any:
    from mx_rag.app.llm import llm_client
    from mx_rag.graphrag.llm_extractor import LLMExtractor

    return LLMExtractor(llm_client(settings, str(settings.llm.url)))


def _loader(chunk_size: int, chunk_overlap: int) -> Any:
    from mx_rag.document import LoaderMng

    return LoaderMng.with_defaults(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def _embedder(model: str, int8: bool | None) -> Callable[[list[str]], Any]:
    from mx_rag.embedding.local import TextEmbedding

    return TextEmbedding(model, int8=int8).embed_documents


def _stores(settings: ServerSettings, dimension: int) -> tuple[Any, Any]:
    return workspace.chunk_store(settings), workspace.vector_store(settings, dimension)
