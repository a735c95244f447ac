# SPDX-License-Identifier: Apache-2.0
"""The keyword side of ``mode="mix"``: BM25 over the chunk texts, fused with the graph and dense
rankings, and kept in step with builds and deletions (real spaCy, real MiniLM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.graphrag.registry import chunk_number

from .conftest import TOY, write_texts

BERLIN_QUESTION = "Which company opened an office in Berlin?"


def _stems(docs: list) -> list[str]:  # type: ignore[type-arg]
    return [Path(d.metadata["source"]).stem for d in docs]


def test_mix_ranks_passages_sharing_the_questions_words_higher(minilm_toy: GraphRAGPipeline) -> None:
    """Without the keyword side, Halvex (no word of the question) is second; with it, the two
    passages that say "company" come right after the Berlin office's (second hop off in both)."""
    plain = minilm_toy.as_retriever(mode="mix", keyword_top_k=0, hop_weight=0, reranker_top_k=6)
    assert _stems(plain.invoke(BERLIN_QUESTION))[:2] == ["berlin", "halvex"]
    fused = _stems(minilm_toy.as_retriever(mode="mix", hop_weight=0, reranker_top_k=6).invoke(BERLIN_QUESTION))
    assert fused[0] == "berlin" and set(fused[1:3]) == {"kestrel", "zentrix"}
    graph = _stems(minilm_toy.as_retriever(mode="graph", reranker_top_k=6).invoke(BERLIN_QUESTION))
    assert graph[:2] == ["berlin", "halvex"]  # the graph ranking itself has no keyword side


def test_keyword_index_follows_builds_and_deletions(tmp_path: Path) -> None:
    from mx_rag.embedding.local import TextEmbedding

    paths = write_texts(tmp_path / "toy", TOY)
    loader = LoaderMng.with_defaults(chunk_size=2000, chunk_overlap=0)
    (tmp_path / "work").mkdir()
    pipeline = GraphRAGPipeline(tmp_path / "work", None, TextEmbedding("all-MiniLM-L6-v2"), 384)
    pipeline.upload_files([p for stem, p in paths.items() if stem != "kestrel"], loader)
    pipeline.build_graph()
    retriever = pipeline.as_retriever(mode="mix")
    index = retriever.keyword_index
    assert index is not None

    def numbers(stem: str) -> list[int]:
        return [chunk_number(c) for c in retriever.registry.chunk_ids(str(paths[stem].resolve()))]

    assert index.search("born in Krakow", 1) == numbers("halvex")
    assert index.search("Ivar Berg", 5) == []
    pipeline.delete_document(paths["halvex"])
    assert index.search("Krakow", 5) == []
    pipeline.upload_files([paths["kestrel"]], loader)
    pipeline.build_graph()
    assert index.search("Ivar Berg", 5) == numbers("kestrel")  # the retriever made earlier sees it
    assert index.search("?!", 5) == []  # no word to search for
    with pytest.raises(ParameterError, match="keyword_top_k"):
        pipeline.as_retriever(mode="mix", keyword_top_k=-1)


def test_dense_weight_sets_the_dense_ranks_against_the_keyword_ones(minilm_toy: GraphRAGPipeline) -> None:
    """With the graph's and the second hop's ranks weighing nothing, ``dense_weight`` decides
    between the dense order and the keyword (BM25) order, as in ``HybridRetriever``."""
    def order(dense_weight: float) -> list[str]:
        retriever = minilm_toy.as_retriever(mode="mix", mix_weight=0.0, dense_weight=dense_weight,
                                            hop_weight=0, subject_links=0, reranker_top_k=3)  # fmt: skip
        return [d.metadata["chunk_id"] for d in retriever.invoke(BERLIN_QUESTION)]

    retriever = minilm_toy.as_retriever(mode="mix")
    assert retriever.passage_vectors is not None and retriever.keyword_index is not None
    _, numbers = retriever.passage_vectors.search([retriever.embed_query(BERLIN_QUESTION)], k=3)
    by_number = retriever.registry.by_number(numbers[0])
    dense = [by_number[n] for n in numbers[0]]
    hits = retriever.keyword_index.search(BERLIN_QUESTION, 3)
    keyword = [retriever.registry.by_number(hits)[n] for n in hits]
    assert dense != keyword  # the two sides disagree on this question
    assert order(100.0) == dense
    assert order(0.0) == keyword
