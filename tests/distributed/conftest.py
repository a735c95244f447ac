# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the scale-out ingestion tests: one local Ray cluster for the session (a head and
one worker node, one CPU each, a small object store, no dashboard, a node declared dead about 3 s
after its raylet stops answering), the real Milvus server of the server tests and the suite's
PostgreSQL. Skipped only where Ray is not installed (``mxrag[ray]``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.server.milvus_server import MilvusServer

pytest.importorskip("ray", reason='Ray is not installed: pip install "mxrag[ray]"')

OBJECT_STORE_BYTES = 80 * 1024 * 1024


NODE = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES}
# a killed node is noticed after 3 missed health checks, 1 s apart (Ray's default: 5, 3 s apart)
FAST_NODE_DEATH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


def add_worker_node(cluster: Any) -> Any:
    """A new worker node of ``NODE``'s size, tried twice: Ray gives a raylet 30 s to register,
    which a loaded 2-core machine may miss."""
    try:
        return cluster.add_node(**NODE)
    except Exception:  # "The current node timed out during startup"
        return cluster.add_node(**NODE)


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[Any]:
    """A running local cluster (``ray.cluster_utils.Cluster``), this process connected to it as a
    driver. A test that removes its worker node adds one back before it ends."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False,
                                                            "_system_config": FAST_NODE_DEATH})
    add_worker_node(cluster)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="session")
def ray_cluster(local_cluster: Any) -> str:
    """The address of the session's local cluster."""
    return str(local_cluster.address)


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
