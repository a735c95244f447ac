# SPDX-License-Identifier: Apache-2.0
"""NetworkxGraphStore: the conformance suite, plus its file: corrupt, encrypted, crash-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mx_rag.errors import StorageError
from mx_rag.graphrag.networkx_store import NetworkxGraphStore
from mx_rag.testing.graph_store import GraphStoreConformance, StoreFactory, chain_graph, names


class TestNetworkxStore(GraphStoreConformance):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> StoreFactory:
        return lambda name="main": NetworkxGraphStore(tmp_path / f"{name}.json")


def test_a_missing_file_is_a_new_graph_and_save_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    store = NetworkxGraphStore(path)
    assert store.count_nodes() == 0 and not path.exists()
    chain_graph(store)  # a batch: saves at its end
    assert json.loads(path.read_text())["format"] == "mxrag-graph"
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b"[]", b'{"format": "other"}', b'{"format": "mxrag-graph", "version": 1}',
     b'{"format":"mxrag-graph","version":1,"next_id":1,"nodes":[],"edges":[{"source":"a","target":"b",'
     b'"relation":"r","descriptions":{}}]}', b"\xff\xfe"],
)
def test_a_damaged_file_raises_and_is_left_alone(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "g.json"
    path.write_bytes(content)
    with pytest.raises(StorageError, match="graph file"):
        NetworkxGraphStore(path)
    assert path.read_bytes() == content


def test_encrypted_file_needs_the_decrypt_fn(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    store = NetworkxGraphStore(path, encrypt_fn=lambda s: s[::-1], decrypt_fn=lambda s: s[::-1])
    chain_graph(store)
    assert "mxrag-graph" not in path.read_text()
    assert names(NetworkxGraphStore(path, decrypt_fn=lambda s: s[::-1])) == set("abcdez")
    with pytest.raises(StorageError, match="decrypt_fn"):
        NetworkxGraphStore(path)


def test_stale_temp_files_are_removed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    chain_graph(NetworkxGraphStore(path))
    stale = tmp_path / ".g.json.abc.tmp"
    stale.write_text("half a graph")
    assert names(NetworkxGraphStore(path)) == set("abcdez")
    assert not stale.exists()


def test_memory_only_store(tmp_path: Path) -> None:
    store = NetworkxGraphStore(None)
    chain_graph(store)
    store.save()
    assert store.count_nodes() == 6 and list(tmp_path.iterdir()) == []
