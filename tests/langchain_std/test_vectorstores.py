"""LangChain's standard vector-store suite (``langchain-tests``) on ``LangChainVectorStore`` over
MindFAISS + SQLiteDocstore and MilvusDB (milvus-lite) + SQLiteDocstore.

The suite embeds with its own ``DeterministicFakeEmbedding`` (6 dimensions, not normalised), so
the stores use the L2 metric: a text's own vector is then always its nearest. Counts are
recorded in docs/langchain.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MilvusDB, MindFAISS
from mx_rag.storage.vectorstore.langchain import LangChainVectorStore

from ._marks import ASYNC_SUITE

pytestmark = ASYNC_SUITE

DIM = 6  # langchain_tests' EMBEDDING_SIZE
_names = itertools.count()


class TestMindFAISS(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:
        docstore = SQLiteDocstore(db_path=str(tmp_path / "sql.db"))
        vectors = MindFAISS(x_dim=DIM, devs=[0], metric_type="L2", load_local_index=str(tmp_path / "faiss.index"))
        yield LangChainVectorStore(vectors, docstore, self.get_embeddings())
        docstore.close()


@pytest.fixture(scope="module")
def milvus_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pymilvus import MilvusClient

    client = MilvusClient(str(tmp_path_factory.mktemp("milvus") / "milvus.db"))
    yield client
    client.close()


class TestMilvusDB(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path, milvus_client: Any) -> Iterator[VectorStore]:
        docstore = SQLiteDocstore(db_path=str(tmp_path / "sql.db"))
        vectors = MilvusDB.create(client=milvus_client, collection_name=f"lc{next(_names)}", x_dim=DIM,
                                  metric_type="L2", index_type="FLAT")
        yield LangChainVectorStore(vectors, docstore, self.get_embeddings())
        docstore.close()
