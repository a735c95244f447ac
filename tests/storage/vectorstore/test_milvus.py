# SPDX-License-Identifier: Apache-2.0
"""MilvusDB beyond the conformance suite, on milvus-lite (the same client API as a cluster)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pymilvus import MilvusClient

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.validation import DocumentIds
from mx_rag.storage.vectorstore import MilvusDB, SearchMode
from mx_rag.storage.vectorstore._milvus_schema import in_expr

from .conftest import unit_vectors

DIM = 8
_names = itertools.count()


def _create(client: Any, **kwargs: Any) -> MilvusDB:
    options = {"x_dim": DIM, "metric_type": "IP", "collection_name": f"m{next(_names)}", **kwargs}
    return MilvusDB.create(client=client, **options)


def test_data_survives_a_new_client_on_the_same_file(tmp_path: Path) -> None:
    path = str(tmp_path / "milvus.db")
    first = MilvusClient(path)
    store = MilvusDB.create(client=first, collection_name="kb", x_dim=DIM, metric_type="COSINE")
    data = unit_vectors(20, DIM)
    store.add(list(range(20)), data, document_id=3, docs=[f"chunk {i}" for i in range(20)])
    first.close()
    second = MilvusClient(path)
    again = MilvusDB.create(client=second, collection_name="kb", metric_type="COSINE")  # loads, needs no x_dim
    assert again.count() == 20 and again.get_all_ids() == list(range(20))
    scores, ids, extra = again.search(data[:2], k=1, output_fields=["document", "document_id"])
    assert ids == [[0], [1]] and scores[0][0] == pytest.approx(1.0, abs=1e-5)
    assert extra == [[{"document": "chunk 0", "document_id": 3}], [{"document": "chunk 1", "document_id": 3}]]
    second.close()


def test_sparse_and_hybrid_modes(milvus_client: Any) -> None:
    sparse = _create(milvus_client, search_mode=SearchMode.SPARSE)
    sparse.add_sparse([1, 2, 3], [{1: 0.5, 7: 0.2}, {2: 0.9}, {7: 0.8}], document_id=4)
    scores, ids = sparse.search([{7: 1.0}], k=5)
    assert ids == [[3, 1]] and scores[0] == pytest.approx([0.8, 0.2])
    assert sparse.search([{7: 1.0}], k=5, filter_dict={"document_id": [5]}) == ([[]], [[]])
    sparse.update([2], sparse=[{7: 0.95}])
    assert sparse.search([{7: 1.0}], k=1)[1] == [[2]]
    with pytest.raises(ParameterError, match="search_mode"):
        sparse.add([9], unit_vectors(1, DIM))
    with pytest.raises(ParameterError, match="search_mode"):
        sparse.search(unit_vectors(1, DIM), k=1)

    hybrid = _create(milvus_client, search_mode=SearchMode.HYBRID)
    dense = unit_vectors(2, DIM)
    hybrid.add_dense_and_sparse([1, 2], dense, [{3: 1.0}, {4: 1.0}], document_id=1)
    assert hybrid.search(dense[1:], k=1)[1] == [[2]]
    assert hybrid.search([{3: 2.0}], k=1)[1] == [[1]]
    with pytest.raises(ParameterError, match="search_mode"):
        hybrid.add_sparse([5], [{1: 1.0}])
    with pytest.raises(ParameterError, match="sparse_embeddings"):
        hybrid.add_dense_and_sparse([5], dense[:1], [{"a": 1.0}])


def test_dense_store_refuses_sparse_calls(milvus_client: Any) -> None:
    store = _create(milvus_client)
    with pytest.raises(ParameterError, match="search_mode"):
        store.add_sparse([1], [{1: 1.0}])
    with pytest.raises(ParameterError, match="search_mode"):
        store.search([{1: 1.0}], k=1)


def test_create_raises_instead_of_returning_none(milvus_client: Any) -> None:
    with pytest.raises(ParameterError, match="client"):
        MilvusDB.create(x_dim=DIM)
    with pytest.raises(ParameterError, match="client"):
        MilvusDB.create(client="localhost:19530", x_dim=DIM)
    with pytest.raises(ParameterError, match="x_dim"):
        MilvusDB.create(client=milvus_client, collection_name="nodim")
    with pytest.raises(ParameterError, match="unsupported"):
        MilvusDB.create(client=milvus_client, x_dim=DIM, colour="red")
    with pytest.raises(ParameterError, match="index_type"):
        MilvusDB.create(client=milvus_client, x_dim=DIM, index_type="DISKANN")
    with pytest.raises(StorageError, match="create_collection"):
        MilvusDB.create(client=milvus_client, collection_name="a" * 300, x_dim=DIM)  # server: max 255


@pytest.mark.parametrize("index_type", ["IVF_FLAT", "IVF_PQ", "HNSW"])
def test_other_index_types_serve_searches(milvus_client: Any, index_type: str) -> None:
    """milvus-lite cannot build IVF_PQ: the store asks it for IVF_FLAT instead."""
    store = _create(
        milvus_client, index_type=index_type, params={"dense": {"nlist": 4}} if "IVF" in index_type else None
    )
    data = unit_vectors(200, DIM)
    store.add(list(range(200)), data)
    assert store.search(data[:3], k=1)[1] == [[0], [1], [2]]
    built = {
        milvus_client.describe_index(store.collection_name, index_name=n)["index_type"]
        for n in milvus_client.list_indexes(store.collection_name)
    }
    assert built == {"IVF_FLAT" if index_type == "IVF_PQ" else index_type}


def test_a_collection_keeps_the_index_it_was_built_with(milvus_client: Any) -> None:
    flat = _create(milvus_client)
    data = unit_vectors(50, DIM)
    flat.add(list(range(50)), data)
    again = MilvusDB.create(client=milvus_client, collection_name=flat.collection_name, index_type="HNSW")
    assert again._index_type == "FLAT" and again.search(data[:2], k=1)[1] == [[0], [1]]
    hnsw = _create(milvus_client, index_type="HNSW")
    assert MilvusDB.create(client=milvus_client, collection_name=hnsw.collection_name)._index_type == "HNSW"


def test_get_all_ids_pages_through_large_collections(milvus_client: Any) -> None:
    store = _create(milvus_client)
    store.add(list(range(2500)), unit_vectors(2500, DIM))
    assert store.get_all_ids() == list(range(2500))


def test_concurrent_filtered_searches_do_not_share_state(milvus_client: Any) -> None:
    store = _create(milvus_client)
    data = unit_vectors(80, DIM)
    for doc in range(8):
        store.add(list(range(doc * 10, doc * 10 + 10)), data[doc * 10 : doc * 10 + 10], document_id=doc)
    wrong: list[Any] = []

    def worker(doc: int) -> None:
        for _ in range(10):
            _, ids = store.search(data[:4], k=10, filter_dict={"document_id": [doc]})
            if any(sorted(row) != list(range(doc * 10, doc * 10 + 10)) for row in ids):
                wrong.append((doc, ids))

    threads = [threading.Thread(target=worker, args=(doc,)) for doc in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_collection_management(milvus_client: Any) -> None:
    store = _create(milvus_client, auto_flush=False)
    store.add([1, 2], unit_vectors(2, DIM), metadatas=[{"page": 1}, {"page": 2}])
    store.flush()
    assert store.has_collection(store.collection_name) and store.has_collection()
    assert not store.has_collection("never_created")
    store.drop_collection()
    assert not store.has_collection()
    with pytest.raises(ParameterError, match="metadatas"):
        _create(milvus_client).add([1], unit_vectors(1, DIM), metadatas=["page 1"])
    with pytest.raises(ParameterError, match="docs"):
        _create(milvus_client).add([1, 2], unit_vectors(2, DIM), docs=["only one"])


def test_filter_expressions_are_parameterised_where_the_server_allows() -> None:
    assert in_expr("document_id", [1, 2], "v2.5.4") == ("document_id in {values}", {"values": [1, 2]})
    assert in_expr("document_id", [1, 2], "v2.4.9") == ("document_id in [1, 2]", {})
    assert in_expr("id", [np.int64(3)], "milvus_lite-3.2.2") == ("id in [3]", {})


def test_missing_pymilvus_raises_extra_not_installed() -> None:
    code = (
        "import sys; sys.modules['pymilvus'] = None\n"
        "from mx_rag.errors import ExtraNotInstalledError\n"
        "from mx_rag.storage.vectorstore import MilvusDB\n"
        "try:\n    MilvusDB(client=None)\nexcept ExtraNotInstalledError as exc:\n    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "mxrag[milvus]" in result.stdout, result.stderr


def test_concurrent_writers_on_milvus_lite(milvus_client: Any) -> None:
    """milvus-lite breaks when flushes overlap; MilvusDB makes writes on one lite client take turns."""
    store = _create(milvus_client)
    failures: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for batch in range(10):
                ids = [worker * 1000 + batch * 3 + j for j in range(3)]
                store.add(ids, unit_vectors(3, DIM, seed=worker * 100 + batch))
            store.delete([worker * 1000])
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert store.count() == 8 * 29


def test_hybrid_search_fuses_dense_and_sparse_in_milvus(milvus_client: Any) -> None:
    """Sparse vectors as BGE-M3's lexical weights are: {token id: weight} per text."""
    store = _create(milvus_client, search_mode=SearchMode.HYBRID)
    eye = np.eye(DIM, dtype=np.float32)
    dense = np.stack([eye[0], 0.8 * eye[0] + 0.6 * eye[1], eye[2], eye[3]])
    lexical = [{200: 1.0}, {101: 0.5}, {101: 0.9}, {104: 1.0}]
    store.add_dense_and_sparse([1, 2, 3, 4], dense, lexical, document_id=[1, 1, 2, 2])
    query_dense = eye[:1]  # dense ranks 1, 2; sparse ranks 3, 2: only 2 is in both lists
    scores, ids = store.hybrid_search(query_dense, [{101: 1.0}], k=2)
    assert ids[0][0] == 2 and ids[0][1] in (1, 3)
    assert scores[0] == pytest.approx([2 / 62, 1 / 61], abs=1e-6)
    assert store.hybrid_search(query_dense, [{101: 1.0}], k=2, weights=(1.0, 0.0))[1] == [[1, 2]]
    assert store.hybrid_search(query_dense, [{101: 1.0}], k=2, weights=(0.0, 1.0))[1] == [[3, 2]]
    assert store.hybrid_search(query_dense, [{101: 1.0}], k=2, filter_dict={"document_id": [2]})[1][0][0] == 3
    assert store.hybrid_search(query_dense, [{101: 1.0}], filter_dict={"document_id": []}) == ([[]], [[]])
    two = store.hybrid_search(dense[[0, 3]], [{200: 1.0}, {104: 1.0}], k=1)[1]
    assert two == [[1], [4]]
    for kwargs, name in [({"weights": (0.5,)}, "weights"), ({"weights": (0.0, 0.0)}, "weights"),
                         ({"rrf_k": 0}, "rrf_k"), ({"k": 0}, "k")]:
        with pytest.raises(ParameterError, match=name):
            store.hybrid_search(query_dense, [{101: 1.0}], **kwargs)
    with pytest.raises(ParameterError, match="sparse_embeddings"):
        store.hybrid_search(query_dense, [{101: 1.0}, {102: 1.0}])
    with pytest.raises(ParameterError, match="search_mode"):
        _create(milvus_client).hybrid_search(query_dense, [{101: 1.0}])


