# SPDX-License-Identifier: Apache-2.0
"""GraphRAGPipeline's ``age_graph`` and ``graph_type="opengauss"`` (the original's openGauss graph)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.graphrag import GraphRAGPipeline, NetworkxGraphStore
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import HashEmbedding

from .conftest import DIM, PARAGRAPHS, QUESTION


class openGaussAGEGraph:
    """What the original's example passes: a Cypher connection (here without a database behind it)."""

    def __init__(self, graph_name: str) -> None:
        self.graph_name = graph_name
        self.connection = None

    def query(self, cypher: str) -> list[dict]:
        raise AssertionError("mx_rag must not send Cypher")


def test_a_graph_store_given_as_age_graph_is_used(work_dir: Path, llm: Text2TextLLM, docs: dict[str, Path],
                                                  loader_mng: LoaderMng, tmp_path: Path) -> None:
    store = NetworkxGraphStore(tmp_path / "elsewhere.json")
    pipeline = GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, graph_name="hotpotqa", age_graph=store)
    assert pipeline.graph is store
    pipeline.upload_files(list(docs.values()), loader_mng)
    pipeline.build_graph()
    assert pipeline.retrieve_graph(QUESTION)[0] == PARAGRAPHS["krilanovich"]
    assert (tmp_path / "elsewhere.json").exists() and not (work_dir / "hotpotqa.json").exists()


def test_reference_example_with_networkx_ignores_the_age_connection(
        work_dir: Path, llm: Text2TextLLM, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mx_rag.graphrag.age_graph"):
        pipeline = GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, None, graph_name="hotpotqa",
                                    age_graph=openGaussAGEGraph("hotpotqa"))
    assert isinstance(pipeline.graph, NetworkxGraphStore)
    assert "age_graph (openGaussAGEGraph) is ignored" in caplog.text


def test_opengauss_with_an_age_connection_only_is_a_clear_error(work_dir: Path, llm: Text2TextLLM) -> None:
    with pytest.raises(ParameterError, match="cannot be used by mx_rag; keep graph_type='opengauss' and pass "
                                             "postgres_url="):
        GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, graph_type="opengauss",
                         age_graph=openGaussAGEGraph("g"))
    with pytest.raises(ParameterError, match="graph_type 'opengauss' needs postgres_url="):
        GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, graph_type="opengauss")


def test_opengauss_on_postgresql(postgres_url: str, work_dir: Path, llm: Text2TextLLM, docs: dict[str, Path],
                                 loader_mng: LoaderMng) -> None:
    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

    name = f"t_{uuid.uuid4().hex[:12]}"
    pipeline = GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, graph_type="opengauss", graph_name=name,
                                postgres_url=postgres_url, age_graph=openGaussAGEGraph(name))
    try:
        assert isinstance(pipeline.graph, PostgresGraphStore)
        pipeline.upload_files(list(docs.values()), loader_mng)
        pipeline.build_graph()
        assert pipeline.retrieve_graph(QUESTION)[0] == PARAGRAPHS["krilanovich"]
    finally:
        store = pipeline.graph
        store.remove_sources({c for n in store.iter_nodes() for c in n.sources})
