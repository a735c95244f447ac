# SPDX-License-Identifier: Apache-2.0
"""Backends for the vector-store conformance suite (``mx_rag.testing.vector_store``)."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest

from mx_rag.storage.vectorstore import MilvusDB, MindFAISS, OpenGaussDB, VectorStore
from mx_rag.testing.vector_store import DIM, StoreFactory, unit_vectors

__all__ = ["BACKENDS", "DIM", "FAISS_BACKENDS", "StoreFactory", "unit_vectors"]

# (id, constructor kwargs, exact?) — exact backends must match brute force on the full top k
FAISS_BACKENDS = {
    "faiss-flat-ip": ({"index_type": "FLAT", "metric_type": "IP"}, True),
    "faiss-flat-l2": ({"index_type": "FLAT", "metric_type": "L2"}, True),
    "faiss-cosine": ({"index_type": "FLAT", "metric_type": "COSINE"}, True),
    # every unfiltered search through the 8-bit copy, then exact scoring of 4k candidates
    "faiss-flat-quantized": ({"index_type": "FLAT", "metric_type": "IP", "index_params": {"quantize_from": 1}}, True),
    "faiss-hnsw": ({"index_type": "HNSW", "metric_type": "IP", "index_params": {"M": 16, "efSearch": 64}}, False),
    # nprobe == nlist probes every list, so the trained IVF index is exact too
    "faiss-ivf": (
        {"index_type": "IVF", "metric_type": "IP", "index_params": {"nlist": 4, "nprobe": 4, "train_size": 64}},
        True,
    ),
}
BACKENDS = [*FAISS_BACKENDS, "milvus-lite", "opengauss-pgvector"]
_names = itertools.count()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreFactory:
    """A factory of empty stores of the parametrized backend (file-backed FAISS, milvus-lite,
    OpenGaussDB on PostgreSQL with pgvector)."""

    def factory() -> VectorStore:
        if backend == "milvus-lite":
            client = request.getfixturevalue("milvus_client")
            return MilvusDB.create(
                client=client, collection_name=f"c{next(_names)}", x_dim=DIM, metric_type="IP", index_type="FLAT"
            )
        if backend == "opengauss-pgvector":  # HNSW (approximate): PostgreSQL with pgvector
            store = OpenGaussDB.create(engine=request.getfixturevalue("pgvector_engine"),
                                       collection_name=f"v_{uuid.uuid4().hex[:16]}", dense_dim=DIM)
            request.addfinalizer(store.drop_collection)
            return store
        kwargs, _ = FAISS_BACKENDS[backend]
        return MindFAISS(x_dim=DIM, devs=[0], load_local_index=tmp_path / f"{next(_names)}.index", **kwargs)

    return factory
