"""Keyword (SQLite FTS5, jieba for Chinese) and hybrid retrieval on real stores."""

from pathlib import Path

import pytest

from mx_rag.errors import ParameterError
from mx_rag.retrievers import FullTextRetriever, HybridRetriever
from mx_rag.retrievers.fusion import reciprocal_rank_fusion
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding

TEXTS = [
    "apt-get install downloads packages and their dependencies from the Debian archive.",
    "The kernel schedules processes on every CPU core.",
    "使用 apt-get 命令可以安装软件包及其依赖。",
    "系统内核负责在每个处理器核心上调度进程。",
    "Backups run every night and are kept for two weeks.",
]


@pytest.fixture
def stores(tmp_path: Path) -> tuple[SQLiteDocstore, MindFAISS, HashEmbedding]:
    embed = HashEmbedding(128)
    docstore = SQLiteDocstore(db_path=str(tmp_path / "sql.db"))
    vectors = MindFAISS(x_dim=128, devs=[0], load_local_index=str(tmp_path / "faiss.index"))
    for doc_id, text in enumerate(TEXTS, start=1):
        ids = docstore.add([MxDocument(text, {"n": doc_id})], doc_id)
        vectors.add(ids, embed.embed_documents([text]), document_id=doc_id)
    return docstore, vectors, embed


@pytest.mark.parametrize(("query", "best"), [("install packages with apt-get", 1), ("调度进程", 4),
                                              ("如何安装软件包", 3), ("nightly backups", 5)])
def test_full_text_retriever_finds_the_keyword_match(stores, query: str, best: int) -> None:  # type: ignore[no-untyped-def]
    docstore, _, _ = stores
    docs = FullTextRetriever(document_store=docstore, k=3).invoke(query)
    assert docs and docs[0].metadata["n"] == best
    assert all(d.metadata["retrieval_type"] == "sparse" for d in docs)


def test_full_text_filter_and_limits(stores) -> None:  # type: ignore[no-untyped-def]
    docstore, _, _ = stores
    r = FullTextRetriever(document_store=docstore, k=5, filter_dict={"document_id": [2, 4]})
    assert {d.metadata["n"] for d in r.invoke("进程 kernel processes")} <= {2, 4}
    with pytest.raises(ParameterError, match="k"):
        FullTextRetriever(document_store=docstore, k=0)


def test_hybrid_fuses_dense_and_keyword(stores) -> None:  # type: ignore[no-untyped-def]
    docstore, vectors, embed = stores
    r = HybridRetriever(vector_store=vectors, document_store=docstore, embed_func=embed.embed_documents, k=2)
    docs = r.invoke("apt-get 安装 packages")
    assert {d.metadata["n"] for d in docs} == {1, 3}
    assert all(d.metadata["rrf_score"] > 0 for d in docs)


def test_the_keyword_search_runs_beside_the_dense_one_while_it_is_slow(stores) -> None:  # type: ignore[no-untyped-def]
    """The keyword side runs on a pool thread beside the dense side while the last one took 5 ms
    or more (the first one too); a quicker one runs in the caller's thread, as does one whose pool
    threads are all busy. The documents are the same either way."""
    import math
    import threading
    import time

    from mx_rag.retrievers import hybrid

    docstore, vectors, embed = stores

    def slow_embed(texts: list[str]) -> list[list[float]]:  # a dense side slow enough for the pool thread to start
        time.sleep(0.2)
        return embed.embed_documents(texts)

    r = HybridRetriever(vector_store=vectors, document_store=docstore, embed_func=slow_embed, k=3)
    threads: list[str] = []
    search = docstore.full_text_search

    def watched(query, top_k=3, filter_dict=None):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return search(query, top_k=top_k, filter_dict=filter_dict)

    docstore.full_text_search = watched

    def ask() -> list[tuple[str, float]]:
        threads.clear()
        return [(d.page_content, d.metadata["rrf_score"]) for d in r.invoke("apt-get 安装 packages")]

    expected = ask()  # the first question: beside
    assert threads[0].startswith("mx_rag-keyword")  # (subject links search in the caller's thread)
    r._keyword_s = hybrid.BESIDE_FROM_S / 2  # as after a quick one (five documents: about 1 ms)
    assert ask() == expected
    assert not any(name.startswith("mx_rag-keyword") for name in threads)
    release = threading.Event()
    held = [hybrid._keyword_pool().submit(release.wait, 30) for _ in range(hybrid.KEYWORD_THREADS)]
    try:
        r._keyword_s = math.inf  # as after a slow one
        assert ask() == expected and set(threads) == {threading.current_thread().name}
    finally:
        release.set()
    assert all(future.result(5) for future in held)


def test_reciprocal_rank_fusion_orders_by_summed_reciprocal_ranks() -> None:
    from langchain_core.documents import Document

    a, b, c = (Document(page_content=x) for x in "abc")
    fused = reciprocal_rank_fusion([[a, b, c], [b, c]], k=60)
    assert [d.page_content for d in fused] == ["b", "c", "a"]
    assert fused[0].metadata["rrf_score"] == pytest.approx(1 / 62 + 1 / 61)


def test_weighted_fusion_lets_one_list_outvote_the_other() -> None:
    from langchain_core.documents import Document

    a, b = (Document(page_content=x) for x in "ab")
    assert [d.page_content for d in reciprocal_rank_fusion([[a], [b]])] == ["a", "b"]  # a tie: first seen
    fused = reciprocal_rank_fusion([[a], [b]], weights=(1.0, 2.0))
    assert [d.page_content for d in fused] == ["b", "a"]
    assert fused[0].metadata["rrf_score"] == pytest.approx(2 / 61)
    with pytest.raises(ValueError, match="weights: 1 given for 2"):
        reciprocal_rank_fusion([[a], [b]], weights=(1.0,))


def test_hybrid_dense_weight_decides_between_the_two_rankings(stores) -> None:  # type: ignore[no-untyped-def]
    docstore, vectors, embed = stores
    common = {"vector_store": vectors, "document_store": docstore, "embed_func": embed.embed_documents, "k": 3}
    query = "packages every night"  # dense ranks texts 5, 2, 1; the keyword search 5, 1, 2
    ranked = {w: [d.metadata["n"] for d in HybridRetriever(**common, dense_weight=w).invoke(query)]
              for w in (0.1, 10)}
    assert ranked == {0.1: [5, 1, 2], 10: [5, 2, 1]}
    for bad in (0, 0.05, 11, "x"):
        with pytest.raises(ParameterError, match=r"dense_weight"):
            HybridRetriever(**common, dense_weight=bad)


def test_the_chain_settings_default_to_the_retrievers_measured_defaults() -> None:
    from mx_rag.server.settings import ChainSettings

    fields = HybridRetriever.model_fields
    chain = ChainSettings()
    assert chain.dense_weight == fields["dense_weight"].default
    assert chain.subject_links == fields["subject_links"].default
    assert (chain.type, chain.k) == ("hybrid", 5)
