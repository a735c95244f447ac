# SPDX-License-Identifier: Apache-2.0
"""KnowledgeDB over the Milvus stores (MilvusDocstore + MilvusDB in one milvus-lite file) and over the
openGauss stores (OpenGaussDocstore + OpenGaussDB on PostgreSQL with pgvector), as the reference's
knowledge-management page pairs them: upload, hybrid retrieval, delete, reopen."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.retrievers import HybridRetriever
from mx_rag.storage.document_store import MilvusDocstore, OpenGaussDocstore
from mx_rag.storage.vectorstore import MilvusDB, OpenGaussDB
from mx_rag.testing import HashEmbedding

DIM = 64
USER = "Default"


@pytest.fixture
def milvus_stores(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    from pymilvus import MilvusClient

    client = MilvusClient(str(tmp_path / "milvus.db"))
    yield MilvusDocstore(client), MilvusDB.create(client=client, x_dim=DIM, metric_type="IP")
    client.close()


@pytest.fixture
def opengauss_stores(pgvector_url: str) -> Iterator[tuple[Any, Any]]:
    schema = f"kb_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pgvector_url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine = create_engine(make_url(pgvector_url).update_query_dict({"options": f"-csearch_path={schema},public"}))
    yield OpenGaussDocstore(engine=engine), OpenGaussDB.create(engine=engine, dense_dim=DIM)
    engine.dispose()
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.mark.parametrize("pair", ["milvus_stores", "opengauss_stores"])
def test_upload_retrieve_delete(pair: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    chunk_store, vector_store = request.getfixturevalue(pair)
    docs = tmp_path / "docs"
    docs.mkdir()
    knowledge_store = KnowledgeStore(db_path=str(tmp_path / "sql.db"))
    knowledge_store.add_knowledge("test", USER, "admin")
    embed = HashEmbedding(DIM)

    def open_kb() -> KnowledgeDB:
        return KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                           knowledge_name="test", white_paths=[str(docs)], user_id=USER)

    kb = open_kb()
    first, second = docs / "milvus.txt", docs / "gauss.txt"
    for path in (first, second):
        path.write_text("x", encoding="utf-8")
    kb.add_file(first, ["Milvus ranks chunks with BM25", "向量数据库保存稠密向量"], {"dense": embed.embed_documents},
                [{"page": 1}, {"page": 2}])
    kb.add_file(second, ["openGauss keeps vectors in tables", "全文检索使用倒排索引"], embed.embed_documents)
    assert sorted(d.document_name for d in kb.get_all_documents()) == ["gauss.txt", "milvus.txt"]
    assert vector_store.count() == chunk_store.count() == 4
    retriever = HybridRetriever(vector_store=vector_store, document_store=chunk_store,
                                embed_func=embed.embed_documents, k=2)
    assert retriever.invoke("BM25 ranks chunks")[0].page_content == "Milvus ranks chunks with BM25"
    assert retriever.invoke("全文检索")[0].page_content == "全文检索使用倒排索引"
    kb.delete_file("milvus.txt")
    assert vector_store.count() == chunk_store.count() == 2
    assert open_kb().check_document_exist("gauss.txt")  # reopening finds both stores consistent
    assert [d.page_content for d in retriever.invoke("BM25 ranks chunks")] != ["Milvus ranks chunks with BM25"]
