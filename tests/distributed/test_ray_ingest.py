# SPDX-License-Identifier: Apache-2.0
"""Scale-out ingestion on a local Ray cluster into the real PostgreSQL and Milvus: exactly once.

Each check counts what is really stored: PostgreSQL chunk rows, Milvus ``count(*)`` and ids, and
the registry's documents, against the chunks mx_rag's own loader and splitter make of the files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest
from sqlalchemy import text

from mx_rag.app.scale_out import ingest_on_ray, ray_pool
from mx_rag.app.service import KnowledgeService
from mx_rag.app.settings import ServerSettings, load_settings
from mx_rag.app.users import Principal
from mx_rag.distributed import RayOptions, chunk_id
from mx_rag.document import LoaderMng
from mx_rag.embedding.local.model_info import MINILM_NAME
from mx_rag.knowledge.ingest import file_digest
from tests.distributed.conftest import Stack, add_worker_node

pytestmark = pytest.mark.slow

KB = "scaled"
WORDS = ("granite", "basalt", "quartz", "feldspar", "mica", "shale", "slate", "marble", "gneiss", "schist",
         "pumice", "obsidian", "chalk", "flint", "jasper", "agate", "onyx", "opal", "garnet", "topaz")


def corpus(folder: Path, files: int = 6, paragraphs: int = 9, seed: int = 0) -> list[Path]:
    """Markdown files of distinct sentences (a few chunks each at the default chunk size)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        lines = [f"# Rocks {f}", ""]
        for p in range(paragraphs):
            words = [WORDS[(seed + f * 7 + p * 3 + i) % len(WORDS)] for i in range(24)]
            lines += [f"Section {f}.{p} ({seed}): " + " ".join(words) + f". Note {f * 100 + p} ends here.", ""]
        path = folder / f"rocks-{f}.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        paths.append(path)
    return paths


def settings(stack: Stack) -> ServerSettings:
    return load_settings(data_dir=stack.data_dir, embedding={"model": MINILM_NAME}, stores={
        "postgres_url": stack.postgres_url, "registry_url": stack.postgres_url,
        "milvus_url": stack.milvus_uri, "milvus_collection": stack.collection})


def expected(service: KnowledgeService, paths: list[Path]) -> dict[str, list[str]]:
    """Each file's chunk texts as the in-process ingestion makes them."""
    loader = LoaderMng.with_defaults(chunk_size=service.settings.upload.chunk_size,
                                     chunk_overlap=service.settings.upload.chunk_overlap)
    return {str(p.resolve()): [d.page_content for d in loader.load_and_split(str(p)) if d.page_content.strip()]
            for p in paths}


def stored(service: KnowledgeService) -> dict[str, Any]:
    """What the three stores hold for the knowledge base."""
    engine = service.chunks.engine
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT chunk_id, document_id, chunk_content FROM chunks_table")).all()
        docs = conn.execute(text("SELECT document_id, document_file_path, status, knowledge_id FROM document_table"))
        registry = {r.document_id: r for r in docs}
    ready = {r.document_file_path: r.document_id for r in registry.values()
             if r.status == "ready" and r.knowledge_id > 0}
    by_path: dict[str, list[str]] = {path: [] for path in ready}
    owner = {doc: path for path, doc in ready.items()}
    for row in sorted(rows, key=lambda r: r.chunk_id):
        if row.document_id in owner:
            by_path[owner[row.document_id]].append(row.chunk_content)
    vector_ids = service.vectors.get_all_ids()
    return {"chunk_ids": [r.chunk_id for r in rows], "vector_ids": vector_ids, "vectors": service.vectors.count(),
            "registry": registry, "ready": ready, "texts": by_path,
            "stray": [r for r in rows if r.document_id not in owner]}


def assert_exact(service: KnowledgeService, want: dict[str, list[str]]) -> None:
    got = stored(service)
    total = sum(len(v) for v in want.values())
    assert len(got["chunk_ids"]) == got["vectors"] == len(got["vector_ids"]) == total
    assert Counter(got["vector_ids"]) == Counter(got["chunk_ids"]) and len(set(got["chunk_ids"])) == total
    assert not got["stray"] and set(got["ready"]) == set(want) and len(got["registry"]) == len(want)
    for path, texts in want.items():
        assert sorted(got["texts"][path]) == sorted(texts)


