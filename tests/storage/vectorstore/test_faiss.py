# SPDX-License-Identifier: Apache-2.0
"""MindFAISS beyond the conformance suite: files, sidecar, crash safety, saves, validation."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import faiss
import numpy as np
import pytest

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.vectorstore import MindFAISS

from .conftest import unit_vectors

DIM = 16


def _store(path: Path | None, **kwargs) -> MindFAISS:
    return MindFAISS(x_dim=DIM, devs=[0], load_local_index=path, **kwargs)


# -- persistence -------------------------------------------------------------------------------


def test_save_and_reload_round_trip_keeps_vectors_and_documents(tmp_path: Path) -> None:
    path = tmp_path / "faiss.index"
    store = _store(path)
    data = unit_vectors(30, DIM)
    store.add(list(range(10)), data[:10], document_id=1)
    store.add(list(range(10, 30)), data[10:], document_id=2)
    expected = store.search(data[:3], k=5)
    again = _store(path)
    assert again.count() == 30 and again.get_all_ids() == list(range(30))
    assert again.search(data[:3], k=5) == expected
    _, ids = again.search(data[:1], k=30, filter_dict={"document_id": [1]})
    assert sorted(ids[0]) == list(range(10))
    for file in (path, Path(f"{path}.meta.npz")):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert again.get_save_file() == str(path)


@pytest.mark.parametrize("layout", ["IndexIDMap2", "IndexIDMap"])
def test_an_index_written_by_plain_faiss_loads_with_document_zero(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "original.index"
    data = unit_vectors(20, DIM)
    index = getattr(faiss, layout)(faiss.IndexFlatIP(DIM))
    index.add_with_ids(data, np.arange(100, 120, dtype=np.int64))
    faiss.write_index(index, str(path))
    store = _store(path)
    assert store.get_all_ids() == list(range(100, 120))
    assert store.search(data[:2], k=1)[1] == [[100], [101]]
    _, ids = store.search(data[:1], k=50, filter_dict={"document_id": [0]})
    assert len(ids[0]) == 20
    store.add([7], unit_vectors(1, DIM, seed=3), document_id=4)  # writes the sidecar from now on
    assert _store(path).search(unit_vectors(1, DIM, seed=3), k=5, filter_dict={"document_id": [4]})[1] == [[7]]
    assert isinstance(faiss.read_index(str(path)), faiss.IndexIDMap2)  # still a plain FAISS file


def test_a_bare_flat_index_gets_positional_ids(tmp_path: Path) -> None:
    path = tmp_path / "bare.index"
    index = faiss.IndexFlatL2(DIM)
    index.add(unit_vectors(5, DIM))
    faiss.write_index(index, str(path))
    assert _store(path, metric_type="L2").get_all_ids() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_corrupt_index_file_raises_storage_error(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "faiss.index"
    _store(path).add(list(range(50)), unit_vectors(50, DIM))
    content = path.read_bytes()
    path.write_bytes({"garbage": os.urandom(300), "truncated": content[: len(content) // 2], "empty": b""}[damage])
    with pytest.raises(StorageError, match="corrupt"):
        _store(path)


def test_a_corrupt_sidecar_raises_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "faiss.index"
    _store(path).add([1], unit_vectors(1, DIM))
    Path(f"{path}.meta.npz").write_bytes(b"not a zip")
    with pytest.raises(StorageError, match="sidecar"):
        _store(path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x_dim": 8}, "x_dim"),
        ({"metric_type": "L2"}, "metric_type"),
        ({"metric_type": "COSINE"}, "metric_type"),
        ({"index_type": "HNSW"}, "index_type"),
    ],
)
def test_an_index_file_that_does_not_fit_raises_parameter_error(tmp_path: Path, kwargs: dict, message: str) -> None:
    path = tmp_path / "faiss.index"
    _store(path).add([1], unit_vectors(1, DIM))
    with pytest.raises(ParameterError, match=message):
        MindFAISS(**{"x_dim": DIM, "load_local_index": path, **kwargs})


def test_stale_temp_files_are_removed_on_load(tmp_path: Path) -> None:
    path = tmp_path / "faiss.index"
    _store(path).add([1], unit_vectors(1, DIM))
    stale = tmp_path / ".faiss.index.abc123.tmp"
    stale.write_bytes(b"half a save")
    _store(path)
    assert not stale.exists()


def test_in_memory_store_cannot_save(tmp_path: Path) -> None:
    store = _store(None)
    store.add([1], unit_vectors(1, DIM))
    assert store.get_save_file() == ""
    with pytest.raises(StorageError, match="in memory"):
        store.save_local()
    assert list(tmp_path.iterdir()) == []


# -- saves -------------------------------------------------------------------------------------


def test_auto_save_writes_once_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "faiss.index"
    replaced: list[str] = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaced.append(str(dst)), real_replace(src, dst))[1])
    store = _store(path)
    store.add(list(range(500)), unit_vectors(500, DIM))
    store.update([1, 2, 3], unit_vectors(3, DIM, seed=8))
    store.delete(list(range(100)))
    store.delete([100_000])  # nothing removed: nothing to save
    assert replaced.count(str(path)) == 3
    assert replaced.count(f"{path}.meta.npz") == 3
    manual = _store(tmp_path / "manual.index", auto_save=False)
    manual.add([1], unit_vectors(1, DIM))
    assert not (tmp_path / "manual.index").exists()
    manual.save_local()
    assert _store(tmp_path / "manual.index").count() == 1


def test_a_failed_save_leaves_memory_and_file_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar is written first: a crash between the two files leaves it one save ahead."""
    path = tmp_path / "faiss.index"
    store = _store(path)
    store.add([1, 2], unit_vectors(2, DIM), document_id=5)

    def broken_write(index, target: str) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(faiss, "write_index", broken_write)
    with pytest.raises(StorageError, match="disk full"):
        store.add([3], unit_vectors(1, DIM, seed=1), document_id=6)
    with pytest.raises(StorageError):
        store.delete([1])
    monkeypatch.undo()
    assert store.get_all_ids() == [1, 2]  # both changes were undone in memory
    reloaded = _store(path)  # the sidecar already lists id 3; the index does not hold it
    assert reloaded.get_all_ids() == [1, 2]
    assert reloaded.search(unit_vectors(1, DIM), k=5, filter_dict={"document_id": [5]})[1][0] != []
    assert list(tmp_path.glob("*.tmp")) == []


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from mx_rag.storage.vectorstore import MindFAISS

    store = MindFAISS(x_dim=16, load_local_index=sys.argv[1])
    rng = np.random.default_rng(int(sys.argv[2]))
    n = store.count()
    print("ready", n, flush=True)
    while True:
        store.add(list(range(n, n + 50)), rng.standard_normal((50, 16)).astype("float32"), document_id=n // 50)
        n += 50
    """
)


def test_kill_9_during_saves_never_leaves_a_broken_index(tmp_path: Path) -> None:
    path = tmp_path / "faiss.index"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    chance = random.Random(1234)
    counts = []
    for trial in range(6):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), str(trial)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdout.readline().startswith("ready")
        try:
            child.wait(timeout=chance.uniform(0.05, 0.5))
        except subprocess.TimeoutExpired:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        store = _store(path)
        count = store.count()
        assert count % 50 == 0 and store.get_all_ids() == list(range(count))
        for batch in chance.sample(range(count // 50), min(3, count // 50)):
            _, ids = store.search(unit_vectors(1, DIM), k=100, filter_dict={"document_id": [batch]})
            assert sorted(ids[0]) == list(range(batch * 50, batch * 50 + 50))
        counts.append(count)
    assert counts == sorted(counts) and counts[-1] > 0


# -- index kinds -------------------------------------------------------------------------------


def test_ivf_trains_once_enough_vectors_exist(tmp_path: Path) -> None:
    path = tmp_path / "ivf.index"
    params = {"nlist": 4, "nprobe": 4, "train_size": 100}
    store = _store(path, index_type="IVF", index_params=params)
    data = unit_vectors(160, DIM)
    store.add(list(range(60)), data[:60])
    assert isinstance(faiss.read_index(str(path)), faiss.IndexIDMap2)  # exact until trained
    assert store.search(data[:2], k=1)[1] == [[0], [1]]
    store.add(list(range(60, 160)), data[60:])
    assert isinstance(faiss.read_index(str(path)), faiss.IndexIVFFlat)
    store.delete(list(range(100)))
    reloaded = _store(path, index_type="IVF", index_params=params)
    assert reloaded.get_all_ids() == list(range(100, 160))
    assert reloaded.search(data[150:152], k=1)[1] == [[150], [151]]


def test_hnsw_filters_larger_than_the_exact_limit_use_the_graph(tmp_path: Path) -> None:
    store = _store(None, index_type="HNSW")
    data = unit_vectors(5000, DIM)
    store.add(list(range(4500)), data[:4500], document_id=1)
    store.add(list(range(4500, 5000)), data[4500:], document_id=2)
    _, big = store.search(data[:3], k=10, filter_dict={"document_id": [1]})
    _, small = store.search(data[:3], k=10, filter_dict={"document_id": [2]})
    assert [row[0] for row in big] == [0, 1, 2] and all(max(row) < 4500 for row in big)
    assert all(len(row) == 10 and min(row) >= 4500 for row in small)


@pytest.mark.parametrize("docs", [[7], [3, 7, 3], list(range(20))])
def test_flat_filters_match_brute_force_on_both_search_paths(docs: list[int]) -> None:
    """One document (1 % of the index) takes the copy-and-scan path, twenty take faiss's selector."""
    store = _store(None, index_type="FLAT")
    data = unit_vectors(2000, DIM, seed=3)
    for doc in range(100):
        store.add(list(range(doc * 20, doc * 20 + 20)), data[doc * 20 : doc * 20 + 20], document_id=doc)
    queries = unit_vectors(4, DIM, seed=4)
    scores, ids = store.search(queries, k=5, filter_dict={"document_id": docs})
    allowed = np.concatenate([np.arange(d * 20, d * 20 + 20) for d in sorted(set(docs))])
    expected = allowed[np.argsort(-(queries @ data[allowed].T), axis=1)[:, :5]]
    assert ids == expected.tolist()
    assert all(row == sorted(row, reverse=True) for row in scores)
    store.delete(list(range(140, 160)))  # document 7's cached id array must follow the delete
    _, after = store.search(queries, k=5, filter_dict={"document_id": [7]})
    assert after == [[], [], [], []]
    store.add([5000], queries[:1], document_id=3)  # cached filters must follow adds too
    _, again = store.search(queries, k=5, filter_dict={"document_id": docs})
    assert 5000 in again[0] if 3 in docs else 5000 not in again[0]
    assert all(i not in range(140, 160) for row in again for i in row)


@pytest.mark.parametrize("metric", ["IP", "L2"])
def test_a_large_flat_index_searches_a_quantised_copy_kept_in_step_with_writes(tmp_path: Path, metric: str) -> None:
    """From ``quantize_from`` vectors on, unfiltered searches (and filters over most of the index)
    score the quantised copy's candidates exactly; adds and deletes reach the copy; the file
    written is still a plain FLAT index."""
    path = tmp_path / "big.index"
    store = _store(path, metric_type=metric, index_params={"quantize_from": 1500})
    data = unit_vectors(3000, DIM, seed=5)
    store.add(list(range(1000)), data[:1000], document_id=1)
    store.add(list(range(1000, 3000)), data[1000:], document_id=2)
    queries = unit_vectors(20, DIM, seed=6)

    def brute(alive: np.ndarray, k: int = 10) -> list[list[int]]:
        if metric == "IP":
            order = np.argsort(-(queries @ data[alive].T), axis=1, kind="stable")
        else:
            order = np.argsort(((queries[:, None, :] - data[alive][None]) ** 2).sum(-1), axis=1, kind="stable")
        return alive[order[:, :10]].tolist()

    def recall(found: list[list[int]], truth: list[list[int]]) -> float:
        return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)]))

    alive = np.arange(3000)
    _, ids = store.search(queries, k=10)
    assert store._index._quantized is not None and recall(ids, brute(alive)) >= 0.98
    scores, _ = store.search(queries, k=10)
    assert all(row == sorted(row, reverse=True) for row in scores)
    store.delete(list(range(0, 3000, 3)))  # rows leave the copy in the same order
    alive = np.setdiff1d(alive, np.arange(0, 3000, 3))
    store.add([5000 + i for i in range(5)], queries[:5], document_id=2)  # each query's own vector is its best hit
    data = np.vstack([data, np.zeros((2000, DIM), np.float32), queries[:5]])
    data[5000:5005] = queries[:5]
    alive = np.concatenate([alive, np.arange(5000, 5005)])
    assert store._index._quantized is not None and store._index._quantized.ntotal == len(alive)
    _, ids = store.search(queries, k=10)
    assert [row[0] for row in ids[:5]] == [5000 + i for i in range(5)]
    assert not {i for row in ids for i in row} & set(range(0, 3000, 3)) and recall(ids, brute(alive)) >= 0.98
    _, scoped = store.search(queries, k=10, filter_dict={"document_id": [2]})  # most of the index: post-filtered
    assert all(i >= 1000 for row in scoped for i in row)
    reread = faiss.read_index(str(path))
    assert isinstance(faiss.downcast_index(reread.index), faiss.IndexFlat) and reread.ntotal == len(alive)
    _, again = _store(path, metric_type=metric, index_params={"quantize_from": 1500}).search(queries, k=10)
    assert again == ids


