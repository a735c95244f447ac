# SPDX-License-Identifier: Apache-2.0
"""An interrupted build or deletion is finished when the pipeline reopens (the change journal).

Regression tests for what ``test_graph_kill.py`` found: a worker killed with ``SIGKILL`` at a
named point (``MXRAG_KILL_AT``) of one operation, then the pipeline reopened here. Before the
journal, each of these left the graph, the chunk registry and the node vectors disagreeing:

* killed after the graph committed a build, before the registry was saved: nodes and edges of a
  document that is not registered (or of the version it replaced); no vectors for them;
* killed after the graph committed a deletion: a registered document whose nodes are gone, and
  the vectors of the deleted nodes;
* killed before the node vectors were saved: nodes without a vector (a later deletion run again
  raised ``KnowledgeError`` and never repaired them).

And one found without a kill: a build replacing two documents between which a text moved lost
that text's cached extraction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mx_rag.errors import ParameterError, StorageError
from mx_rag.graphrag import Entity, Extraction, GraphRAGPipeline
from mx_rag.testing import HashEmbedding
from tests.graphrag.kill_harness import (
    DIM,
    Kill,
    NameExtractor,
    Setup,
    Worker,
    check_consistency,
    child_url,
    corpus,
    expected_chunks,
    loader_mng,
    open_pipeline,
    open_registry,
    perform,
    registered,
    reset,
    wait_sessions_gone,
)

TEXTS = corpus()
BUILD_NOLAN = {"op": "build", "docs": {"nolan.txt": 0}, "index": 0}


@pytest.fixture(params=["networkx", "postgres"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    (tmp_path / "work").mkdir()
    (tmp_path / "docs").mkdir()
    found = Setup(request.param, tmp_path / "work", tmp_path / "docs", url, f"rec_{uuid.uuid4().hex[:10]}")
    yield found
    if url:
        reset(found)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    found = Worker(tmp_path_factory.mktemp("worker") / "worker.log")
    yield found
    found.close()


def run(setup: Setup, *ops: dict[str, Any]) -> None:
    """Run operations in this process, to the state a scenario starts from."""
    pipeline = open_pipeline(setup)
    try:
        for op in ops:
            perform(pipeline, op, setup.docs_dir, TEXTS, loader_mng())
    finally:
        pipeline.graph.close()


def kill_in(setup: Setup, worker: Worker, op: dict[str, Any], point: str, plan: bool = True) -> None:
    """A worker runs ``op`` (or, with ``plan=False``, only reopens) and kills itself at ``point``."""
    application = f"mxrag_rec_{uuid.uuid4().hex[:8]}"
    url = child_url(setup.postgres_url, application) if setup.postgres_url else None
    name, _, n = point.rpartition(":")
    result = worker.run({"setup": setup.to_json(), "plan": [op] if plan else [], "postgres_url": url},
                        Kill(name, int(n)))  # fmt: skip
    assert result.killed_at == point, result
    if url:
        wait_sessions_gone(setup.postgres_url or "", application)


def documents(setup: Setup, model: dict[str, int]) -> dict[str, list[tuple[str, str]]]:
    return expected_chunks(setup, model, TEXTS, setup.work_dir.parent / "scratch", {})


def reopened_state(setup: Setup) -> dict[str, list[tuple[str, str]]]:
    """Reopen the pipeline (which finishes the interrupted change); assert the stores agree."""
    open_pipeline(setup).graph.close()
    assert check_consistency(setup) == []
    assert not (setup.work_dir / f"{setup.graph_name}_journal.json").exists()
    return registered(setup)


@pytest.mark.parametrize("point", ["graph.after_commit:1", "vectors.save:1", "vectors.saved:1"])
def test_a_build_killed_after_the_graph_commit_is_finished_on_reopening(setup: Setup, worker: Worker,
                                                                        point: str) -> None:  # fmt: skip
    kill_in(setup, worker, BUILD_NOLAN, point)
    assert reopened_state(setup) == documents(setup, {"nolan.txt": 0})


@pytest.mark.parametrize("point", ["graph.after_commit:1", "vectors.save:1"])
def test_a_rebuild_killed_after_the_graph_commit_leaves_the_new_version(setup: Setup, worker: Worker,
                                                                        point: str) -> None:  # fmt: skip
    run(setup, BUILD_NOLAN)
    kill_in(setup, worker, {"op": "build", "docs": {"nolan.txt": 1}, "index": 1}, point)
    assert reopened_state(setup) == documents(setup, {"nolan.txt": 1})


@pytest.mark.parametrize("point", ["graph.after_commit:1", "vectors.save:1"])
def test_a_deletion_killed_after_the_graph_commit_is_finished_on_reopening(setup: Setup, worker: Worker,
                                                                           point: str) -> None:  # fmt: skip
    run(setup, {"op": "build", "docs": {"nolan.txt": 0, "myths.md": 0}, "index": 0})
    kill_in(setup, worker, {"op": "delete", "doc": "myths.md", "index": 1}, point)
    assert reopened_state(setup) == documents(setup, {"nolan.txt": 0})


def test_a_reopening_killed_while_finishing_a_change_is_finished_by_the_next(setup: Setup,
                                                                             worker: Worker) -> None:  # fmt: skip
    run(setup, BUILD_NOLAN)
    kill_in(setup, worker, {"op": "build", "docs": {"nolan.txt": 2, "languages.txt": 0}, "index": 1},
            "graph.after_commit:1")  # fmt: skip
    kill_in(setup, worker, {}, "graph.after_commit:1", plan=False)  # the reopening's own commit
    kill_in(setup, worker, {}, "vectors.save:1", plan=False)
    assert reopened_state(setup) == documents(setup, {"nolan.txt": 2, "languages.txt": 0})


def test_a_build_killed_while_extracting_leaves_nothing_and_runs_again(setup: Setup, worker: Worker) -> None:
    run(setup, BUILD_NOLAN)
    op = {"op": "build", "docs": {"languages.txt": 1, "norwich.txt": 0}, "index": 1}
    kill_in(setup, worker, op, "extract:2")
    assert reopened_state(setup) == documents(setup, {"nolan.txt": 0})
    run(setup, op)
    assert check_consistency(setup) == []
    assert registered(setup) == documents(setup, {"nolan.txt": 0, "languages.txt": 1, "norwich.txt": 0})


# -- without a kill ------------------------------------------------------------------------------


def test_a_text_moving_between_documents_of_one_build_keeps_its_cached_extraction(tmp_path: Path) -> None:
    """myths.md version 1 and nolan.txt version 0 share a paragraph: a build that moves it from
    the one to the other dropped its extraction (the registry pruned it before registering the
    document that uses it)."""
    (tmp_path / "work").mkdir()
    (tmp_path / "docs").mkdir()
    setup = Setup("networkx", tmp_path / "work", tmp_path / "docs")
    run(setup, {"op": "build", "docs": {"myths.md": 1, "nolan.txt": 1}, "index": 0},
        {"op": "build", "docs": {"myths.md": 0, "nolan.txt": 0}, "index": 1})  # fmt: skip
    registry = open_registry(setup)
    for document in registry.documents():
        for record in registry.chunks(registry.chunk_ids(document)).values():
            assert registry.cached(record.hash) is not None, (Path(document).name, record.text[:60])
    assert check_consistency(setup) == []


class Failing:
    """``encrypt_fn`` (identity) that raises while ``on`` for texts holding every one of ``markers``."""

    def __init__(self, *markers: str) -> None:
        self.markers, self.on = markers, False

    def __call__(self, text: str) -> str:
        if self.on and all(m in text for m in self.markers):
            raise OSError(f"no space left writing {self.markers}")
        return text


def failing_pipeline(setup: Setup, encrypt: Failing) -> GraphRAGPipeline:
    return GraphRAGPipeline(setup.work_dir, None, HashEmbedding(DIM), DIM, graph_name=setup.graph_name,
                            extractor=NameExtractor(), devs=None, encrypt_fn=encrypt,
                            decrypt_fn=lambda text: text)  # fmt: skip


def test_a_change_failed_after_the_graph_commit_is_finished_by_the_next_call(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "docs").mkdir()
    setup = Setup("networkx", tmp_path / "work", tmp_path / "docs")
    encrypt = Failing('"format":"mxrag-graph-chunks"', "myths.md")  # saving the registry with myths.md fails
    pipeline = failing_pipeline(setup, encrypt)
    loader = loader_mng()
    perform(pipeline, BUILD_NOLAN, setup.docs_dir, TEXTS, loader)
    encrypt.on = True
    with pytest.raises(OSError, match="no space"):
        perform(pipeline, {"op": "build", "docs": {"myths.md": 0}, "index": 1}, setup.docs_dir, TEXTS, loader)
    assert check_consistency(setup) != []  # the graph has myths.md, the registry does not
    encrypt.on = False
    pipeline.delete_document(setup.docs_dir / "nolan.txt")  # finishes the failed build first
    assert check_consistency(setup) == []
    assert registered(setup) == documents(setup, {"myths.md": 0})


def test_a_change_refused_inside_the_graph_batch_is_undone(postgres_url: str, tmp_path: Path) -> None:
    """PostgreSQL refuses a NUL character: the batch rolls back, the journal goes, nothing changed."""

    class NulExtractor(NameExtractor):
        def extract(self, chunks: Any) -> list[Extraction]:
            return [Extraction((Entity("bad\x00name"),)) for _ in chunks]

    (tmp_path / "work").mkdir()
    (tmp_path / "docs").mkdir()
    setup = Setup("postgres", tmp_path / "work", tmp_path / "docs", postgres_url, f"rec_{uuid.uuid4().hex[:10]}")
    try:
        run(setup, BUILD_NOLAN)
        pipeline = GraphRAGPipeline(setup.work_dir, None, HashEmbedding(DIM), DIM, graph_type="postgres",
                                    graph_name=setup.graph_name, postgres_url=postgres_url,
                                    extractor=NulExtractor(), devs=None)  # fmt: skip
        with pytest.raises(ParameterError, match="NUL"):
            perform(pipeline, {"op": "build", "docs": {"myths.md": 0}, "index": 1}, setup.docs_dir, TEXTS,
                    loader_mng())  # fmt: skip
        pipeline.graph.close()
        assert not (setup.work_dir / f"{setup.graph_name}_journal.json").exists()
        assert reopened_state(setup) == documents(setup, {"nolan.txt": 0})
    finally:
        reset(setup)


def test_a_damaged_journal_is_refused_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "docs").mkdir()
    setup = Setup("networkx", tmp_path / "work", tmp_path / "docs")
    run(setup, BUILD_NOLAN)
    (setup.work_dir / f"{setup.graph_name}_journal.json").write_text('{"format": "mxrag-graph-journal", "ver')
    with pytest.raises(StorageError, match="graph journal"):
        open_pipeline(setup)
