"""Prompt compression with a reranker behind a scripted TEI /rerank server and the real MiniLM embedder."""

from collections.abc import Iterator

import numpy as np
import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.compress import ClusterCompressor, PromptCompressor, RerankCompressor
from mx_rag.embedding.local import TextEmbedding
from mx_rag.errors import ParameterError
from mx_rag.reranker.service import TEIReranker
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

LINES = [
    "FAISS is a library for efficient similarity search of dense vectors.",
    "Bananas are yellow when ripe and grow in tropical climates.",
    "An IVF index in FAISS partitions vectors into inverted lists.",
    "The Debian package manager apt resolves dependencies automatically.",
]
CONTEXT = "\n".join(LINES)
SPLITTER = RecursiveCharacterTextSplitter(chunk_size=80, chunk_overlap=0, separators=["\n", ""], keep_separator=True)


@pytest.fixture
def tei() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def compressor(tei: ScriptedServer) -> RerankCompressor:
    reranker = TEIReranker(url=tei.url("/rerank"), client_param=ClientParam(use_http=True, retries=0))
    return RerankCompressor(reranker=reranker, splitter=SPLITTER)


def _scores(*values: float) -> Reply:
    return Reply.json([{"index": i, "score": s} for i, s in sorted(enumerate(values), key=lambda p: -p[1])])


def test_rerank_compressor_keeps_the_best_pieces_in_order(compressor: RerankCompressor, tei: ScriptedServer) -> None:
    tei.enqueue(_scores(0.9, 0.1, 0.8, 0.2))
    out = compressor.compress_texts(CONTEXT, "What is FAISS?", compress_rate=0.5)
    assert out == LINES[0] + "\n" + LINES[2] + "\n"
    sent = tei.requests[0].json
    assert sent["query"] == "What is FAISS?" and sent["texts"] == LINES
    assert isinstance(compressor, PromptCompressor)


def test_context_reorder_puts_the_most_relevant_first(compressor: RerankCompressor, tei: ScriptedServer) -> None:
    tei.enqueue(_scores(0.3, 0.1, 0.8, 0.2))
    out = compressor.compress_texts(CONTEXT, "What is an IVF index?", 0.5, context_reorder=True)
    assert out.index(LINES[2]) < out.index(LINES[0]) and LINES[1] not in out


def test_a_small_rate_drops_only_the_least_relevant(compressor: RerankCompressor, tei: ScriptedServer) -> None:
    tei.enqueue(_scores(0.9, 0.1, 0.8, 0.2))
    out = compressor.compress_texts(CONTEXT, "What is FAISS?", compress_rate=0.2)
    assert LINES[1] not in out and all(line in out for line in (LINES[0], LINES[2], LINES[3]))


def test_default_splitter_and_a_one_piece_context(tei: ScriptedServer) -> None:
    compressor = RerankCompressor(TEIReranker(url=tei.url("/rerank"), client_param=ClientParam(use_http=True)))
    assert compressor.splitter._chunk_size == 512
    assert compressor.compress_texts("short", "q") == "short" and tei.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compress_rate": 0.0}, r"compress_rate must be in \(0.0, 1.0\]"),
        ({"compress_rate": 1.0}, r"compress_rate must be in \(0, 1\)"),
        ({"context": ""}, r"context must have length in \[1, 16777216\]"),
        ({"question": ""}, r"question must have length in \[1, 1000000\]"),
        ({"context_reorder": "yes"}, "context_reorder must be a bool"),
    ],
)
def test_bad_arguments(compressor: RerankCompressor, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    args = {"context": CONTEXT, "question": "q", "compress_rate": 0.5, **kwargs}
    with pytest.raises(ParameterError, match=message):
        compressor.compress_texts(**args)


def test_constructor_checks() -> None:
    with pytest.raises(ParameterError, match="reranker must be a Reranker"):
        RerankCompressor(reranker=object())  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="cluster_func must be a callable"):
        ClusterCompressor(cluster_func=1, embed=None)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def minilm() -> TextEmbedding:
    return TextEmbedding("all-MiniLM-L6-v2")


def _by_topic(vectors: list[list[float]]) -> np.ndarray:
    """Two clusters: the vectors nearer the first one, and the rest."""
    matrix = np.asarray(vectors)
    return (matrix @ matrix[0] < 0.3).astype(int)


@pytest.mark.slow
def test_cluster_compressor_drops_the_least_similar_of_each_cluster(minilm: TextEmbedding) -> None:
    compressor = ClusterCompressor(cluster_func=_by_topic, embed=minilm, splitter=SPLITTER, dev_id=0)
    out = compressor.compress_texts(CONTEXT, "How does FAISS search vectors?", compress_rate=0.5)
    assert LINES[0] in out and LINES[1] not in out
    assert len(out) < len(CONTEXT) * 0.75


@pytest.mark.slow
def test_cluster_function_must_label_every_piece(minilm: TextEmbedding) -> None:
    compressor = ClusterCompressor(cluster_func=lambda vectors: [0], embed=minilm, splitter=SPLITTER)
    with pytest.raises(ParameterError, match=r"cluster_func result must be one label per piece \(4\)"):
        compressor.compress_texts(CONTEXT, "q")
    with pytest.raises(ParameterError, match="dev_id must be in"):
        ClusterCompressor(cluster_func=_by_topic, embed=minilm, dev_id=64)
