"""Per-call ``k``, ``score_threshold`` and ``filter_dict`` on every mx_rag retriever.

LangChain's retriever contract: ``invoke(query, k=3)`` honours ``k`` for that call. Each test
compares a per-call setting with a retriever built with that setting as a field, on real FAISS,
SQLite, the MiniLM model, a scripted LLM server and a real graph.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.document import LoaderMng
from mx_rag.errors import ParameterError
from mx_rag.graphrag import Chunk, Entity, Extraction, GraphRAGPipeline, Relation
from mx_rag.llm import Text2TextLLM
from mx_rag.retrievers import BMRetriever, FullTextRetriever, HybridRetriever, MultiQueryRetriever, Retriever
from mx_rag.retrievers.call_settings import CallSettings
from mx_rag.testing import HashEmbedding, Reply, ScriptedServer
from mx_rag.utils import ClientParam

KINDS = ["dense", "hybrid", "full_text", "multi_query", "bm", "graph"]
WITH_THRESHOLD = ["dense", "hybrid", "multi_query"]
WITH_FILTER = ["dense", "hybrid", "full_text", "multi_query"]
QUESTION = "Are Christopher Nolan and Sathish Kalathil both film directors?"
KEYWORDS = "Christopher Nolan, Sathish Kalathil, film, director"
REWRITES = "1. Which films did Christopher Nolan direct?\n2. Who is the Malayalam director Sathish Kalathil?"


class CapitalisedCooccurrence:
    """A graph extractor: capitalised words are entities; two in one sentence are related."""

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        out = []
        for chunk in chunks:
            entities: list[Entity] = []
            relations: list[Relation] = []
            for sentence in chunk.text.split(". "):
                words = sorted({w.strip(',."()') for w in sentence.split() if w[:1].isupper()} - {""})
                entities += [Entity(w) for w in words]
                relations += [Relation(a, b, "co-occurs with") for a in words for b in words if a < b]
            out.append(Extraction(tuple(entities), tuple(relations)))
        return out


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory, corpus) -> GraphRAGPipeline:  # type: ignore[no-untyped-def]
    """A graph of the first four items' paragraphs (node names embedded by HashEmbedding: fast)."""
    items, _, _ = corpus
    root = tmp_path_factory.mktemp("graph")
    files = []
    for n, item in enumerate(items[:4]):
        for m, (_, sentences) in enumerate(item["context"]):
            files.append(root / f"p{n}_{m}.txt")
            files[-1].write_text(" ".join(sentences), encoding="utf-8")
    (root / "work").mkdir()
    pipeline = GraphRAGPipeline(root / "work", None, HashEmbedding(256), 256, extractor=CapitalisedCooccurrence())
    pipeline.upload_files(files, LoaderMng.with_defaults(chunk_size=4000, chunk_overlap=0))
    pipeline.build_graph()
    return pipeline


Make = Callable[..., BaseRetriever]


@pytest.fixture
def make(corpus, emb, server: ScriptedServer, graph: GraphRAGPipeline) -> Make:  # type: ignore[no-untyped-def]
    """``make(kind, **fields)``; for the graph, ``k`` is its ``reranker_top_k``."""
    _, docstore, vectors = corpus
    dense = {"vector_store": vectors, "document_store": docstore, "embed_func": emb.embed_documents}
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                       client_param=ClientParam(use_http=True, retries=0))

    def build(kind: str, **fields: Any) -> BaseRetriever:
        if kind == "dense":
            return Retriever(**dense, **fields)
        if kind == "hybrid":
            return HybridRetriever(**dense, **fields)
        if kind == "full_text":
            return FullTextRetriever(document_store=docstore, **fields)
        if kind == "multi_query":
            return MultiQueryRetriever(llm=llm, **dense, **fields)
        if kind == "bm":
            texts = [text for doc_id in range(1, len(corpus[0]) + 1) for text in sorted(texts_of(corpus, doc_id))]
            docs = [Document(page_content=text) for text in texts]
            return BMRetriever(docs=docs, llm=llm, **fields)
        if "k" in fields:
            fields["reranker_top_k"] = fields.pop("k")
        return graph.as_retriever(**fields)

    return build


