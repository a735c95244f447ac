# SPDX-License-Identifier: Apache-2.0
"""The vector-store conformance suite: one behaviour contract for every ``VectorStore``.

A backend proves itself by subclassing ``VectorStoreConformance`` and providing a ``make_store``
fixture: a callable ``make_store() -> VectorStore`` returning a new, empty store of ``DIM`` (32)
dimensions with inner-product (or cosine) similarity, private to the running test. A backend
whose search is approximate (HNSW, say) also overrides ``exact`` to False: its neighbours are
then checked for top-1 >= 0.95 and recall@10 >= 0.9 instead of equality. numpy brute force is
the oracle. Needs pytest (a test dependency, not one of mx_rag's)::

    import pytest
    from mx_rag.testing.vector_store import DIM, VectorStoreConformance

    class TestMyStore(VectorStoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            return lambda: MyStore(dim=DIM, path=tmp_path / "index")

mx_rag runs it on MindFAISS (FLAT IP/L2, COSINE, HNSW, IVF) and MilvusDB on milvus-lite
(tests/storage/vectorstore/test_conformance.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mx_rag.errors import ParameterError
from mx_rag.storage.vectorstore.vectorstore import VectorStore

__all__ = ["DIM", "IDS", "N", "StoreFactory", "VectorStoreConformance", "brute_force", "unit_vectors"]

DIM = 32
N = 300
IDS = [1000 + i for i in range(N)]
StoreFactory = Callable[[], VectorStore]
Filled = tuple[Any, np.ndarray]  # a store of N vectors (documents 0, 1, 2) and the vectors


def unit_vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    """``n`` random unit vectors (float32), the same for the same ``seed``."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def brute_force(data: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``k`` inner products of each query against ``data``: (scores, row numbers)."""
    sims = queries @ data.T
    order = np.argsort(-sims, axis=1)[:, :k]
    return np.take_along_axis(sims, order, axis=1), order


BAD_ADDS = {
    "wrong dim": (lambda v: ([1], v[:1, :-1]), "embeddings"),
    "nan": (lambda v: ([1], np.full((1, DIM), np.nan)), "embeddings"),
    "1-d embeddings": (lambda v: ([1], v[0]), "embeddings"),
    "duplicate ids": (lambda v: ([1, 1], v[:2]), "ids"),
    "empty ids": (lambda v: ([], v[:1]), "ids"),
    "ids/rows mismatch": (lambda v: ([1, 2, 3], v[:2]), "ids"),
    "negative id": (lambda v: ([-1], v[:1]), "ids"),
    "str id": (lambda v: (["a"], v[:1]), "ids"),
    "already present": (lambda v: ([IDS[0]], v[:1]), "ids"),
}