def test_consistency_level_is_checked_and_served_by_milvus_lite(milvus_client: Any) -> None:
    with pytest.raises(ParameterError, match="consistency_level"):
        MilvusDB(milvus_client, consistency_level="Weak")
    store = _create(milvus_client, consistency_level="Session")
    data = unit_vectors(12, DIM)
    store.add(list(range(12)), data, document_id=[i // 3 for i in range(12)])
    scope = DocumentIds(range(4), share=1.0)
    assert [store.search(data[5:6], k=1, filter_dict={"document_id": scope})[1] for _ in range(2)] == [[[5]]] * 2


_WRITER = """import sys, numpy as np
from pymilvus import MilvusClient
from mx_rag.storage.vectorstore import MilvusDB
store = MilvusDB.create(client=MilvusClient(uri=sys.argv[1]), collection_name=sys.argv[2], x_dim=8, metric_type="IP",
                        index_type="HNSW", auto_flush=False)
store.add([99], np.asarray([[1.0] + [0.0] * 7], dtype=np.float32), document_id=9)
"""


@pytest.mark.slow
def test_session_searches_see_another_process_write_through_a_new_scope(milvus_server: Any) -> None:
    """``consistency_level="Session"`` (the server's workspace) skips the wait for the server's time
    tick, yet the first search with a new scope (one per registry change) is strong, so a vector
    that another process wrote just before is found; the same scope then searches as a session."""
    client = MilvusClient(uri=milvus_server.uri)
    with milvus_server.scratch_collection("session") as name:
        store = MilvusDB.create(client=client, collection_name=name, x_dim=DIM, metric_type="IP", index_type="HNSW",
                                auto_flush=False, consistency_level="Session")
        store.add(list(range(8)), unit_vectors(8, DIM), document_id=1)
        subprocess.run([sys.executable, "-c", _WRITER, milvus_server.uri, name], check=True, timeout=120)
        scope = DocumentIds([1, 9], share=1.0)
        query = np.asarray([[1.0] + [0.0] * 7], dtype=np.float32)
        assert [store.search(query, k=1, filter_dict={"document_id": scope})[1] for _ in range(2)] == [[[99]]] * 2
    client.close()
