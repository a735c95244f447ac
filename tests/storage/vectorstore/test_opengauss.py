# SPDX-License-Identifier: Apache-2.0
"""OpenGaussDB beyond the conformance suite, on PostgreSQL with pgvector (the SQL openGauss's
DataVec speaks too): sparse and hybrid tables, IVFFLAT, the metrics' scores, bad arguments, the
factory and the reference page's example."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, text

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.vectorstore import OpenGaussDB, SearchMode, VectorStorageFactory

from .conftest import unit_vectors

DIM = 8


@pytest.fixture
def table(pgvector_engine: Engine) -> Iterator[str]:
    name = f"v_{uuid.uuid4().hex[:16]}"
    yield name
    with pgvector_engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {name}"))


def _create(engine: Engine, table: str, **kwargs: Any) -> OpenGaussDB:
    return OpenGaussDB.create(engine=engine, collection_name=table, **{"dense_dim": DIM, **kwargs})


def test_sparse_and_hybrid_tables(pgvector_engine: Engine, table: str) -> None:
    sparse = _create(pgvector_engine, table, search_mode=SearchMode.SPARSE, sparse_dim=1000)
    sparse.add_sparse([1, 2, 3], [{1: 0.5, 7: 0.2}, {2: 0.9}, {7: 0.8, 0: 0.1}], document_id=4)
    scores, ids = sparse.search([{7: 1.0}], k=5)
    assert ids[0][:2] == [3, 1] and scores[0][:2] == pytest.approx([0.8, 0.2])
    assert sparse.search([{7: 1.0}], k=5, filter_dict={"document_id": [5]}) == ([[]], [[]])
    sparse.update([2], sparse=[{7: 0.95}])
    assert sparse.search([{7: 1.0}], k=1)[1] == [[2]]
    with pytest.raises(ParameterError, match="sparse_dim is 1000"):
        sparse.add_sparse([9], [{1000: 1.0}])

    with pytest.raises(ParameterError, match="search_mode"):
        sparse.search(unit_vectors(1, DIM), k=1)
    sparse.drop_collection()

    hybrid = _create(pgvector_engine, table, search_mode=SearchMode.HYBRID)
    dense = unit_vectors(2, DIM)
    hybrid.add_dense_and_sparse([1, 2], dense, [{3: 1.0}, {4: 1.0}], document_id=1)
    assert hybrid.search(dense[1:], k=1)[1] == [[2]]
    assert hybrid.search([{3: 2.0}], k=1)[1] == [[1]]
    hybrid.update([1], dense=dense[1:], sparse=[{4: 3.0}])
    assert hybrid.search([{4: 1.0}], k=1)[1] == [[1]]
    with pytest.raises(ParameterError, match="search_mode"):
        hybrid.add([5], dense[:1])
    with pytest.raises(ParameterError, match="sparse_embeddings"):
        hybrid.add_dense_and_sparse([5], dense[:1], [{"a": 1.0}])
    with pytest.raises(ParameterError, match="1001 non-zero"):
        hybrid.add_dense_and_sparse([5], dense[:1], [dict.fromkeys(range(1001), 0.5)])
    assert hybrid.count() == 2


@pytest.mark.parametrize("metric", ["IP", "L2", "COSINE"])
def test_ivfflat_and_every_metric_score_like_the_other_stores(pgvector_engine: Engine, table: str,
                                                               metric: str) -> None:
    data = unit_vectors(50, DIM, seed=3)
    store = _create(pgvector_engine, table, index_type="IVFFLAT", metric_type=metric, params={"dense": {"lists": 4}})
    store.add(list(range(50)), data, document_id=[i % 2 for i in range(50)])
    scores, ids = store.search(data[:3], k=4)
    assert [row[0] for row in ids] == [0, 1, 2]
    assert all(row[0] == pytest.approx(1.0, abs=1e-5) and row == sorted(row, reverse=True) for row in scores)
    expected = np.sort(data @ data[0])[::-1][1]  # the second-best cosine similarity
    assert scores[0][1] == pytest.approx(expected, abs=1e-4)
    assert set(store.search(data[:1], k=50, filter_dict={"document_id": [1]})[1][0]) == set(range(1, 50, 2))


def test_a_new_store_on_an_existing_table_reads_its_dimensions(pgvector_engine: Engine, table: str) -> None:
    _create(pgvector_engine, table).add([1], unit_vectors(1, DIM))
    again = OpenGaussDB(engine=pgvector_engine, collection_name=table)
    assert again.count() == 1
    with pytest.raises(ParameterError, match=f"{DIM} columns"):
        again.add([2], unit_vectors(1, DIM + 1))
    with pytest.raises(StorageError, match="create_collection"):
        OpenGaussDB(engine=pgvector_engine, collection_name="never_created").add([1], unit_vectors(1, DIM))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"collection_name": "bad-name"}, "collection_name"),
        ({"collection_name": "x" * 64}, "collection_name"),
        ({"index_type": "FLAT"}, "index_type"),
        ({"metric_type": "JACCARD"}, "metric_type"),
        ({"search_mode": "DENSE"}, "search_mode"),
        ({"dense_dim": 0}, "dense_dim"),
        ({"dense_dim": 2001}, "dense_dim"),
        ({"params": {"dense": {"lists": 4}}}, "params"),  # lists is IVFFLAT's, the default is HNSW
        ({"params": {"dense": {"m": 1}}}, "params"),
        ({"params": {"other": {}}}, "params"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_arguments_are_refused(pgvector_engine: Engine, table: str, kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        OpenGaussDB.create(**{"engine": pgvector_engine, "collection_name": table, "dense_dim": DIM, **kwargs})


def test_engine_must_be_postgresql_or_opengauss(tmp_path: Any) -> None:
    with pytest.raises(ParameterError, match="engine"):
        OpenGaussDB(engine=create_engine(f"sqlite:///{tmp_path / 'x.db'}"))
    with pytest.raises(ParameterError, match="engine"):
        OpenGaussDB.create(dense_dim=DIM)


def test_the_factory_builds_every_store(pgvector_engine: Engine, table: str, milvus_client: Any,
                                        tmp_path: Any) -> None:
    from mx_rag.storage.vectorstore import MilvusDB, MindFAISS

    built = [
        VectorStorageFactory.create_storage(vector_type="opengauss_db", engine=pgvector_engine,
                                            collection_name=table, dense_dim=DIM),
        VectorStorageFactory.create_storage(vector_type="milvus_db", client=milvus_client,
                                            collection_name=f"f_{table}", x_dim=DIM),
        VectorStorageFactory.create_storage(vector_type="npu_faiss_db", x_dim=DIM, devs=[0],
                                            load_local_index=str(tmp_path / "f.index")),
    ]
    assert [type(store) for store in built] == [OpenGaussDB, MilvusDB, MindFAISS]
    for store in built:
        store.add([1, 2], unit_vectors(2, DIM))
        assert store.search(unit_vectors(2, DIM)[1:], k=1)[1] == [[2]]


def test_reference_example(pgvector_engine: Engine, table: str, capsys: pytest.CaptureFixture[str]) -> None:
    """databases.md's OpenGaussDB example, the engine on PostgreSQL (and the table name this test's)."""
    dim = 128
    n_emb = 1000
    dense_store = OpenGaussDB.create(engine=pgvector_engine, dense_dim=dim, collection_name=table)
    dense_embeddings = np.random.randn(n_emb, dim)
    ids = list(range(n_emb))
    dense_store.add(ids, dense_embeddings)
    res = dense_store.search(dense_embeddings[:3].tolist(), k=3)
    print(res)
    assert [row[0] for row in res[1]] == [0, 1, 2]
    count = dense_store.delete(ids)
    print(count)
    assert count == n_emb and dense_store.count() == 0
    with pytest.raises(ParameterError, match="not in"):  # the example updates an id it just deleted
        dense_store.update([1], dense_embeddings[:1])
    dense_store.drop_collection()
    assert str(n_emb) in capsys.readouterr().out
