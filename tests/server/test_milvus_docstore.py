# SPDX-License-Identifier: Apache-2.0
"""MilvusDocstore on a real Milvus 2.3.5 server (``milvus_server``): chunk ids from Milvus's id
allocator, written by the store, so that ``update`` keeps them; an auto_id collection (the
original SDK's) refuses ``update``; BM25 needs Milvus 2.5."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymilvus import DataType, Function, FunctionType, MilvusClient

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store import MilvusDocstore, MxDocument
from mx_rag.storage.document_store._milvus_docs import ALLOCATOR_SUFFIX, DENSE_FIELD, build_schema
from mx_rag.testing.document_store import chunks
from tests.server.milvus_server import MilvusServer


@pytest.fixture
def client(milvus_server: MilvusServer) -> Iterator[MilvusClient]:
    client = MilvusClient(uri=milvus_server.uri)
    yield client
    client.close()


def _name() -> str:
    return f"docs_{uuid.uuid4().hex[:10]}"


def _encrypt(text: str) -> str:
    return text[::-1]


def test_update_keeps_ids_on_a_milvus_server(client: MilvusClient) -> None:
    name = _name()
    with pytest.raises(ParameterError, match=r"Milvus 2\.5 or later"):
        MilvusDocstore(client, collection_name=name)  # BM25 (the default) needs its BM25 function
    store = MilvusDocstore(client, collection_name=name, enable_bm25=False, auto_flush=False)
    try:
        info = client.describe_collection(name)
        assert info["auto_id"] is False and DENSE_FIELD in {f["name"] for f in info["fields"]}  # no sparse in 2.3
        first = store.add(chunks(3), 1)
        second = store.add(chunks(2, tag="other"), 2)
        assert first == sorted(first) and max(first) < min(second)  # Milvus's allocator: increasing
        store.update(first[:2], ["new 0", "new 1"])
        assert store.get_all_chunk_id() == sorted(first + second) and store.count() == 5
        updated = store.search(first[0])
        assert updated is not None and updated.page_content == "new 0"
        assert (updated.metadata["i"], updated.document_name, updated.document_id) == (0, "chunk.txt", 1)
        assert [d.page_content for d in store.search_by_document_id(1)] == ["new 0", "new 1", "chunk 2 text"]
        with pytest.raises(ParameterError, match="do not exist"):
            store.update([first[0], 12345], ["a", "b"])
        reopened = MilvusDocstore(client, collection_name=name, enable_bm25=False)  # finds its own ids
        reopened.update([second[0]], ["again"])
        assert [d.page_content for d in reopened.search_by_document_id(2)] == ["again", "other 1 text"]
        assert reopened.delete(1) == first and reopened.get_all_chunk_id() == second
        assert reopened.full_text_search("again") == []
    finally:
        store.drop_collection()
    assert not client.has_collection(name) and not client.has_collection(name + ALLOCATOR_SUFFIX)


def test_encrypted_chunks_are_updated_encrypted(client: MilvusClient) -> None:
    name = _name()
    store = MilvusDocstore(client, collection_name=name, enable_bm25=False, auto_flush=False,
                           encrypt_fn=_encrypt, decrypt_fn=_encrypt)
    try:
        ids = store.add([MxDocument("secret text", {}, "a.md")], 7)
        store.update(ids, ["changed text"])
        rows = client.query(name, filter=f"id in {ids}", output_fields=["page_content"])
        assert [r["page_content"] for r in rows] == [_encrypt("changed text")]
        assert store.search(ids[0]).page_content == "changed text"  # type: ignore[union-attr]
    finally:
        store.drop_collection()


def test_an_auto_id_collection_refuses_update(client: MilvusClient) -> None:
    """A collection with Milvus-assigned ids (as the original SDK makes them): a server would give
    upserted rows new ids, so update changes nothing and says why."""
    name = _name()
    schema, indexes = build_schema(client, DataType, Function, FunctionType, bm25=False, k1=1.2, b=0.75,
                                   auto_id=True, dense=True)
    client.create_collection(name, schema=schema, index_params=indexes, consistency_level="Strong")
    store: Any = MilvusDocstore(client, collection_name=name, enable_bm25=False, auto_flush=False)
    try:
        ids = store.add(chunks(2), 1)
        with pytest.raises(StorageError, match="auto_id"):
            store.update(ids, ["x", "y"])
        assert [d.page_content for d in store.search_by_document_id(1)] == ["chunk 0 text", "chunk 1 text"]
        assert not client.has_collection(name + ALLOCATOR_SUFFIX)
    finally:
        store.drop_collection()
