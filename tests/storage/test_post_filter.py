"""Milvus: a filter on over 1,000 documents (or a DocumentIds holding half of them) is applied after an
unfiltered search where that leaves k hits, else by the filter expression; both give what filtering every hit gives."""

from typing import Any

import numpy as np
import pytest

from mx_rag.storage.document_store import MilvusDocstore, MxDocument
from mx_rag.storage.validation import DocumentIds
from mx_rag.storage.vectorstore import MilvusDB

PADDING = list(range(1000, 2100))  # ids of no document: the filters hold over 1,000 ids


def test_milvus_dense_filter_on_many_documents_equals_filtering_every_hit(milvus_client: Any) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, 16)).astype(np.float32)
    store = MilvusDB.create(client=milvus_client, collection_name="post_filter_dense", x_dim=16, metric_type="IP")
    store.add(list(range(400)), vectors, document_id=[i // 4 for i in range(400)])  # 100 documents
    queries = rng.standard_normal((3, 16)).astype(np.float32)
    everything = store.search(queries, k=400)[1]
    ranked_docs = list(dict.fromkeys(i // 4 for i in everything[0]))
    for keep in (list(range(100)), ranked_docs[2:], ranked_docs[30:]):
        expected = [[i for i in row if i // 4 in set(keep)][:5] for row in everything]
        for ids in (DocumentIds(keep + PADDING), keep + PADDING, DocumentIds(keep, share=0.5)):
            assert store.search(queries, k=5, filter_dict={"document_id": ids})[1] == expected


def test_milvus_full_text_filter_on_many_documents_equals_filtering_every_match(milvus_client: Any) -> None:
    store = MilvusDocstore(milvus_client, collection_name="post_filter_bm25")
    rng = np.random.default_rng(1)
    words = [f"word{i}" for i in range(20)]
    for doc in range(24):
        store.add([MxDocument(" ".join(rng.choice(words, 6)), document_name=f"d{doc}") for _ in range(2)], doc)
    everything = store.full_text_search("word1 word2 word3", top_k=500)
    ranked_docs = list(dict.fromkeys(hit.document_id for hit in everything))
    for keep in (list(range(24)), ranked_docs[2:], ranked_docs[14:]):
        expected = [h.chunk_id for h in everything if h.document_id in set(keep)][:5]
        for ids in (DocumentIds(keep + PADDING), DocumentIds(keep, share=0.5)):
            hits = store.full_text_search("word1 word2 word3", top_k=5, filter_dict={"document_id": ids})
            assert [h.chunk_id for h in hits] == expected


def test_a_scope_that_knows_its_share_asks_milvus_for_k_over_share_plus_slack(
    milvus_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    vectors = MilvusDB.create(client=milvus_client, collection_name="post_filter_fetch", x_dim=16, metric_type="IP")
    owners = [i // 4 for i in range(40)]
    vectors.add(list(range(40)), rng.standard_normal((40, 16)).astype(np.float32), document_id=owners)
    chunks = MilvusDocstore(milvus_client, collection_name="post_filter_fetch_bm25")
    words = [f"word{i}" for i in range(8)]
    for doc in range(10):
        chunks.add([MxDocument(" ".join(rng.choice(words, 6)), document_name=f"d{doc}") for _ in range(4)], doc)
    query = rng.standard_normal((1, 16)).astype(np.float32)
    expected = (vectors.search(query, k=5)[1], [h.chunk_id for h in chunks.full_text_search("word1 word2", top_k=20)])
    asked = []
    search = milvus_client.search

    def recording(*args: Any, **kwargs: Any) -> Any:
        asked.append((kwargs["limit"], kwargs["output_fields"]))
        return search(*args, **kwargs)

    monkeypatch.setattr(milvus_client, "search", recording)
    scope = DocumentIds(range(10), share=1.0)  # every document: min(4k, k / share + 16) hits, 20 and 36
    assert vectors.search(query, k=5, filter_dict={"document_id": scope})[1] == expected[0]
    hits = chunks.full_text_search("word1 word2", top_k=20, filter_dict={"document_id": scope})
    assert ([h.chunk_id for h in hits], asked[0][0], asked[1][0]) == (expected[1], 20, 36)
    assert asked[0][1] == ["document_id"]  # the dense side reads no more than it filters on