def scripted(server: ScriptedServer, retriever: BaseRetriever) -> None:
    """Queue the LLM's answer of one call: rewrites for MultiQueryRetriever, keywords for BMRetriever."""
    if isinstance(retriever, MultiQueryRetriever):
        server.enqueue(Reply.chat(REWRITES))
    elif isinstance(retriever, BMRetriever):
        server.enqueue(Reply.chat(KEYWORDS))


def ask(server: ScriptedServer, retriever: BaseRetriever, query: str = QUESTION, **kwargs: Any) -> list[str]:
    """``retriever.invoke(query, **kwargs)``'s texts; the scripted LLM rewrites for MultiQueryRetriever."""
    scripted(server, retriever)
    return [doc.page_content for doc in retriever.invoke(query, **kwargs)]


def texts_of(corpus: Any, document_id: int) -> set[str]:
    _, docstore, _ = corpus
    return {chunk.page_content for chunk in docstore.search_by_document_id(document_id)}


@pytest.mark.parametrize("kind", KINDS)
def test_per_call_k_is_honoured(make: Make, server: ScriptedServer, kind: str) -> None:
    retriever = make(kind, k=6)
    default = ask(server, retriever)
    per_call = ask(server, retriever, k=2)
    assert per_call == ask(server, make(kind, k=2))
    assert len(per_call) < len(default)
    if kind != "multi_query":  # which keeps k per version of the question
        assert len(default) == 6 and per_call == default[:2]
    assert ask(server, retriever) == default, "the call changed the retriever"


@pytest.mark.parametrize("kind", KINDS)
def test_ainvoke_takes_per_call_k(make: Make, server: ScriptedServer, kind: str) -> None:
    retriever = make(kind, k=6)
    expected = ask(server, make(kind, k=3))
    scripted(server, retriever)
    docs = asyncio.run(retriever.ainvoke(QUESTION, k=3))
    assert [doc.page_content for doc in docs] == expected


@pytest.mark.parametrize("kind", WITH_FILTER)
def test_per_call_filter_dict_is_honoured(make: Make, server: ScriptedServer, corpus: Any, kind: str) -> None:
    retriever = make(kind, k=5)
    unfiltered = ask(server, retriever)
    per_call = ask(server, retriever, filter_dict={"document_id": [4]})
    assert per_call and set(per_call) <= texts_of(corpus, 4)
    assert not set(unfiltered) <= texts_of(corpus, 4)
    assert per_call == ask(server, make(kind, k=5, filter_dict={"document_id": [4]}))
    assert ask(server, retriever, filter_dict={"document_id": []}) == []
    filtered = make(kind, k=5, filter_dict={"document_id": [4]})
    assert ask(server, filtered, filter_dict=None) == unfiltered, "None lifts the field's filter for the call"


@pytest.mark.parametrize("kind", WITH_THRESHOLD)
def test_per_call_score_threshold_is_honoured(make: Make, server: ScriptedServer, kind: str) -> None:
    scores = [d.metadata["score"] for d in make("dense", k=10).invoke(QUESTION)]
    cut = scores[2]
    retriever = make(kind, k=10)
    unfiltered = ask(server, retriever)
    per_call = ask(server, retriever, score_threshold=cut)
    assert per_call == ask(server, make(kind, k=10, score_threshold=cut))
    if kind == "hybrid":  # the threshold cuts the dense side; keyword hits still fill the k places
        assert per_call and per_call != unfiltered
    else:
        assert per_call and len(per_call) < len(unfiltered)
    assert ask(server, make(kind, k=10, score_threshold=cut), score_threshold=None) == unfiltered


BAD_VALUES = [
    ("k", 0), ("k", 10_001), ("k", "3"), ("k", True),
    ("score_threshold", 1.5), ("score_threshold", "high"),
    ("filter_dict", {"source": "x"}), ("filter_dict", {"document_id": "1"}), ("filter_dict", ["document_id"]),
]


