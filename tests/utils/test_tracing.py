"""Tracing: with a provider (here the SDK's in-memory exporter) every stage of an ingestion and of
a question is a span; off, a stage is a shared no-op and opentelemetry is not imported for it."""

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.chain import SingleText2TextChain
from mx_rag.document import LoaderMng
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore, upload_files
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.reranker.service.tei_reranker import TEIReranker
from mx_rag.retrievers import HybridRetriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding, Reply, ScriptedServer
from mx_rag.utils import ClientParam, tracing

INGEST = {"mxrag.load", "mxrag.split", "mxrag.embed", "mxrag.write"}
QUERY = {f"mxrag.query.{name}" for name in ("embed", "vector_search", "keyword_search", "fusion", "subject_links",
                                            "rerank", "prompt", "llm", "llm_first_token")}


@pytest.fixture
def exporter() -> Iterator[object]:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.enable(provider)
    yield memory
    tracing.disable()


def test_every_stage_of_an_ingestion_and_a_question_is_a_span(exporter: object, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lockers.txt").write_text("Lockers open with the blue key. The blue key hangs in the office.\n")
    db = str(tmp_path / "sql.db")
    registry, chunks = KnowledgeStore(db_path=db), SQLiteDocstore(db_path=db)
    vectors = MindFAISS(x_dim=64, devs=[0], load_local_index=str(tmp_path / "faiss.index"))
    registry.add_knowledge("kb", "Default", "admin")
    kb = KnowledgeDB(knowledge_store=registry, chunk_store=chunks, vector_store=vectors, knowledge_name="kb",
                     white_paths=[str(docs)], user_id="Default")
    embed = HashEmbedding(64).embed_documents
    assert upload_files(kb, [str(docs / "lockers.txt")], LoaderMng.with_defaults(), embed) == []
    names = {span.name for span in exporter.get_finished_spans()}  # type: ignore[attr-defined]
    assert names >= INGEST

    with ScriptedServer() as server:
        server.enqueue(Reply.json([{"index": 0, "score": 0.9}]), Reply.stream(["The blue", " key."]))
        client = ClientParam(use_http=True, retries=0)
        chain = SingleText2TextChain(
            llm=Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted", client_param=client),
            retriever=kb.scoped(HybridRetriever(vector_store=vectors, document_store=chunks, embed_func=embed, k=3)),
            reranker=TEIReranker(url=server.url("/rerank"), k=1, client_param=client),
        )
        from opentelemetry.sdk.trace import TracerProvider

        with TracerProvider().get_tracer("app").start_as_current_span("question") as question:  # the caller's span
            answers = list(chain.query("Which key opens the Lockers?", LLMParameterConfig(stream=True)))
    assert answers[-1]["result"] == "The blue key."
    spans = {span.name: span for span in exporter.get_finished_spans()}  # type: ignore[attr-defined]
    assert set(spans) >= QUERY
    # every stage is a child of the caller's span, the keyword search too (it runs on a pool thread)
    assert {spans[name].parent.span_id for name in QUERY - {"mxrag.query.llm_first_token"}} == {
        question.get_span_context().span_id}
    first, whole = spans["mxrag.query.llm_first_token"], spans["mxrag.query.llm"]
    assert first.parent.span_id == whole.context.span_id and first.end_time <= whole.end_time


def test_off_a_stage_is_a_shared_no_op_and_imports_no_opentelemetry() -> None:
    code = ("import sys; from mx_rag.utils import tracing; a = tracing.stage('x'); b = tracing.stage('y'); "
            "assert a is b and not tracing.enabled(); "
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')]")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PATH": "/usr/bin", "PYTHONPATH": ":".join(sys.path)})


def test_stage_times_reach_observers_and_the_timings_of_one_context_only(tmp_path: Path) -> None:
    db = str(tmp_path / "sql.db")
    registry, chunks = KnowledgeStore(db_path=db), SQLiteDocstore(db_path=db)
    vectors = MindFAISS(x_dim=64, devs=[0], load_local_index=str(tmp_path / "faiss.index"))
    registry.add_knowledge("kb", "Default", "admin")
    kb = KnowledgeDB(knowledge_store=registry, chunk_store=chunks, vector_store=vectors, knowledge_name="kb",
                     white_paths=[str(tmp_path)], user_id="Default")
    (tmp_path / "lockers.txt").write_text("Lockers open with the blue key.\n")
    embed = HashEmbedding(64).embed_documents
    assert upload_files(kb, [str(tmp_path / "lockers.txt")], LoaderMng.with_defaults(), embed) == []
    retriever = kb.scoped(HybridRetriever(vector_store=vectors, document_store=chunks, embed_func=embed, k=3))
    seen: list[tuple[str, float]] = []

    def observer(name: str, seconds: float) -> None:
        seen.append((name, seconds))

    tracing.observe(observer)
    try:
        with tracing.timings() as mine:
            other: list[tuple[str, float]] = []
            worker = threading.Thread(target=lambda: other.append(len(retriever.invoke("blue key"))))
            worker.start()
            worker.join()
            assert retriever.invoke("Which key opens the lockers?")
    finally:
        tracing.unobserve(observer)
    names = [name for name, _ in mine]
    assert {"query.embed", "query.vector_search", "query.keyword_search", "query.fusion"} <= set(names)
    assert len(names) == len(set(names))  # the other thread's stages went to the observer only
    assert len(seen) == 2 * len(names) and all(seconds >= 0 for _, seconds in seen)
    before = (len(seen), len(mine))
    assert retriever.invoke("blue key")
    assert (len(seen), len(mine)) == before  # neither is told of stages after it stopped