def test_cosine_normalises_without_touching_the_callers_array() -> None:
    store = _store(None, metric_type="COSINE")
    data = unit_vectors(10, DIM) * 5.0
    before = data.copy()
    store.add(list(range(10)), data)
    scores, ids = store.search(data[:2] * 3.0, k=3)
    np.testing.assert_array_equal(data, before)
    assert [row[0] for row in ids] == [0, 1] and scores[0][0] == pytest.approx(1.0, abs=1e-5)


# -- arguments and imports ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"x_dim": 0}, "x_dim"),
        ({"x_dim": 2**20 + 1}, "x_dim"),
        ({"devs": [0, 1]}, "devs"),
        ({"devs": [64]}, "devs"),
        ({"devs": "0"}, "devs"),
        ({"index_type": "PQ"}, "index_type"),
        ({"metric_type": "dot"}, "metric_type"),
        ({"auto_save": "yes"}, "auto_save"),
        ({"index_params": {"M": 16}}, "index_params"),
        ({"index_type": "HNSW", "index_params": {"efSearch": 0}}, "efSearch"),
        ({"index_params": {"quantize_from": 0}}, "quantize_from"),
        ({"index_type": "IVF", "index_params": {"nlist": 10, "train_size": 5}}, "train_size"),
        ({"load_local_index": "/no/such/dir/faiss.index"}, "load_local_index"),
        ({"load_local_index": "a/../b.index"}, "load_local_index"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        MindFAISS(**{"x_dim": DIM, **kwargs})


def test_create_builds_from_keywords(tmp_path: Path) -> None:
    store = MindFAISS.create(x_dim=DIM, devs=[0], load_local_index=str(tmp_path / "f.index"))
    assert isinstance(store, MindFAISS) and store.count() == 0
    with pytest.raises(ParameterError, match="create"):
        MindFAISS.create(x_dim=DIM, colour="red")


def test_update_needs_dense_vectors() -> None:
    store = _store(None)
    store.add([1], unit_vectors(1, DIM))
    with pytest.raises(ParameterError, match="dense"):
        store.update([1])


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_importing_the_package_loads_neither_faiss_nor_pymilvus() -> None:
    result = _python(
        "import sys\n"
        "from mx_rag.storage.vectorstore import VectorStore, SearchMode, MindFAISS, MilvusDB\n"
        "import mx_rag.storage.vectorstore as pkg\n"
        "assert set(pkg.__all__) == {'MilvusDB', 'MindFAISS', 'OpenGaussDB', 'SCORE_SCALE', 'SearchMode',"
        " 'VectorStorageFactory', 'VectorStore'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('faiss', 'pymilvus', 'milvus_lite', 'psycopg')))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_missing_faiss_raises_extra_not_installed() -> None:
    result = _python(
        "import sys; sys.modules['faiss'] = None\n"
        "from mx_rag.errors import ExtraNotInstalledError\n"
        "from mx_rag.storage.vectorstore import MindFAISS\n"
        "try:\n    MindFAISS(x_dim=4)\nexcept ExtraNotInstalledError as exc:\n    print(exc)\n"
    )
    assert "mxrag[faiss]" in result.stdout, result.stderr


def test_a_gpu_replica_serves_unfiltered_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: a CPU clone stands in for faiss.index_cpu_to_gpu to exercise the replica logic."""
    copies: list[object] = []

    def to_gpu(resources: object, device: int, index: object) -> object:
        copies.append(device)
        return faiss.clone_index(index)

    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 2)
    monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
    monkeypatch.setattr(faiss, "index_cpu_to_gpu", to_gpu, raising=False)
    with pytest.raises(ParameterError, match="GPU 2"):
        MindFAISS(x_dim=DIM, devs=[2])
    store = MindFAISS(x_dim=DIM, devs=[1])
    data = unit_vectors(20, DIM)
    store.add(list(range(10)), data[:10])
    assert store.search(data[:2], k=1)[1] == [[0], [1]] and copies == [1]
    assert store.search(data[:2], k=1)[1] == [[0], [1]] and copies == [1]  # the replica is reused
    store.add(list(range(10, 20)), data[10:])
    assert store.search(data[15:16], k=1)[1] == [[15]] and copies == [1, 1]  # rebuilt after a change
    assert store.search(data[15:16], k=1, filter_dict={"document_id": [0]})[1] == [[15]]  # CPU, filtered
    assert copies == [1, 1]

    def broken(resources: object, device: int, index: object) -> object:
        raise RuntimeError("out of GPU memory")

    monkeypatch.setattr(faiss, "index_cpu_to_gpu", broken, raising=False)
    store.delete([15])
    assert store.search(data[15:16], k=1)[1] != [[15]]  # fell back to the CPU index


def test_repeated_ids_from_the_originals_update_keep_the_newest_vector(tmp_path: Path) -> None:
    path = tmp_path / "original.index"
    old, new = unit_vectors(2, DIM, seed=20), unit_vectors(1, DIM, seed=21)
    index = faiss.IndexIDMap(faiss.IndexFlatL2(DIM))
    index.add_with_ids(old, np.array([1, 2], dtype=np.int64))
    index.add_with_ids(new, np.array([1], dtype=np.int64))  # the original's update appended
    faiss.write_index(index, str(path))
    store = _store(path, metric_type="L2")
    assert store.get_all_ids() == [1, 2] and store.get_ntotal() == 2
    assert store.search(new, k=1) == ([[pytest.approx(1.0, abs=1e-5)]], [[1]])
    assert store.search(old[:1], k=1)[0][0][0] < 0.99  # the first vector of id 1 is gone


def test_the_factory_builds_stores_by_name(tmp_path: Path) -> None:
    from mx_rag.storage.vectorstore import VectorStorageFactory

    store = VectorStorageFactory.create_storage(
        vector_type="npu_faiss_db", x_dim=DIM, devs=[0], load_local_index=str(tmp_path / "f.index")
    )
    assert isinstance(store, MindFAISS)
    with pytest.raises(ParameterError, match="vector_type"):
        VectorStorageFactory.create_storage(vector_type="chroma_db")
    with pytest.raises(ParameterError, match="engine"):
        VectorStorageFactory.create_storage(vector_type="opengauss_db")
    with pytest.raises(ParameterError, match="x_dim"):
        VectorStorageFactory.create_storage(vector_type="npu_faiss_db", x_dim=0)
