# SPDX-License-Identifier: Apache-2.0
"""The second hop of ``mode="mix"``: the question's words that the best passage lacks, and the
entities it names, searched again (real spaCy, real MiniLM, real FTS5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.graphrag.second_hop import hop_query, rrf_scores

from .conftest import write_texts

# the award is in a passage that names the founder without opening with her name (no subject link
# reaches it) and shares no word with the question; the other companies' passages share several
CORPUS = {
    "zentrix": "Zentrix Labs: Zentrix Labs is a robotics company in Oslo. It was started by Marta Okonkwo in 2011.",
    "awards": "Nordic Engineering Prizes: In 2019 the jury gave its gold medal to Marta Okonkwo for a walking robot.",
    "office": "Zentrix Labs office: Zentrix Labs opened an office in Berlin in 2015.",
    "orbis": "Orbis Robotics: Lena Fischer started Orbis Robotics, a robotics company in Munich, in 2009.",
    "halvex": "Halvex Systems: Piotr Nowak started the robotics company Halvex Systems in Krakow.",
    "oslo": "Oslo: Oslo is the capital of Norway and home to many robotics companies.",
}  # fmt: skip
QUESTION = "Which award did the person who started Zentrix Labs receive?"


@pytest.fixture(scope="module")
def medal(tmp_path_factory: pytest.TempPathFactory) -> GraphRAGPipeline:
    from mx_rag.embedding.local import TextEmbedding

    root = tmp_path_factory.mktemp("second_hop")
    paths = write_texts(root / "corpus", CORPUS)
    (root / "work").mkdir()
    pipeline = GraphRAGPipeline(root / "work", None, TextEmbedding("all-MiniLM-L6-v2"), 384)
    pipeline.upload_files(list(paths.values()), LoaderMng.with_defaults(chunk_size=2000, chunk_overlap=0))
    pipeline.build_graph()
    return pipeline


def _stems(docs: list) -> list[str]:  # type: ignore[type-arg]
    return [Path(d.metadata["source"]).stem for d in docs]


def test_the_hop_query_is_the_open_words_then_the_bridge_names() -> None:
    head = "Zentrix Labs: Zentrix Labs is a robotics company in Oslo. It was started by Marta Okonkwo."
    assert hop_query(QUESTION, head, ["Marta Okonkwo"]) == "award did person receive Marta Okonkwo"
    assert hop_query("Zentrix Labs?", head, []) == ""  # the head answers every word, and names nothing new


def test_rrf_scores_weighs_each_ranking() -> None:
    assert list(rrf_scores([(["a", "b"], 1.0), (["b", "c"], 1.0)])) == ["b", "a", "c"]
    assert list(rrf_scores([(["a", "b"], 1.0), (["b", "a"], 3.0)])) == ["b", "a"]
    assert list(rrf_scores([(["a"], 1.0), (["z"], 0.0)])) == ["a"]  # a ranking weighted 0 adds nothing


def test_the_second_hop_brings_the_bridge_passage_up(medal: GraphRAGPipeline) -> None:
    """The founder's passage comes first; the prize passage, which names her, comes right after
    it with the second hop and below the distractors without it."""
    hop = _stems(medal.as_retriever(mode="mix", reranker_top_k=6).invoke(QUESTION))
    assert hop[:2] == ["zentrix", "awards"]
    plain = _stems(medal.as_retriever(mode="mix", hop_weight=0, reranker_top_k=6).invoke(QUESTION))
    assert plain[0] == "zentrix" and plain.index("awards") > 2
    graph = _stems(medal.as_retriever(mode="graph", reranker_top_k=6).invoke(QUESTION))
    assert graph.index("awards") > 1  # the walk alone does not find it second


def test_hop_weight_is_checked(medal: GraphRAGPipeline) -> None:
    with pytest.raises(ParameterError, match=r"hop_weight.*-1"):
        medal.as_retriever(mode="mix", hop_weight=-1)
