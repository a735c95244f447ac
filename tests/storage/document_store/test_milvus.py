# SPDX-License-Identifier: Apache-2.0
"""MilvusDocstore on milvus-lite: the document-store conformance suite, then what only it does
(BM25 through Milvus's function, drop_ratio_search, drop_collection, encryption without BM25)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store import MilvusDocstore, MxDocument
from mx_rag.storage.document_store._milvus_docs import build_schema
from mx_rag.testing.document_store import DocstoreConformance, chunks
from tests.storage.document_store.helpers import decrypt, encrypt

_names = itertools.count()


def _name() -> str:
    return f"docs_{next(_names)}"


class TestMilvusDocstore(DocstoreConformance):
    @pytest.fixture
    def make_store(self, milvus_client: Any) -> Any:
        name = _name()
        return lambda **kwargs: MilvusDocstore(milvus_client, collection_name=name, **kwargs)


def test_bm25_ranks_chinese_and_english_and_filters(milvus_client: Any) -> None:
    store = MilvusDocstore(milvus_client, collection_name=_name())
    first = store.add([MxDocument("数据库的全文检索使用倒排索引", {"n": 1}, "a.md"),
                       MxDocument("向量数据库保存稠密向量", {"n": 2}, "a.md")], 1)
    second = store.add([MxDocument("全文检索 full text search with BM25", {"n": 3}, "b.md")], 2)
    hits = store.full_text_search("全文检索", top_k=5)
    assert {d.chunk_id for d in hits} == {first[0], second[0]}
    assert all(d.metadata["retrieval_type"] == "sparse" and d.metadata["score"] > 0 for d in hits)
    assert [d.metadata["score"] for d in hits] == sorted((d.metadata["score"] for d in hits), reverse=True)
    assert [d.chunk_id for d in store.full_text_search("BM25 search", top_k=5)] == second
    assert [d.chunk_id for d in store.full_text_search("全文检索", filter_dict={"document_id": [1]})] == first[:1]
    assert store.full_text_search("全文检索", filter_dict={"document_id": [0]}) == []
    assert store.full_text_search("   ") == []
    assert store.full_text_search("向量", top_k=1, drop_ratio_search=0.5)[0].metadata["n"] == 2
    store.drop_collection()
    assert not milvus_client.has_collection(store.collection_name)


def test_encryption_needs_bm25_off(milvus_client: Any) -> None:
    with pytest.raises(ParameterError, match="enable_bm25=False"):
        MilvusDocstore(milvus_client, collection_name=_name(), encrypt_fn=encrypt, decrypt_fn=decrypt)
    name = _name()
    store = MilvusDocstore(milvus_client, collection_name=name, enable_bm25=False, encrypt_fn=encrypt,
                           decrypt_fn=decrypt)
    ids = store.add([MxDocument("secret 身份证号", {}, "s.md")], 3)
    assert store.search(ids[0]).page_content == "secret 身份证号"  # type: ignore[union-attr]
    stored = milvus_client.query(name, filter=f"id == {ids[0]}", output_fields=["page_content"])[0]
    assert stored["page_content"] == encrypt("secret 身份证号")
    assert store.full_text_search("secret") == []
    store.update(ids, ["changed"])
    assert store.search_by_document_id(3)[0].page_content == "changed"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"bm25_k1": 1.0}, "bm25_k1"), ({"bm25_k1": 2.5}, "bm25_k1"), ({"bm25_b": 1.5}, "bm25_b"),
     ({"collection_name": ""}, "collection_name"), ({"enable_bm25": "yes"}, "enable_bm25"),
     ({"auto_flush": 1}, "auto_flush"), ({"client": "./milvus.db"}, "client")],
)
def test_bad_constructor_arguments(milvus_client: Any, kwargs: dict[str, Any], name: str) -> None:
    options: dict[str, Any] = {"client": milvus_client, "collection_name": _name(), **kwargs}
    with pytest.raises(ParameterError, match=name):
        MilvusDocstore(**options)


def test_bad_search_arguments_and_long_chunks(milvus_client: Any) -> None:
    store = MilvusDocstore(milvus_client, collection_name=_name())
    for bad in (-0.1, 1.0, "0.2"):
        with pytest.raises(ParameterError, match="drop_ratio_search"):
            store.full_text_search("x", drop_ratio_search=bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="top_k"):
        store.full_text_search("x", top_k=0)
    with pytest.raises(ParameterError, match=r"documents\[1\]\.page_content.*65535"):
        store.add([MxDocument("short"), MxDocument("长" * 30_000)], 1)
    assert store.count() == 0
    store.add(chunks(3), 1)
    with pytest.raises(ParameterError, match=r"texts\[0\]"):
        store.update(store.get_all_chunk_id()[:1], ["长" * 30_000])


def test_reopening_keeps_chunks(milvus_client: Any) -> None:
    name = _name()
    ids = MilvusDocstore(milvus_client, collection_name=name, bm25_k1=1.6, bm25_b=0.3).add(chunks(4), 9)
    again = MilvusDocstore(milvus_client, collection_name=name)
    assert again.get_all_chunk_id() == ids and again.count() == 4
    assert [d.metadata["i"] for d in again.full_text_search("chunk 2", top_k=1)] == [2]
    with pytest.raises(ParameterError, match="made with enable_bm25=True"):
        MilvusDocstore(milvus_client, collection_name=name, enable_bm25=False)


def test_k1_and_b_go_into_the_bm25_index_parameters(milvus_client: Any) -> None:
    """milvus-lite does not report (or apply) them, so the request itself is checked."""
    from pymilvus import DataType, Function, FunctionType

    _, indexes = build_schema(milvus_client, DataType, Function, FunctionType, bm25=True, k1=1.6, b=0.3)
    sparse = next(index for index in indexes if index.field_name == "sparse_vector")
    wanted = {"inverted_index_algo": "DAAT_MAXSCORE", "bm25_k1": 1.6, "bm25_b": 0.3, "metric_type": "BM25"}
    assert wanted.items() <= sparse.to_dict().items()


def test_reference_example(milvus_client: Any, tmp_path: Any) -> None:
    """databases.md's MilvusDocstore example, with the client in Lite mode (its own comment)."""
    from pymilvus import MilvusClient

    client = MilvusClient(str(tmp_path / "milvus_demo.db"))
    chunk_store = MilvusDocstore(client)
    text = ["示例", "文本"]
    metadata_list = [{} for _ in text]
    pairs = zip(text, metadata_list, strict=True)
    doc = [MxDocument(page_content=t, metadata=m, document_name="1.docx") for t, m in pairs]
    document_id = 1
    chunk_store.add(doc, document_id)
    ids = chunk_store.get_all_chunk_id()
    document = chunk_store.search(ids[0])
    assert document is not None and document.page_content == "示例"
    assert chunk_store.full_text_search("文本", filter_dict={"document_id": [0]}) == []
    found = chunk_store.full_text_search("文本", filter_dict={"document_id": [document_id]})
    assert [d.page_content for d in found] == ["文本"]
    chunk_store.update(ids[:2], ["text1", "text2"])  # the example's [0, 1]: ids here start at 1
    assert chunk_store.delete(document_id) == ids
    assert chunk_store.search_by_document_id(document_id) == []
    client.close()


