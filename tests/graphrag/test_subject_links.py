# SPDX-License-Identifier: Apache-2.0
"""Subject links: a top passage's entities lead to the passages that open with their names (the
bridge of a two-hop question), on the real offline extractor and real MiniLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.errors import ParameterError
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.graphrag import retriever as graph_retriever
from mx_rag.retrievers import subject_links
from mx_rag.retrievers.subject_links import opens_with

from .conftest import TOY_QUESTION


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Marta Okonkwo: Marta Okonkwo is an engineer.", "marta okonkwo", True),
        ("# Marta Okonkwo\n\nAn engineer.", "marta okonkwo", True),
        ("“Marta Okonkwo” (born 1980) is an engineer.", "marta okonkwo", True),
        ("MARTA OKONKWO was born in Lisbon.", "marta okonkwo", True),
        ("Marta Okonkwo", "marta okonkwo", True),
        ("Marta Okonkwoski is a painter.", "marta okonkwo", False),  # a longer word is another name
        ("The engineer Marta Okonkwo was born in Lisbon.", "marta okonkwo", False),  # named, not opened with
        ("May 2011: the lab opened.", "may", False),  # names under 4 characters are not followed
    ],
)
def test_opens_with(text: str, name: str, expected: bool) -> None:
    assert opens_with(text, name) is expected


def _stems(docs: list) -> list[str]:  # type: ignore[type-arg]
    return [Path(d.metadata["source"]).stem for d in docs]


@pytest.mark.parametrize("mode", ["graph", "mix"])
def test_the_founders_own_passage_follows_the_passage_naming_her(minilm_toy: GraphRAGPipeline, mode: str) -> None:
    """The question names Zentrix; Zentrix's passage names Marta Okonkwo, whose passage opens with
    her name: with one subject link it comes second, right after the passage that names her."""
    linked = minilm_toy.as_retriever(mode=mode, subject_links=1, reranker_top_k=6)
    docs = linked.invoke(TOY_QUESTION)
    assert _stems(docs)[:2] == ["zentrix", "okonkwo"]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    view = linked.explain(TOY_QUESTION)  # explain shows the linked passage, and the entity that led there
    assert [d["chunk_id"] for d in view["documents"]] == [d.metadata["chunk_id"] for d in docs]
    okonkwo = docs[1].metadata["chunk_id"]
    assert any(n["label"] == "Marta Okonkwo" and okonkwo in n["chunk_ids"] for n in view["nodes"])
    plain = _stems(minilm_toy.as_retriever(mode=mode, subject_links=0, reranker_top_k=6).invoke(TOY_QUESTION))
    assert plain[0] == "zentrix" and plain.index("okonkwo") > 1  # without the link she ranks lower


@pytest.mark.parametrize(("module", "limit"), [(graph_retriever, "SUBJECT_MAX_SOURCES"), (subject_links, "PER_HEAD")])
def test_links_stay_within_their_limits(minilm_toy: GraphRAGPipeline, monkeypatch: pytest.MonkeyPatch,
                                        module: object, limit: str) -> None:  # fmt: skip
    """With every entity "too common" (SUBJECT_MAX_SOURCES 0), or no link allowed per head
    passage (PER_HEAD 0), the ranking is the one without subject links."""
    retriever = minilm_toy.as_retriever(mode="graph", subject_links=1, reranker_top_k=6)
    monkeypatch.setattr(module, limit, 0)
    plain = minilm_toy.as_retriever(mode="graph", subject_links=0, reranker_top_k=6)
    assert _stems(retriever.invoke(TOY_QUESTION)) == _stems(plain.invoke(TOY_QUESTION))


def test_subject_links_is_checked(minilm_toy: GraphRAGPipeline) -> None:
    with pytest.raises(ParameterError, match=r"subject_links.*-1"):
        minilm_toy.as_retriever(subject_links=-1)