class VectorStoreConformance:
    """Subclass this and provide the ``make_store`` fixture (see the module docstring)."""

    @pytest.fixture
    def exact(self) -> bool:
        """Whether search must equal brute force on the full top k (override for approximate indexes)."""
        return True

    @pytest.fixture
    def filled(self, make_store: StoreFactory) -> Filled:
        store = make_store()
        data = unit_vectors(N, seed=1)
        for part in range(3):  # documents 0, 1, 2 of 100 vectors each
            rows = slice(part * 100, (part + 1) * 100)
            store.add(IDS[rows], data[rows], document_id=part)
        return store, data

    def test_search_finds_the_brute_force_neighbours(self, filled: Filled, exact: bool) -> None:
        store, data = filled
        queries = unit_vectors(25, seed=2)
        scores, ids = store.search(queries, k=10)
        oracle_scores, oracle_rows = brute_force(data, queries, 10)
        oracle_ids = np.asarray(IDS)[oracle_rows]
        assert len(ids) == len(queries) and all(len(row) == 10 for row in ids)
        top1 = np.mean([row[0] == want[0] for row, want in zip(ids, oracle_ids, strict=True)])
        recall = np.mean([len(set(row) & set(want)) / 10 for row, want in zip(ids, oracle_ids, strict=True)])
        if exact:
            assert [list(row) for row in oracle_ids] == ids
            np.testing.assert_allclose(scores, np.minimum(oracle_scores, 1.0), atol=1e-4)
        else:
            assert top1 >= 0.95 and recall >= 0.9

    def test_scores_are_scaled_best_first_and_at_most_one(self, filled: Filled) -> None:
        store, data = filled
        scores, ids = store.search(data[[0, 150]], k=20)
        assert [row[0] for row in ids] == [IDS[0], IDS[150]]
        for row in scores:
            assert all(s <= 1.0 for s in row)
            assert row == sorted(row, reverse=True)
            assert row[0] == pytest.approx(1.0, abs=1e-4)
        assert all(isinstance(s, float) for s in scores[0]) and all(type(i) is int for i in ids[0])

    def test_k_larger_than_the_store_returns_everything(self, make_store: StoreFactory) -> None:
        store = make_store()
        store.add([1, 2, 3, 4, 5], unit_vectors(5), document_id=0)
        scores, ids = store.search(unit_vectors(2, seed=9), k=50)
        assert [sorted(row) for row in ids] == [[1, 2, 3, 4, 5]] * 2
        assert all(len(row) == 5 for row in scores)

    def test_one_document_id_per_vector(self, make_store: StoreFactory) -> None:
        store = make_store()
        store.add([10, 11, 12, 13], unit_vectors(4, seed=4), document_id=[7, 7, 8, 9])
        queries = unit_vectors(1, seed=5)
        assert sorted(store.search(queries, k=10, filter_dict={"document_id": [7]})[1][0]) == [10, 11]
        assert sorted(store.search(queries, k=10, filter_dict={"document_id": [8, 9]})[1][0]) == [12, 13]
        with pytest.raises(ParameterError, match="document_id"):
            store.add([20, 21], unit_vectors(2, seed=6), document_id=[1])
        assert store.count() == 4

    def test_empty_store_returns_empty_rows(self, make_store: StoreFactory) -> None:
        store = make_store()
        assert store.search(unit_vectors(2), k=3) == ([[], []], [[], []])
        assert store.count() == 0 and store.get_all_ids() == []

    def test_filter_keeps_only_the_given_documents(self, filled: Filled, exact: bool) -> None:
        store, data = filled
        queries = unit_vectors(5, seed=3)
        _, ids = store.search(queries, k=10, filter_dict={"document_id": [1]})
        assert all(len(row) == 10 and set(row) <= set(IDS[100:200]) for row in ids)
        _, oracle_rows = brute_force(data[100:200], queries, 10)
        if exact:
            assert ids == [[IDS[100 + r] for r in row] for row in oracle_rows]
        _, both = store.search(queries, k=300, filter_dict={"document_id": [0, 2]})
        assert all(sorted(row) == IDS[:100] + IDS[200:] for row in both)
        assert store.search(queries[:1], k=3, filter_dict={"document_id": [99]}) == ([[]], [[]])
        assert store.search(queries[:1], k=3, filter_dict={"document_id": []}) == ([[]], [[]])

    def test_deleted_ids_are_never_returned(self, filled: Filled) -> None:
        store, data = filled
        gone = IDS[:50] + IDS[120:140]
        assert store.delete([*gone, 5]) == len(gone)  # 5 was never added
        assert store.delete(gone) == 0
        assert store.delete([]) == 0
        assert store.count() == N - len(gone)
        _, ids = store.search(data[:60], k=30)
        assert not set(gone) & {i for row in ids for i in row}
        _, filtered = store.search(data[:5], k=100, filter_dict={"document_id": [0, 1]})
        assert not set(gone) & {i for row in filtered for i in row}
        assert store.get_all_ids() == sorted(set(IDS) - set(gone))

    def test_update_replaces_vectors_and_keeps_the_document(self, filled: Filled) -> None:
        store, data = filled
        fresh = unit_vectors(2, seed=42)
        store.update([IDS[0], IDS[150]], dense=fresh)
        assert store.count() == N
        scores, ids = store.search(fresh, k=1)
        assert ids == [[IDS[0]], [IDS[150]]]
        assert scores[0][0] == pytest.approx(1.0, abs=1e-4)
        _, old = store.search(data[:1], k=1)
        assert old != [[IDS[0]]]
        _, kept = store.search(fresh[1:], k=1, filter_dict={"document_id": [1]})
        assert kept == [[IDS[150]]]
        assert store.get_all_ids() == IDS
        with pytest.raises(ParameterError, match="not in"):
            store.update([7], dense=fresh[:1])

    def test_count_and_ids(self, filled: Filled) -> None:
        store, _ = filled
        assert store.count() == N == store.get_ntotal()
        assert store.get_all_ids() == IDS

    def test_ids_from_gives_the_ids_at_or_above_a_bound(self, filled: Filled) -> None:
        store = filled[0]
        top = max(IDS)
        assert store.ids_from(top) == [top]
        assert store.ids_from(top + 1) == []
        assert len(store.ids_from(min(IDS), limit=2)) == 2
        assert set(store.ids_from(IDS[-3], limit=5)) == set(IDS[-3:])

    def test_search_with_threshold_filters_every_row(self, filled: Filled) -> None:
        store, data = filled
        scores, ids = store.search_with_threshold(data[[3, 250]], k=5, threshold=0.9)
        assert ids == [[IDS[3]], [IDS[250]]]
        assert all(s >= 0.9 for row in scores for s in row)
        with pytest.raises(ParameterError, match="threshold"):
            store.search_with_threshold(data[:1], threshold=1.5)

    @pytest.mark.parametrize("case", list(BAD_ADDS))
    def test_bad_add_arguments_are_refused(self, filled: Filled, case: str) -> None:
        store, _ = filled
        make, name = BAD_ADDS[case]
        ids, vectors = make(unit_vectors(3, seed=5))
        with pytest.raises(ParameterError, match=name):
            store.add(ids, vectors)
        assert store.count() == N

    @pytest.mark.parametrize(
        ("kwargs", "name"),
        [
            ({"k": 0}, "k"),
            ({"k": 10001}, "k"),
            ({"k": 2.5}, "k"),
            ({"filter_dict": {"doc": [1]}}, "filter_dict"),
            ({"filter_dict": {"document_id": 1}}, "filter_dict"),
            ({"filter_dict": {"document_id": ["1"]}}, "filter_dict"),
        ],
    )
    def test_bad_search_arguments_are_refused(self, filled: Filled, kwargs: dict[str, Any], name: str) -> None:
        store, data = filled
        with pytest.raises(ParameterError, match=name):
            store.search(data[:1], **kwargs)

    def test_bad_search_vectors_are_refused(self, filled: Filled) -> None:
        store, data = filled
        bad: Any
        for bad in (data[:1, :-1], np.full((1, DIM), np.inf), [], "text"):
            with pytest.raises(ParameterError, match="embeddings"):
                store.search(bad, k=1)
        with pytest.raises(ParameterError, match="document_id"):
            store.add([1], data[:1], document_id=-3)

    def test_concurrent_adds_and_searches_stay_consistent(self, make_store: StoreFactory) -> None:
        store = make_store()
        base = unit_vectors(40, seed=11)
        store.add(list(range(40)), base, document_id=0)
        errors: list[BaseException] = []
        seen: set[int] = set()
        lock = threading.Lock()

        def adder(worker: int) -> None:
            vectors = unit_vectors(20, seed=100 + worker)
            for batch in range(4):
                ids = [10_000 * (worker + 1) + batch * 5 + j for j in range(5)]
                store.add(ids, vectors[batch * 5 : batch * 5 + 5], document_id=worker + 1)

        def searcher(worker: int) -> None:
            for _ in range(10):
                scores, ids = store.search(base[worker : worker + 4], k=8)
                assert all(row == sorted(row, reverse=True) for row in scores)
                assert [row[0] for row in ids] == list(range(worker, worker + 4))
                with lock:
                    seen.update(i for row in ids for i in row)

        def run(target: Callable[[int], None], worker: int) -> None:
            try:
                target(worker)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(adder if n % 2 else searcher, n)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        expected = set(range(40)) | {10_000 * (w + 1) + i for w in (1, 3, 5, 7) for i in range(20)}
        assert store.count() == len(expected)
        assert set(store.get_all_ids()) == expected
        assert seen <= expected
        _, ids = store.search(unit_vectors(20, seed=107)[:1], k=1, filter_dict={"document_id": [8]})
        assert ids == [[80_000]]
