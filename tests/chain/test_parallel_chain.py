"""ParallelText2TextChain: same documents as the single chain, prefix warm-up, no cross-talk."""

import concurrent.futures
import time

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.chain import ParallelText2TextChain, SingleText2TextChain
from mx_rag.chain.parallel_text_to_text import NEXT_RAG_PROMPT
from mx_rag.errors import RemoteResponseError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.testing import Reply, ScriptedServer

QUESTION = "Which modules does the mxVision architecture contain?"


def test_answer_uses_the_same_documents_and_both_keys(llm: Text2TextLLM, retriever: Retriever,
                                                      server: ScriptedServer) -> None:
    single = SingleText2TextChain(llm=llm, retriever=retriever).query(QUESTION)
    server.reset()
    result = ParallelText2TextChain(llm=llm, retriever=retriever).query(text=QUESTION)
    assert result["query"] == result["prompt"] == QUESTION
    assert result["source_documents"] == single["source_documents"]
    warmup, final = server.requests
    assert warmup.json["max_tokens"] == 1
    prefix = warmup.json["messages"][-1]["content"]
    content = final.json["messages"][-1]["content"]
    assert content.startswith(prefix) and prefix.endswith(QUESTION)
    assert NEXT_RAG_PROMPT in content
    for doc in single["source_documents"]:
        assert doc["page_content"] in content


def test_stream_returns_an_iterator_with_sources(llm: Text2TextLLM, retriever: Retriever,
                                                 server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("x"), Reply.stream(["a", "b"]))
    items = list(ParallelText2TextChain(llm=llm, retriever=retriever).query(QUESTION, LLMParameterConfig(stream=True)))
    assert [i["result"] for i in items] == ["a", "ab"]
    assert all(i["source_documents"] and i["prompt"] == QUESTION for i in items)


def test_failed_warmup_does_not_fail_the_answer(llm: Text2TextLLM, retriever: Retriever,
                                                server: ScriptedServer) -> None:
    server.enqueue(Reply.status(400, "warm-up refused"), Reply.chat("still answered"))
    assert ParallelText2TextChain(llm=llm, retriever=retriever).query(QUESTION)["result"] == "still answered"


def test_slow_warmup_is_not_waited_for(llm: Text2TextLLM, retriever: Retriever, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("late", delay=3.0), Reply.chat("answer"))
    started = time.monotonic()
    result = ParallelText2TextChain(llm=llm, retriever=retriever, warmup_timeout=0.2).query(QUESTION)
    assert result["result"] == "answer"
    assert time.monotonic() - started < 2.5


class SlowRetriever(BaseRetriever):
    delay: float
    inner: BaseRetriever

    def _get_relevant_documents(self, query, *, run_manager=None):  # type: ignore[no-untyped-def]
        time.sleep(self.delay)
        return self.inner.invoke(query)


def test_retrieval_and_warmup_overlap(llm: Text2TextLLM, retriever: Retriever, server: ScriptedServer) -> None:
    slow = SlowRetriever(delay=0.5, inner=retriever)
    server.enqueue(Reply.chat("warm", delay=0.5), Reply.chat("answer"))
    started = time.monotonic()
    ParallelText2TextChain(llm=llm, retriever=slow).query(QUESTION)
    assert time.monotonic() - started < 0.95  # 0.5 s + 0.5 s would be sequential


def test_retrieval_error_propagates(llm: Text2TextLLM, retriever: Retriever) -> None:
    class Broken(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):  # type: ignore[no-untyped-def]
            raise RemoteResponseError("index offline")

    with pytest.raises(RemoteResponseError, match="index offline"):
        ParallelText2TextChain(llm=llm, retriever=Broken()).query(QUESTION)


def test_concurrent_queries_never_mix(llm: Text2TextLLM, retriever: Retriever) -> None:
    chain = ParallelText2TextChain(llm=llm, retriever=retriever)
    questions = [f"question number {i}" for i in range(12)]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(chain.query, questions))
    for question, result in zip(questions, results, strict=True):
        assert result["query"] == question
        assert f"\n\n{question}\n\n{NEXT_RAG_PROMPT}" in result["result"]  # the echo of its own prompt


def test_custom_builder_is_used_as_given(llm: Text2TextLLM, retriever: Retriever, server: ScriptedServer) -> None:
    chain = ParallelText2TextChain(llm=llm, retriever=retriever, user_content_builder=lambda q, d, p: f"Q: {q}",
                                   sys_messages=[{"role": "system", "content": "long system prompt"}])
    chain.query(QUESTION)
    assert server.requests[-1].json["messages"][-1]["content"] == f"Q: {QUESTION}"
    assert server.requests[0].json["messages"][0]["content"] == "long system prompt"


def test_documents_are_never_dropped() -> None:
    from mx_rag.chain.parallel_text_to_text import _parallel_user_content_builder

    docs = [Document(page_content="d1"), Document(page_content="d2")]
    assert _parallel_user_content_builder("q", docs, "P") == f"P\n\nq\n\n{NEXT_RAG_PROMPT}\nd1\n\nd2"
    assert _parallel_user_content_builder("q", [], "P") == "P\n\nq"
