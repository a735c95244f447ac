# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the scale-out ingestion tests: one local Ray cluster for the session (a head and
one worker node, one CPU each, a small object store, no dashboard), the real Milvus server of the
server tests and the suite's PostgreSQL. Skipped only where Ray is not installed (``mxrag[ray]``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.server.milvus_server import MilvusServer

pytest.importorskip("ray", reason='Ray is not installed: pip install "mxrag[ray]"')

OBJECT_STORE_BYTES = 80 * 1024 * 1024


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """The address of a running local cluster, this process connected to it as a driver."""
    import ray
    from ray.cluster_utils import Cluster

    node = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
    except Exception:  # Ray gives a raylet 30 s to register, which a loaded 2-core machine may miss
        cluster.add_node(**node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


@dataclass(frozen=True)
class Stack:
    """One test's stores: a new PostgreSQL schema (registry and chunks) and Milvus collection."""

    data_dir: Path
    postgres_url: str
    milvus_uri: str
    collection: str

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MXRAG_")}
        env.update({"MXRAG_DATA_DIR": str(self.data_dir), "MXRAG_STORES__POSTGRES_URL": self.postgres_url,
                    "MXRAG_STORES__REGISTRY_URL": self.postgres_url, "MXRAG_STORES__MILVUS_URL": self.milvus_uri,
                    "MXRAG_STORES__MILVUS_COLLECTION": self.collection})
        return env


@pytest.fixture
def stack(milvus_server: MilvusServer, postgres_schema_url: str, tmp_path: Path) -> Iterator[Stack]:
    with milvus_server.scratch_collection("ray") as collection:
        yield Stack(tmp_path / "data", postgres_schema_url, milvus_server.uri, collection)