CHECKED = [  # FullTextRetriever has no score_threshold: see the unknown-keyword test
    pytest.param(kind, name, value, id=f"{kind}-{name}={value!r}")
    for kind in WITH_FILTER for name, value in BAD_VALUES if not (kind == "full_text" and name == "score_threshold")
] + [pytest.param("bm", name, value, id=f"bm-{name}={value!r}") for name, value in BAD_VALUES if name == "k"]


@pytest.mark.parametrize(("kind", "name", "value"), CHECKED)
def test_per_call_values_are_checked_like_the_fields(make: Make, server: ScriptedServer, kind: str, name: str,
                                                     value: Any) -> None:
    with pytest.raises(ParameterError) as from_field:
        make(kind, **{name: value})
    sent = len(server.requests)
    with pytest.raises(ParameterError) as per_call:
        make(kind).invoke(QUESTION, **{name: value})
    assert str(per_call.value) == str(from_field.value)
    assert str(per_call.value).startswith(name)
    assert len(server.requests) == sent, "checked before the LLM is asked"


@pytest.mark.parametrize(("value", "message"), [
    (0, "k must be in [1, 1000], got 0"), (1001, "k must be in [1, 1000], got 1001"),
    ("3", "k must be an int in [1, 1000], got '3'"),
])
def test_graph_k_is_checked_like_reranker_top_k(make: Make, value: Any, message: str) -> None:
    with pytest.raises(ParameterError) as from_field:
        make("graph", k=value)
    assert str(from_field.value) == message.replace("k must", "reranker_top_k must")
    with pytest.raises(ParameterError) as per_call:
        make("graph").invoke(QUESTION, k=value)
    assert str(per_call.value) == message


@pytest.mark.parametrize(("kind", "name"), [
    *[(kind, "top_k") for kind in KINDS],
    ("full_text", "score_threshold"), ("graph", "score_threshold"), ("graph", "filter_dict"),
])
def test_an_unknown_keyword_is_refused_by_name(make: Make, kind: str, name: str) -> None:
    with pytest.raises(ParameterError, match=rf"got unknown keyword argument\(s\) \['{name}'\]"):
        make(kind).invoke(QUESTION, **{name: 3})


def test_langchains_own_verbose_keyword_passes(make: Make) -> None:
    retriever = make("dense", k=3)
    assert retriever.invoke(QUESTION, verbose=False) == retriever.invoke(QUESTION)


class OneKnowledgeBase(Retriever):
    """What a knowledge-base retriever does: narrow every call's filter to its documents."""

    allowed: tuple[int, ...] = (4,)

    def _call_settings(self, kwargs: Mapping[str, Any]) -> CallSettings:
        return super()._call_settings(kwargs).narrowed_to(self.allowed)


def test_a_subclass_narrows_every_call_through_call_settings(corpus: Any, emb: Any) -> None:
    _, docstore, vectors = corpus
    retriever = OneKnowledgeBase(vector_store=vectors, document_store=docstore, embed_func=emb.embed_documents, k=3)
    mine = [d.page_content for d in retriever.invoke(QUESTION)]
    assert len(mine) == 3 and set(mine) <= texts_of(corpus, 4)
    assert [d.page_content for d in retriever.invoke(QUESTION, k=1)] == mine[:1]
    assert retriever.invoke(QUESTION, filter_dict={"document_id": [2]}) == [], "a call cannot widen the filter"
    assert [d.page_content for d in retriever.invoke(QUESTION, filter_dict={"document_id": [2, 4]})] == mine


def test_call_settings_are_immutable() -> None:
    ids = [3, 1, 3]
    settings = CallSettings(k=2, filter_dict={"document_id": ids})
    ids.append(9)
    assert settings.filter_dict == {"document_id": (1, 3)} and settings.search_filter == {"document_id": [1, 3]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.k = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.filter_dict["document_id"] = (9,)  # type: ignore[index]
    assert settings.narrowed_to([3, 4]).search_filter == {"document_id": [3]}
    assert CallSettings(k=1).search_filter is None and CallSettings(k=1).narrowed_to([]).search_filter == {
        "document_id": []}
    with pytest.raises(ParameterError, match="filter_dict"):
        dataclasses.replace(settings, filter_dict={"source": "x"})