def run(service: KnowledgeService, paths: list[Path], address: str, pool: Any = None, **options: float) -> Any:
    who = Principal.local()
    if KB not in service.names(who):
        service.create(who, KB)
    return ingest_on_ray(service, who, KB, paths, address=address, white_paths=[paths[0].parent],
                         options=RayOptions(**options), pool=pool)


def test_a_clean_run_is_exact_a_rerun_skips_it_and_a_changed_file_replaces_its_chunks(ray_cluster: str, stack: Stack,
                                                                                       tmp_path: Path) -> None:
    service = KnowledgeService(settings(stack))
    paths = corpus(tmp_path / "docs")
    want = expected(service, paths)
    with ray_pool(service, address=ray_cluster, options=RayOptions(embedders=1)) as pool:  # one pool, three runs
        check_three_runs(service, paths, want, ray_cluster, pool)


def check_three_runs(service: KnowledgeService, paths: list[Path], want: dict[str, list[str]], ray_cluster: str,
                     pool: Any) -> None:
    report = run(service, paths, ray_cluster, pool)
    assert sorted(report.added) == sorted(map(str, paths)) and not report.failed
    assert_exact(service, want)
    kb = service.open(Principal.local(), KB)
    assert kb.check().ok
    ids = set(stored(service)["chunk_ids"])
    path = str(paths[0].resolve())
    assert chunk_id(kb.knowledge_id, path, file_digest(paths[0]), 0) in ids  # deterministic ids
    again = run(service, paths, ray_cluster, pool)
    assert sorted(again.unchanged) == sorted(map(str, paths)) and not again.added
    assert_exact(service, want)
    hits = service.retriever(Principal.local(), KB).invoke("Note 203 ends here")
    assert hits and hits[0].metadata.get("source", "").endswith("rocks-2.md")
    digest = file_digest(paths[0])
    old = {chunk_id(kb.knowledge_id, path, digest, i) for i in range(len(want[path]))}
    corpus(paths[0].parent, files=1, paragraphs=14, seed=5)  # rocks-0.md now longer, other words
    want = expected(service, paths)
    report = run(service, paths, ray_cluster, pool)
    assert report.replaced == [str(paths[0])] and sorted(report.unchanged) == sorted(map(str, paths[1:]))
    assert_exact(service, want)
    assert old <= ids and not old & set(stored(service)["chunk_ids"])  # the old version's chunks are gone


def chunk_rows(service: KnowledgeService) -> int:
    """PostgreSQL's chunk rows: a cheap poll (``stored`` lists Milvus ids, about a second)."""
    with service.chunks.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM chunks_table")).scalar() or 0)


def node_processes(node: Any) -> dict[int, str]:
    """The processes a Ray node's raylet started (its workers and actors): pid -> command line."""
    from ray._private import ray_constants

    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    found = {}
    for child in psutil.Process(raylet).children(recursive=True):
        try:
            found[child.pid] = " ".join(child.cmdline())
        except psutil.Error:
            continue
    return found


def embedder_pids(cluster: Any) -> list[int]:
    """The embedding actors' processes of this cluster (not of another session's on the machine)."""
    return sorted(pid for node in [cluster.head_node, *cluster.worker_nodes]
                  for pid, line in node_processes(node).items() if "Embedder" in line)


def kill_actor_mid_run(cluster: Any, service: KnowledgeService, paths: list[Path], rows_before: int) -> Any:
    """Ingest ``paths`` in batches of 4 chunks, SIGKILL the embedding actor's process once more than
    ``rows_before`` chunk rows are stored (mid-run); the run's report (the run must go on)."""
    done: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: done.update(report=run(service, paths, cluster.address, batch_chunks=4)))
    worker.start()
    killed = []
    deadline = time.monotonic() + 120
    while worker.is_alive() and not killed and time.monotonic() < deadline:
        pids = embedder_pids(cluster)
        if pids and chunk_rows(service) > rows_before:  # some chunks written, the actor still busy
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
        time.sleep(0.05)
    worker.join(180)
    assert killed, "the run ended before an embedding actor could be killed"
    return done["report"]


