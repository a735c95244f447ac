# SPDX-License-Identifier: Apache-2.0
"""Scale-out ingestion on a Ray cluster (extra ``mxrag[ray]``), written exactly once into
PostgreSQL and Milvus: ``ray_ingest``, or a ``RayPool`` that keeps its actors between runs.
Importing this package imports no Ray."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.distributed.graph import RayExtractor
    from mx_rag.distributed.ingest import RayOptions, check_scale_out_stores
    from mx_rag.distributed.pool import RayPool, ray_ingest
    from mx_rag.distributed.stages import chunk_id

__all__ = ["RayExtractor", "RayOptions", "RayPool", "check_scale_out_stores", "chunk_id", "ray_ingest"]

__getattr__, __dir__ = lazy_package(globals())
