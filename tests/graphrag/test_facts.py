# SPDX-License-Identifier: Apache-2.0
"""Fact (triple) embeddings, HippoRAG 2's query-to-fact linking: the fact vectors follow builds and
deletions, and with the real offline extractor and real MiniLM the nearest facts seed the walk
with the bridging entity of a two-hop question."""

from __future__ import annotations

from pathlib import Path

from mx_rag.document import LoaderMng
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.graphrag.vectors import fact_key, fact_texts
from mx_rag.testing import HashEmbedding

from .conftest import DIM, TOY, TOY_QUESTION, write_texts


def _stems(docs: list) -> list[str]:  # type: ignore[type-arg]
    return [Path(d.metadata["source"]).stem for d in docs]


def test_fact_key_is_a_positive_63_bit_hash() -> None:
    keys = {fact_key(f"a {n} b") for n in range(1000)}
    assert len(keys) == 1000 and all(0 < k < 2**63 for k in keys)
    assert fact_key("x") == fact_key("x")


def test_fact_vectors_follow_builds_and_deletions(tmp_path: Path, work_dir: Path) -> None:
    paths = write_texts(tmp_path / "toy", TOY)
    loader = LoaderMng.with_defaults(chunk_size=2000, chunk_overlap=0)
    pipeline = GraphRAGPipeline(work_dir, None, HashEmbedding(DIM), DIM)
    pipeline.upload_files([paths["zentrix"], paths["halvex"]], loader)
    pipeline.build_graph()
    stored = pipeline._facts
    assert stored.count() == 0  # fact vectors are made once a retriever asks for them
    pipeline.as_retriever(mode="graph", fact_top_k=5).invoke(TOY_QUESTION)
    texts, ends = fact_texts(pipeline.graph)
    assert texts and set(stored.get_all_ids()) == set(texts) == set(ends)
    assert any("Marta Okonkwo" in t and "Zentrix Labs" in t for t in texts.values())
    pipeline.upload_files([paths["okonkwo"], paths["berlin"]], loader)  # an incremental build adds facts
    pipeline.build_graph()
    grown, _ = fact_texts(pipeline.graph)
    assert set(stored.get_all_ids()) == set(grown) and len(grown) > len(texts)
    pipeline.delete_document(paths["halvex"])  # and a deletion drops the facts only it stated
    left, _ = fact_texts(pipeline.graph)
    assert set(stored.get_all_ids()) == set(left)
    assert not any("Halvex" in t for t in left.values())
    reopened = GraphRAGPipeline(work_dir, None, HashEmbedding(DIM), DIM)  # the vectors persist
    assert set(reopened._facts.get_all_ids()) == set(left)
    assert reopened.as_retriever(fact_top_k=3).invoke(TOY_QUESTION)


def test_the_nearest_facts_seed_the_bridging_entity(minilm_toy: GraphRAGPipeline) -> None:
    """The question names neither "Zentrix Labs" nor the founder; the fact "Zentrix Labs found
    by Marta Okonkwo" is among the nearest, so its ends seed the walk, which reaches the founder's
    own passage (the second hop); entity-name linking alone finds no seed at all."""
    options = {"mode": "graph", "reranker_top_k": 6, "passage_weight": 0.0, "retrieval_top_k": 1,
               "similarity_tail_threshold": 0.99}  # fmt: skip
    with_facts = minilm_toy.as_retriever(fact_top_k=5, **options)
    without = minilm_toy.as_retriever(fact_top_k=0, **options)
    seeds = with_facts.explain(TOY_QUESTION)
    seeded = {n["label"] for n in seeds["nodes"] if n["seed"]}
    assert {"Marta Okonkwo", "Zentrix Labs"} <= seeded
    ranked = _stems(with_facts.invoke(TOY_QUESTION))
    assert "zentrix" in ranked[:2] and "okonkwo" in ranked[:4]
    unlinked = _stems(without.invoke(TOY_QUESTION))  # no name of the question is a node: nothing seeds
    assert "okonkwo" not in unlinked
    mixed = _stems(minilm_toy.as_retriever(mode="mix", fact_top_k=5, reranker_top_k=6).invoke(TOY_QUESTION))
    assert "zentrix" in mixed[:2] and "okonkwo" in mixed
