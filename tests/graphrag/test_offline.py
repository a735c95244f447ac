# SPDX-License-Identifier: Apache-2.0
"""Graph RAG without an LLM: the offline extractors (real spaCy, real jieba), the passage walk
(Personalized PageRank, checked against networkx), the modes and ``explain``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import KnowledgeError, ParameterError
from mx_rag.graphrag import Chunk, GraphRAGPipeline, GraphStore
from mx_rag.graphrag.offline_extractor import JiebaExtractor, OfflineExtractor, SpacyExtractor, chunk_language
from mx_rag.graphrag.ppr import personalized_pagerank
from mx_rag.testing import HashEmbedding

from .conftest import DIM, PARAGRAPHS, QUESTION

ZH = "阿里巴巴集团由马云于1999年在杭州创立。腾讯公司总部位于深圳，马化腾是创始人。"


def test_chunk_language_goes_by_script() -> None:
    assert chunk_language("Ada Lovelace was born in London.") == "en"
    assert chunk_language(ZH) == "zh"
    assert chunk_language("OpenAI 发布了新的模型，引起了广泛关注。") == "zh"
    assert chunk_language("1999, 2000") == "en"


def test_spacy_finds_names_and_relates_them_by_their_verb() -> None:
    [result] = SpacyExtractor().extract([Chunk("c", PARAGRAPHS["krilanovich"])])
    names = {e.name for e in result.entities}
    assert {"Grace Krilanovich", "The Orange Eats Creeps", "Two Dollar Radio"} <= names
    assert not any(name.isdigit() for name in names)
    relations = {(r.source, r.target): r.relation for r in result.relations}
    assert relations[("The Orange Eats Creeps", "Two Dollar Radio")] == "publish by"


def test_jieba_finds_people_places_and_organisations() -> None:
    [result] = JiebaExtractor().extract([Chunk("c", ZH)])
    types = {e.name: e.type for e in result.entities}
    assert types["马云"] == "person" and types["杭州"] == "place" and "深圳" in types
    assert ("腾讯", "深圳", "位于") in {(r.source, r.target, r.relation) for r in result.relations}
    assert all(r.source != r.target for r in result.relations)


def test_offline_extractor_routes_each_chunk_and_keeps_the_order() -> None:
    chunks = [Chunk("a", ZH), Chunk("b", "Ada Lovelace was born in London."), Chunk("c", "")]
    results = OfflineExtractor().extract(chunks)
    assert len(results) == 3
    assert "马云" in {e.name for e in results[0].entities}
    assert {"Ada Lovelace", "London"} <= {e.name for e in results[1].entities}
    assert results[2].entities == ()
    assert OfflineExtractor().extract(chunks) == results  # deterministic


def test_personalized_pagerank_matches_networkx() -> None:
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 3, 1.0), (3, 0, 0.5), (1, 3, 1.0)]
    reset = np.array([1.0, 0.0, 0.0, 0.2, 0.0])  # node 4 has no edges
    ours = personalized_pagerank(5, edges, reset, damping=0.5, max_iterations=200, tolerance=1e-12)
    graph = nx.Graph()
    graph.add_nodes_from(range(5))
    graph.add_weighted_edges_from(edges)
    theirs = nx.pagerank(graph, alpha=0.5, personalization=dict(enumerate(reset)), weight="weight", tol=1e-12)
    assert ours == pytest.approx([theirs[i] for i in range(5)], abs=1e-8)
    assert personalized_pagerank(3, [], np.zeros(3)).tolist() == [0.0, 0.0, 0.0]


@pytest.fixture
def offline(work_dir: Path, docs: dict[str, Path], loader_mng: LoaderMng) -> Callable[..., GraphRAGPipeline]:
    def make(**kwargs: object) -> GraphRAGPipeline:
        return GraphRAGPipeline(work_dir, None, HashEmbedding(DIM), DIM, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def offline_built(offline: Callable[..., GraphRAGPipeline], docs: dict[str, Path],
                  loader_mng: LoaderMng) -> GraphRAGPipeline:  # fmt: skip
    pipeline = offline()
    pipeline.upload_files(list(docs.values()), loader_mng)
    estimate = pipeline.estimate_build()
    assert (estimate.documents, estimate.chunks_to_extract, estimate.llm_calls) == (4, 4, 0)
    pipeline.build_graph()
    return pipeline


@pytest.mark.parametrize("mode", ["graph", "mix", "local"])
def test_every_mode_returns_passages_with_their_source(offline_built: GraphRAGPipeline, docs: dict[str, Path],
                                                      mode: str) -> None:  # fmt: skip
    found = offline_built.as_retriever(mode=mode, reranker_top_k=2).invoke(QUESTION)
    assert 1 <= len(found) <= 2
    sources = {str(p.resolve()) for p in docs.values()}
    for doc in found:
        assert doc.metadata["source"] in sources and doc.metadata["type"] == "chunk"
        assert isinstance(doc.metadata["entities"], list) and doc.metadata["score"] > 0
    if mode != "local":  # local links the 40 nearest names: with hash embeddings, noise
        assert found[0].page_content == PARAGRAPHS["krilanovich"]


def test_the_walk_reaches_the_second_hop(offline_built: GraphRAGPipeline) -> None:
    """Without dense seeds, the publisher's paragraph is found only through the graph."""
    retriever = offline_built.as_retriever(mode="graph", passage_weight=0.0, reranker_top_k=2,
                                           similarity_tail_threshold=0.99)  # names in the question only
    assert [d.page_content for d in retriever.invoke(QUESTION)] == [PARAGRAPHS["krilanovich"],
                                                                     PARAGRAPHS["two_dollar_radio"]]