def kill_node_mid_run(cluster: Any, service: KnowledgeService, paths: list[Path], rows_before: int,
                      actor_first: bool = False) -> Any:
    """Ingest ``paths`` with two embedding actors of half a CPU each (spread: one per node) in
    batches of 4 chunks; once more than ``rows_before`` chunk rows are stored, kill the worker
    node's processes with SIGKILL, raylet first (as a machine that loses power), then add a new
    worker node (as an autoscaler would). With ``actor_first``, an embedding actor's process (the
    head node's where it has one) is SIGKILLed first, and the worker node once more rows are
    stored after that. The run's report (the run must go on)."""
    done: dict[str, Any] = {}

    def ingest() -> None:
        try:
            done["report"] = run(service, paths, cluster.address, batch_chunks=4, embedders=2, embed_cpus=0.5,
                                 load_cpus=0.5)
        except BaseException as exc:  # re-raised below, in the test's thread
            done["error"] = exc

    worker = threading.Thread(target=ingest)
    worker.start()
    node = next(iter(cluster.worker_nodes))
    actor_killed, node_killed = not actor_first, False
    deadline = time.monotonic() + 150
    while worker.is_alive() and not node_killed and time.monotonic() < deadline:
        rows = chunk_rows(service)
        if not actor_killed:
            # the head node's actor where it has one: the worker node's goes on, so the node dies
            # while it holds work
            on_head = [pid for pid, line in node_processes(cluster.head_node).items() if "Embedder" in line]
            pids = on_head or embedder_pids(cluster)
            if pids and rows > rows_before:
                os.kill(pids[0], signal.SIGKILL)
                actor_killed, rows_before = True, rows
        elif rows > rows_before:
            cluster.remove_node(node, allow_graceful=False)
            node_killed = True
        time.sleep(0.05)
    if node_killed:
        add_worker_node(cluster)
    worker.join(240)
    assert actor_killed and node_killed, (
        f"the run ended before the actor ({actor_killed}) and the worker node ({node_killed}) could be killed: "
        f"{chunk_rows(service)} chunk rows stored, the run {'ended' if 'report' in done else 'still going'}")
    if "error" in done:
        raise done["error"]
    return done["report"]


def kill_driver_mid_run(stack: Stack, paths: list[Path], address: str, service: KnowledgeService,
                        rows_before: int) -> None:
    """Run ``mxrag ingest --ray`` in a process and SIGKILL it once more than ``rows_before`` chunk
    rows are stored."""
    env = stack.env() | {"MXRAG_EMBEDDING__MODEL": MINILM_NAME, "MXRAG_INGEST__RAY_BATCH_CHUNKS": "4",
                         "MXRAG_INGEST__RAY_EMBEDDERS": "1"}
    command = [sys.executable, "-c", "from mx_rag.cli.main import app; app()", "ingest", *map(str, paths),
               "--kb", KB, "--ray", address]
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 150
        while (driver.poll() is None and time.monotonic() < deadline
               and chunk_rows(service) <= rows_before):
            time.sleep(0.01)
        assert driver.poll() is None, driver.stderr.read().decode() if driver.stderr else ""
        driver.kill()
    finally:
        driver.wait(30)


def ready_documents_complete(service: KnowledgeService, *versions: dict[str, list[str]]) -> int:
    """Check that each ready document holds all the chunks of one of ``versions``; how many are ready."""
    seen = stored(service)
    for path, texts in seen["texts"].items():
        assert any(sorted(texts) == sorted(version[path]) for version in versions), path
    return len(seen["ready"])


def test_a_killed_driver_leaves_no_half_visible_document_and_a_rerun_completes(ray_cluster: str, stack: Stack,
                                                                                tmp_path: Path) -> None:
    service = KnowledgeService(settings(stack))
    paths = corpus(tmp_path / "docs", files=8)
    want = expected(service, paths)
    service.create(Principal.local(), KB)
    kill_driver_mid_run(stack, paths, ray_cluster, service, 0)
    assert ready_documents_complete(service, want) < len(want)
    report = run(KnowledgeService(settings(stack)), paths, ray_cluster)
    assert not report.failed and sorted(report.added + report.unchanged) == sorted(map(str, paths))
    assert_exact(service, want)


def test_a_killed_actor_then_a_killed_worker_node_lose_nothing_and_write_nothing_twice(
        local_cluster: Any, stack: Stack, tmp_path: Path) -> None:
    service = KnowledgeService(settings(stack))
    paths = corpus(tmp_path / "docs", files=24)
    want = expected(service, paths)
    report = kill_node_mid_run(local_cluster, service, paths, 0, actor_first=True)
    assert not report.failed
    assert_exact(service, want)
