# SPDX-License-Identifier: Apache-2.0
"""The vector-store conformance suite (``mx_rag.testing.vector_store``) on every backend: MindFAISS
(FLAT IP/L2, COSINE, HNSW, IVF), MilvusDB on milvus-lite and OpenGaussDB (HNSW) on PostgreSQL with
pgvector (``make_store`` and ``backend`` come from conftest.py)."""

from __future__ import annotations

import pytest

from mx_rag.testing.vector_store import VectorStoreConformance

from .conftest import FAISS_BACKENDS


class TestVectorStores(VectorStoreConformance):
    @pytest.fixture
    def exact(self, backend: str) -> bool:
        return backend == "milvus-lite" or (backend in FAISS_BACKENDS and FAISS_BACKENDS[backend][1])