def test_explain_names_the_entities_of_the_returned_passages(offline_built: GraphRAGPipeline) -> None:
    retriever = offline_built.as_retriever(mode="graph", reranker_top_k=2)
    view = retriever.explain(QUESTION)
    returned = [d["chunk_id"] for d in view["documents"]]
    assert view["mode"] == "graph" and len(returned) == 2
    assert [d["text"] for d in view["documents"]] == [d.page_content for d in retriever.invoke(QUESTION)]
    labels = {n["label"]: n for n in view["nodes"]}
    assert labels["Grace Krilanovich"]["seed"] and returned[0] in labels["Grace Krilanovich"]["chunk_ids"]
    assert returned[0] in labels["Two Dollar Radio"]["chunk_ids"]
    assert all(set(n["chunk_ids"]) <= set(returned) for n in view["nodes"])
    names = {n["name"] for n in view["nodes"]}
    assert view["edges"] and all(e["source"] in names and e["target"] in names for e in view["edges"])
    assert {e["kind"] for e in view["edges"]} <= {"relation", "synonym"}
    local = offline_built.as_retriever(mode="local", retrieval_top_k=1).explain(QUESTION, k=1)
    assert local["mode"] == "local" and len(local["documents"]) == 1 and local["nodes"]


def test_incremental_build_and_delete_keep_the_passage_vectors(offline: Callable[..., GraphRAGPipeline],
                                                               docs: dict[str, Path], loader_mng: LoaderMng,
                                                               work_dir: Path) -> None:  # fmt: skip
    pipeline = offline()
    pipeline.upload_files([docs["krilanovich"]], loader_mng)
    pipeline.build_graph()
    pipeline.upload_files([docs["two_dollar_radio"], docs["gyldendal"]], loader_mng)
    pipeline.build_graph()
    retriever = pipeline.as_retriever(mode="mix", reranker_top_k=5)
    assert len(retriever.invoke(QUESTION)) == 3
    pipeline.delete_document(docs["two_dollar_radio"])
    again = offline()  # reopened from work_dir
    contexts = [d.page_content for d in again.as_retriever(mode="mix", reranker_top_k=5).invoke(QUESTION)]
    assert PARAGRAPHS["two_dollar_radio"] not in contexts and len(contexts) == 2
    assert (work_dir / "graph_chunk_vectors.index").exists()
    with pytest.raises(KnowledgeError):
        again.delete_document(docs["two_dollar_radio"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"mode": "global"}, "mode"), ({"mode": "graph", "use_text": False}, "use_text=False"),
     ({"damping": 1.0}, "damping"), ({"synonym_threshold": 2}, "synonym_threshold"),
     ({"dense_top_k": 0}, "dense_top_k"), ({"dense_weight": -1}, "dense_weight")],
)  # fmt: skip
def test_retriever_options_are_checked(offline_built: GraphRAGPipeline, kwargs: dict[str, object],
                                       match: str) -> None:  # fmt: skip
    with pytest.raises(ParameterError, match=match):
        offline_built.as_retriever(**kwargs)


def test_same_ranking_on_postgres(postgres_url: str, offline_built: GraphRAGPipeline, tmp_path: Path,
                                  docs: dict[str, Path], loader_mng: LoaderMng) -> None:  # fmt: skip
    import uuid

    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

    store: GraphStore = PostgresGraphStore(postgres_url, f"t_{uuid.uuid4().hex[:12]}")
    try:
        folder = tmp_path / "pg"
        folder.mkdir()
        pipeline = GraphRAGPipeline(folder, None, HashEmbedding(DIM), DIM, graph_store=store)
        pipeline.upload_files(list(docs.values()), loader_mng)
        pipeline.build_graph()
        for mode in ("graph", "mix", "local"):
            ours = [(d.page_content, d.metadata["score"]) for d in pipeline.as_retriever(mode=mode).invoke(QUESTION)]
            theirs = offline_built.as_retriever(mode=mode).invoke(QUESTION)
            assert ours == [(d.page_content, d.metadata["score"]) for d in theirs]
    finally:
        store.remove_sources({c for n in store.iter_nodes() for c in n.sources})
        store.close()


def test_corag_reads_the_graph_through_its_document_source(offline_built: GraphRAGPipeline) -> None:
    from mx_rag.retrievers.sources import RetrieverSource

    retriever = offline_built.as_retriever(mode="mix")
    found = RetrieverSource(retriever).retrieve(QUESTION, top_k=2)
    expected = retriever.invoke(QUESTION, k=2)
    assert [(d.id, d.text) for d in found] == [(d.metadata["chunk_id"], d.page_content) for d in expected]
