"""LangChain's standard retriever suite (``langchain-tests``) on every mx_rag retriever class.

The stores are real (MindFAISS, SQLiteDocstore, a networkx graph) over eight chunks of four
documents, embedded with ``HashEmbedding`` (no model: fast); ``MultiQueryRetriever`` asks a
``ScriptedServer``, whose echo yields no usable rewrite, so it searches the question itself.
Built once per module, in a temporary directory. Counts are recorded in docs/langchain.md.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from mx_rag.document import LoaderMng
from mx_rag.graphrag import Chunk, Entity, Extraction, GraphRAGPipeline, Relation
from mx_rag.graphrag.retriever import GraphRetriever
from mx_rag.knowledge.retriever import KnowledgeRetriever
from mx_rag.llm import Text2TextLLM
from mx_rag.retrievers import BMRetriever, FullTextRetriever, HybridRetriever, MultiQueryRetriever, Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding, ScriptedServer
from mx_rag.utils import ClientParam

from ._marks import ASYNC_SUITE

pytestmark = ASYNC_SUITE

QUERY = "How does Debian install packages with APT?"
TEXTS = [
    ("Debian installs packages with APT, which resolves their dependencies.", 1),
    ("Debian keeps downloaded packages in the APT cache under /var/cache/apt.", 1),
    ("Debian stores the system hostname in /etc/hostname.", 2),
    ("Debian mounts file systems listed in /etc/fstab at boot.", 2),
    ("Debian runs cron jobs from /etc/crontab and the user crontabs.", 3),
    ("Debian logs to the systemd journal, read with journalctl.", 3),
    ("Debian configures network interfaces with NetworkManager or ifupdown.", 4),
    ("Debian upgrades a release by changing the APT sources and running apt full-upgrade.", 4),
]


class CapitalisedCooccurrence:
    """A graph extractor: capitalised words are entities; two in one chunk are related."""

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        out = []
        for chunk in chunks:
            words = sorted({w.strip(',."()') for w in chunk.text.split() if w[:1].isupper()} - {""})
            relations = tuple(Relation(a, b, "appears with") for a in words for b in words if a < b)
            out.append(Extraction(tuple(Entity(w) for w in words), relations))
        return out


@functools.cache
def stores() -> dict[str, Any]:
    """The shared corpus: docstore, vectors, embedding, graph pipeline and LLM (built once)."""
    root = Path(tempfile.mkdtemp(prefix="mxrag-lcstd-"))
    atexit.register(shutil.rmtree, root, True)
    emb = HashEmbedding(128)
    docstore = SQLiteDocstore(db_path=str(root / "sql.db"))
    vectors = MindFAISS(x_dim=128, devs=[0], load_local_index=str(root / "faiss.index"))
    for document_id in sorted({d for _, d in TEXTS}):
        texts = [t for t, d in TEXTS if d == document_id]
        ids = docstore.add([MxDocument(t, {"document": document_id}) for t in texts], document_id)
        vectors.add(ids, emb.embed_documents(texts), document_id=document_id)
    files = []
    for n, (text, _) in enumerate(TEXTS):
        files.append(root / f"chunk{n}.txt")
        files[-1].write_text(text, encoding="utf-8")
    (root / "graph").mkdir()
    pipeline = GraphRAGPipeline(root / "graph", None, emb, 128, extractor=CapitalisedCooccurrence())
    pipeline.upload_files(files, LoaderMng.with_defaults(chunk_size=4000, chunk_overlap=0))
    pipeline.build_graph()
    server = ScriptedServer().start()
    atexit.register(server.stop)
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                       client_param=ClientParam(use_http=True, retries=0))
    return {"emb": emb, "docstore": docstore, "vectors": vectors, "pipeline": pipeline, "llm": llm}


def dense_params() -> dict[str, Any]:
    s = stores()
    return {"vector_store": s["vectors"], "document_store": s["docstore"], "embed_func": s["emb"].embed_documents}


class TestRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return Retriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {**dense_params(), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestHybridRetriever(TestRetriever):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return HybridRetriever


class TestMultiQueryRetriever(TestRetriever):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return MultiQueryRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {**dense_params(), "llm": stores()["llm"], "k": 4}


class TestFullTextRetriever(TestRetriever):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return FullTextRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"document_store": stores()["docstore"], "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "Debian"  # in every chunk: keyword search finds as many as asked for


class TestBMRetriever(TestRetriever):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return BMRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # the scripted server echoes the prompt, whose keywords include the question's words
        return {"docs": [Document(page_content=text) for text, _ in TEXTS], "llm": stores()["llm"], "k": 4}


class TestKnowledgeRetriever(TestRetriever):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return KnowledgeRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": Retriever(**dense_params()), "document_ids": lambda: [1, 2, 3], "k": 4}


def graph_retriever(**fields: Any) -> GraphRetriever:
    return stores()["pipeline"].as_retriever(**fields)


class TestGraphRetriever(RetrieversIntegrationTests):
    """The count is ``reranker_top_k`` (``GraphRAGPipeline.as_retriever``'s name), per call too."""

    @property
    def retriever_constructor(self) -> Any:
        return graph_retriever  # the documented way to make one: GraphRAGPipeline.as_retriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"reranker_top_k": 4}

    @property
    def num_results_arg_name(self) -> str:
        return "reranker_top_k"

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestGraphRetrieverK(TestGraphRetriever):
    """``k`` per call, as every other retriever takes it."""

    @property
    def num_results_arg_name(self) -> str:
        return "k"

    @pytest.mark.xfail(reason="the constructor's count is reranker_top_k (TestGraphRetriever checks it)", strict=True)
    def test_k_constructor_param(self) -> None:
        super().test_k_constructor_param()
