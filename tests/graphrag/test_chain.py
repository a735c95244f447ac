# SPDX-License-Identifier: Apache-2.0
"""GraphRagText2TextChain over a built graph, with a scripted LLM."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from mx_rag.chain import GraphRagText2TextChain
from mx_rag.chain.graph_text_to_text import TEXT_RAG_TEMPLATE
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer

from .conftest import PARAGRAPHS, QUESTION, last_message


class StringRetriever(BaseRetriever):
    """Answers like the original GraphRetriever: a list of str."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> Any:
        return ["fact one", "fact two"]


def test_query_answers_from_the_graph_contexts(built: GraphRAGPipeline, llm: Text2TextLLM,
                                               server: ScriptedServer) -> None:
    chain = GraphRagText2TextChain(llm=llm, retriever=built.as_retriever())
    server.enqueue(Reply.chat("Columbus, Ohio."))
    result = chain.query(QUESTION)
    assert result == {"query": QUESTION, "result": "Columbus, Ohio."}
    prompt = last_message(server.requests[-1])
    assert prompt.startswith(TEXT_RAG_TEMPLATE[:40]) and prompt.endswith(f"Question: {QUESTION}\nAnswer:")
    assert PARAGRAPHS["krilanovich"] in prompt and PARAGRAPHS["two_dollar_radio"] in prompt
    assert server.requests[-1].json["temperature"] == 0.5 and server.requests[-1].json["stream"] is False


def test_stream_follows_the_query_config(built: GraphRAGPipeline, llm: Text2TextLLM, server: ScriptedServer) -> None:
    chain = GraphRagText2TextChain(llm=llm, retriever=built.as_retriever(), source=True)
    server.enqueue(Reply.stream(["Colum", "bus"]))
    items = list(chain.query(QUESTION, LLMParameterConfig(stream=True, max_tokens=16)))
    assert [item["result"] for item in items][-1] == "Columbus"
    assert items[-1]["source_documents"][0]["page_content"] == PARAGRAPHS["krilanovich"]
    assert items[-1]["source_documents"][0]["metadata"]["type"] == "chunk"
    assert server.requests[-1].json["stream"] is True


def test_a_retriever_of_strings_still_works(llm: Text2TextLLM, server: ScriptedServer) -> None:
    chain = GraphRagText2TextChain(llm=llm, retriever=StringRetriever(), prompt="{context}|{question}")
    server.enqueue(Reply.chat("ok"))
    assert chain.query("q?")["result"] == "ok"
    assert last_message(server.requests[-1]) == "fact one\nfact two|q?"


def test_sys_messages_are_not_accumulated(built: GraphRAGPipeline, llm: Text2TextLLM,
                                          server: ScriptedServer) -> None:
    system = [{"role": "system", "content": "Be brief."}]
    chain = GraphRagText2TextChain(llm=llm, retriever=built.as_retriever(), sys_messages=system)
    for _ in range(3):
        server.enqueue(Reply.chat("x"))
        chain.query(QUESTION)
    assert len(server.requests[-1].json["messages"]) == 2 and system == [{"role": "system", "content": "Be brief."}]


def test_no_context_still_asks(llm: Text2TextLLM, server: ScriptedServer) -> None:
    class Empty(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return []

    server.enqueue(Reply.chat("I don't know."))
    assert GraphRagText2TextChain(llm=llm, retriever=Empty()).query("q?")["result"] == "I don't know."
