# SPDX-License-Identifier: Apache-2.0
"""A graph knowledge base ingested on the local Ray cluster: its entities extracted there (spaCy,
the offline extractor of the settings), its graph in the real PostgreSQL next to the chunks,
vectors in the real Milvus. The graph equals the one the in-process ingestion builds of the same
files, even with its extraction actor killed mid-run; a rerun adds nothing."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from mx_rag.app.scale_out import ingest_on_ray, ray_pool
from mx_rag.app.service import KnowledgeService
from mx_rag.app.settings import ServerSettings, load_settings
from mx_rag.app.users import Principal
from mx_rag.distributed import RayOptions
from mx_rag.embedding.local.model_info import MINILM_NAME
from mx_rag.errors import ParameterError
from tests.distributed.conftest import Stack
from tests.distributed.test_ray_ingest import node_processes

pytestmark = pytest.mark.slow

HOTPOT = Path(__file__).resolve().parents[1] / "data" / "multihop" / "hotpotqa_sample.json"
WHO = Principal.local()


def graph_settings(stack: Stack, store: str = "postgres") -> ServerSettings:
    return load_settings(data_dir=stack.data_dir, embedding={"model": MINILM_NAME},
                         graph={"store": store, "extractor": "offline"},
                         ingest={"ray_extractors": 1, "ray_extract_cpus": 0.5},
                         stores={"postgres_url": stack.postgres_url, "registry_url": stack.postgres_url,
                                 "milvus_url": stack.milvus_uri, "milvus_collection": stack.collection})


def hotpot_files(folder: Path, files: int = 12, per_file: int = 3) -> list[Path]:
    """Text files of HotpotQA paragraphs (full of named entities), ``per_file`` each."""
    found: dict[str, str] = {}
    for item in json.loads(HOTPOT.read_text(encoding="utf-8")):
        for title, sentences in item["context"]:
            found.setdefault(title, f"{title}: {''.join(sentences).strip()}")
    paragraphs = [p for p in found.values() if 150 <= len(p) <= 900][: files * per_file]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = folder / f"hotpot-{f}.txt"
        path.write_text("\n\n".join(paragraphs[f * per_file:(f + 1) * per_file]), encoding="utf-8")
        paths.append(path)
    return paths


def dump(service: KnowledgeService, name: str) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The graph's nodes and edges with every chunk that supports them (ids left out: the store's)."""
    graph = service.graph(WHO, name).graph
    nodes = {n.name: (n.label, n.type, sorted(n.descriptions.items())) for n in graph.iter_nodes()}
    edges = {(e.source, e.target, e.relation): sorted(e.descriptions.items()) for e in graph.iter_edges()}
    return nodes, edges


def extractor_pids(cluster: Any) -> list[int]:
    return sorted(pid for node in [cluster.head_node, *cluster.worker_nodes]
                  for pid, line in node_processes(node).items() if "ExtractActor" in line)


def kill_extractor_mid_run(cluster: Any, service: KnowledgeService, name: str, paths: list[Path], pool: Any) -> Any:
    """Ingest ``paths`` on the cluster; SIGKILL the extraction actor once the graph build cached its
    first batch (its chunk registry is written then); the run's report."""
    done: dict[str, Any] = {}

    def ingest() -> None:
        try:
            done["report"] = ingest_on_ray(service, WHO, name, paths, white_paths=[paths[0].parent], pool=pool)
        except BaseException as exc:  # re-raised in the test's thread
            done["error"] = exc

    worker = threading.Thread(target=ingest)
    worker.start()
    cached = service.graphs / WHO.user_id / name / "graph_chunks.json"
    killed = []
    deadline = time.monotonic() + 240
    while worker.is_alive() and not killed and time.monotonic() < deadline:
        pids = extractor_pids(cluster)
        if pids and cached.exists():
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
        time.sleep(0.02)
    worker.join(240)
    if "error" in done:
        raise done["error"]
    assert killed, "the graph was built before its extraction actor could be killed"
    return done["report"]


def test_the_graph_built_on_ray_equals_the_in_process_one_a_killed_actor_changes_nothing_nor_a_rerun(
        local_cluster: Any, stack: Stack, tmp_path: Path) -> None:
    service = KnowledgeService(graph_settings(stack))
    paths = hotpot_files(tmp_path / "docs", files=8)
    for name in ("here", "there"):
        service.create(WHO, name, graph=True)
    service.ingest(WHO, "here", paths, white_paths=[paths[0].parent])
    want = dump(service, "here")
    assert len(want[0]) > 50 and len(want[1]) > 20, (len(want[0]), len(want[1]))

    options = RayOptions(embedders=1, embed_cpus=0.5, load_cpus=0.5)
    with ray_pool(service, address=local_cluster.address, options=options) as pool:  # one pool, both runs
        report = kill_extractor_mid_run(local_cluster, service, "there", paths, pool)
        assert sorted(report.added) == sorted(map(str, paths)) and not report.failed
        assert dump(service, "there") == want
        assert sorted(service.graph(WHO, "there").documents()) == sorted(str(p.resolve()) for p in paths)

        with service.chunks.engine.connect() as conn:
            top = conn.execute(text("SELECT max(id) FROM mxrag_graph_nodes")).scalar()
        again = ingest_on_ray(service, WHO, "there", paths, white_paths=[paths[0].parent], pool=pool)
    assert sorted(again.unchanged) == sorted(map(str, paths)) and not again.added
    assert dump(service, "there") == want
    with service.chunks.engine.connect() as conn:  # no node written again (ids are never reused)
        assert conn.execute(text("SELECT max(id) FROM mxrag_graph_nodes")).scalar() == top


def test_a_graph_in_a_networkx_file_is_refused_with_one_line(ray_cluster: str, stack: Stack, tmp_path: Path) -> None:
    service = KnowledgeService(graph_settings(stack, store="networkx"))
    service.create(WHO, "local", graph=True)
    paths = hotpot_files(tmp_path / "docs", files=1)
    with pytest.raises(ParameterError, match="networkx file on this machine, which --ray cannot build"):
        ingest_on_ray(service, WHO, "local", paths, address=ray_cluster, white_paths=[paths[0].parent])
    assert service.describe(WHO, "local")["documents"] == []


def test_a_graph_in_postgres_goes_with_its_knowledge_base_and_needs_postgres_url(stack: Stack, tmp_path: Path) -> None:
    service = KnowledgeService(graph_settings(stack))
    service.create(WHO, "brief", graph=True)
    assert service.graph_in_postgres(WHO, "brief")
    service.ingest(WHO, "brief", hotpot_files(tmp_path / "docs", files=1), white_paths=[tmp_path / "docs"])
    graph = service.graph(WHO, "brief").graph
    assert graph.graph_name == f"{WHO.user_id}/brief" and graph.count_nodes() > 0
    service.delete(WHO, "brief")
    assert graph.count_nodes() == 0 and graph.count_edges() == 0
    local = KnowledgeService(load_settings(data_dir=tmp_path / "local", graph={"store": "postgres"}))
    with pytest.raises(ParameterError, match=r'store = "postgres" needs \[stores\] postgres_url'):
        local.create(WHO, "brief", graph=True)
    assert local.names(WHO) == []
