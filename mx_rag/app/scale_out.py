# SPDX-License-Identifier: Apache-2.0
"""Ingestion of a knowledge base on a Ray cluster (``mxrag ingest --ray``, ``[ingest] ray_address``).

The same planning, loaders, splitter, embedding model and stores as ``KnowledgeService.ingest``,
spread by a ``mx_rag.distributed.RayPool`` (``ray_pool``): every worker opens the stores of the settings
(``workspace``), which must be PostgreSQL (registry and chunks) and Milvus (vectors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mx_rag.app import workspace
from mx_rag.app.service import KnowledgeService
from mx_rag.app.settings import ServerSettings
from mx_rag.app.users import Principal
from mx_rag.errors import KnowledgeError
from mx_rag.knowledge.ingest import FileEvent, IngestReport
from mx_rag.knowledge.store import recorded_int8

__all__ = ["ingest_on_ray", "ray_pool"]


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


def ingest_on_ray(service: KnowledgeService, who: Principal, name: str, files: Sequence[str | Path], *,
                  address: str = "auto", white_paths: Sequence[str | Path] | None = None,
                  progress: Callable[[FileEvent], None] | None = None, options: Any = None,
                  pool: Any = None) -> IngestReport:
    """Ingest ``files`` into knowledge base ``name`` on the Ray cluster at ``address`` (``auto``:
    the cluster of this machine), exactly once (``mx_rag.distributed``), through ``pool`` (a
    ``RayPool`` of ``ray_pool``, kept warm by the caller) or a pool started for this call.

    Raises:
        ParameterError: the settings' stores are FAISS or SQLite (single-machine).
        KnowledgeError: a graph knowledge base (its graph is built in-process: ingest without --ray).
        ExtraNotInstalledError: Ray is not installed (``mxrag[ray]``).
    """
    from mx_rag.distributed.ingest import check_scale_out_stores

    kb = service.open(who, name)
    check_scale_out_stores(kb)
    if service.is_graph(who, name):
        raise KnowledgeError(f"knowledge base {name!r} keeps a graph, which --ray does not build: ingest it without "
                             "--ray")
    if white_paths is not None:
        kb = kb.allowing([str(p) for p in white_paths])
    if pool is not None:
        return pool.ingest(kb, files, progress=progress)
    with ray_pool(service, address=address, options=options) as started:
        return started.ingest(kb, files, progress=progress)


def _loader(chunk_size: int, chunk_overlap: int) -> Any:
    from mx_rag.document import LoaderMng

    return LoaderMng.with_defaults(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def _embedder(model: str, int8: bool | None) -> Callable[[list[str]], Any]:
    from mx_rag.embedding.local import TextEmbedding

    return TextEmbedding(model, int8=int8).embed_documents


def _stores(settings: ServerSettings, dimension: int) -> tuple[Any, Any]:
    return workspace.chunk_store(settings), workspace.vector_store(settings, dimension)
