# SPDX-License-Identifier: Apache-2.0
"""The pipeline with its graph in PostgreSQL (skipped without ``MXRAG_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import HashEmbedding

from .conftest import DIM, PARAGRAPHS, QUESTION


@pytest.fixture
def graph_name(postgres_url: str) -> Iterator[str]:
    """A graph name unique to the test; its rows are removed afterwards."""
    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    store = PostgresGraphStore(postgres_url, name)
    try:
        store.remove_sources({c for n in store.iter_nodes() for c in n.sources})
    finally:
        store.close()


def test_pipeline_on_postgres(postgres_url: str, graph_name: str, work_dir: Path, llm: Text2TextLLM,
                              docs: dict[str, Path], loader_mng: LoaderMng) -> None:
    def make() -> GraphRAGPipeline:
        return GraphRAGPipeline(work_dir, llm, HashEmbedding(DIM), DIM, graph_type="postgres", graph_name=graph_name,
                                postgres_url=postgres_url)

    pipeline = make()
    pipeline.upload_files(list(docs.values()), loader_mng)
    pipeline.build_graph(max_workers=4)
    contexts = pipeline.retrieve_graph(QUESTION)
    assert contexts[0] == PARAGRAPHS["krilanovich"] and PARAGRAPHS["two_dollar_radio"] in contexts
    assert not (work_dir / f"{graph_name}.json").exists()
    assert make().retrieve_graph(QUESTION) == contexts
    assert pipeline.delete_document(docs["two_dollar_radio"]) == ["columbus, ohio", "eric obenauf"]
    assert PARAGRAPHS["two_dollar_radio"] not in make().retrieve_graph(QUESTION)