def test_server_versions_are_gated(milvus_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client is milvus-lite; only the version it reports is a server's (a real Milvus 2.3 server:
    tests/server/test_milvus_docstore.py)."""
    monkeypatch.setattr(milvus_client, "get_server_version", lambda: "v2.4.9")
    with pytest.raises(ParameterError, match=r"Milvus 2\.5 or later"):
        MilvusDocstore(milvus_client, collection_name=_name())
    monkeypatch.setattr(milvus_client, "get_server_version", lambda: "v2.2.9")
    with pytest.raises(ParameterError, match=r"Milvus 2\.3 or later"):
        MilvusDocstore(milvus_client, collection_name=_name(), enable_bm25=False)
    monkeypatch.setattr(milvus_client, "get_server_version", lambda: "v2.5.4")
    name = _name()
    store = MilvusDocstore(milvus_client, collection_name=name)  # a server's collection: ids from the allocator
    assert milvus_client.describe_collection(name)["auto_id"] is False
    assert milvus_client.has_collection(name + "_id_allocator")
    ids = store.add(chunks(2), 1)  # (reads would use a 2.5 server's filter templates, which lite lacks)
    assert ids == sorted(ids) and milvus_client.get(name, ids=ids, output_fields=["id"]) == [{"id": i} for i in ids]
    store.update([], [])
