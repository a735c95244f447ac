"""SingleText2TextChain against real stores and the scripted LLM server."""

import asyncio
import copy

import pytest
from langchain_core.documents import Document

from mx_rag.chain import SingleText2TextChain
from mx_rag.chain.single_text_to_text import DEFAULT_RAG_PROMPT, _user_content_builder, question_first_content
from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.reranker import Reranker
from mx_rag.retrievers import Retriever
from mx_rag.testing import Reply, ScriptedServer

QUESTION = "Which modules does the mxVision architecture contain?"


def test_default_builder_matches_the_documented_layout() -> None:
    docs = [Document(page_content="doc one"), Document(page_content="doc two")]
    assert _user_content_builder("q?", copy.deepcopy(docs), "PROMPT") == "doc one\n\ndoc two\n\nPROMPT\n\nq?"
    assert _user_content_builder("q?", [], "PROMPT") == "q?"
    assert _user_content_builder("q?", copy.deepcopy(docs), "") == "doc one\n\ndoc two\n\nq?"


def test_question_first_layout_labels_the_question_in_its_language() -> None:
    """The served layout: the question, the documented layout, the question again (only the query without docs)."""
    docs = [Document(page_content="d1"), Document(page_content="d2")]
    assert question_first_content("q?", docs, "P") == "Question: q?\n\nd1\n\nd2\n\nP\n\nQuestion: q?"
    assert question_first_content("哪个文件？", docs, "P") == "问题：哪个文件？\n\nd1\n\nd2\n\nP\n\n问题：哪个文件？"
    assert question_first_content("q?", [], "P") == "q?"
    assert [d.page_content for d in docs] == ["d1", "d2"]  # the documents are not changed


def test_query_sends_documents_prompt_and_question(llm: Text2TextLLM, retriever: Retriever,
                                                   server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("stream manager, plugins, inference"))
    result = SingleText2TextChain(llm=llm, retriever=retriever).query(QUESTION)
    assert result["query"] == QUESTION
    assert result["result"] == "stream manager, plugins, inference"
    assert "mxVision architecture contains" in result["source_documents"][0]["page_content"]
    assert set(result["source_documents"][0]) == {"metadata", "page_content"}
    body = server.requests[0].json
    content = body["messages"][-1]["content"]
    assert content.startswith(result["source_documents"][0]["page_content"])
    assert content.endswith(f"{DEFAULT_RAG_PROMPT}\n\n{QUESTION}")
    assert (body["temperature"], body["top_p"]) == (0.5, 0.95)  # the chain's documented defaults
    assert "\n\n" + DEFAULT_RAG_PROMPT not in result["source_documents"][-1]["page_content"]


def test_source_false_and_custom_config(llm: Text2TextLLM, retriever: Retriever, server: ScriptedServer) -> None:
    chain = SingleText2TextChain(llm=llm, retriever=retriever, source=False)
    result = chain.query(QUESTION, LLMParameterConfig(max_tokens=1024, temperature=1.0, top_p=0.1))
    assert set(result) == {"query", "result"}
    assert (server.requests[0].json["max_tokens"], server.requests[0].json["top_p"]) == (1024, 0.1)


def test_stream_yields_fresh_dicts_with_sources(llm: Text2TextLLM, retriever: Retriever,
                                                server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(["stream ", "manager"]))
    items = list(SingleText2TextChain(llm=llm, retriever=retriever).query(QUESTION, LLMParameterConfig(stream=True)))
    assert [i["result"] for i in items] == ["stream ", "stream manager"]
    assert items[0] is not items[1]
    assert all(len(i["source_documents"]) == 2 for i in items)


def test_stream_without_documents_still_has_sources_key(llm: Text2TextLLM, stores, embed) -> None:  # type: ignore[no-untyped-def]
    vectors, docstore = stores
    empty = Retriever(vector_store=vectors, document_store=docstore, embed_func=embed.embed_documents,
                      k=2, score_threshold=1.0)
    items = list(SingleText2TextChain(llm=llm, retriever=empty).query("zzz", LLMParameterConfig(stream=True)))
    assert items and all(i["source_documents"] == [] for i in items)


def test_sys_messages_never_accumulate(llm: Text2TextLLM, retriever: Retriever, server: ScriptedServer) -> None:
    sys_messages = [{"role": "system", "content": "You are a friendly assistant."}]
    chain = SingleText2TextChain(llm=llm, retriever=retriever, sys_messages=sys_messages)
    for i in range(20):  # the original failed on the 17th query
        chain.query(f"{QUESTION} ({i})")
    assert all(len(r.json["messages"]) == 2 for r in server.requests)
    assert sys_messages == [{"role": "system", "content": "You are a friendly assistant."}]


def test_custom_builder_with_the_seed_signature(llm: Text2TextLLM, retriever: Retriever,
                                                server: ScriptedServer) -> None:
    def builder(query, docs, *args, **kwargs):  # type: ignore[no-untyped-def]
        text_docs = [d for d in docs if d.metadata.get("type", "") == "text"]
        quotes = "".join(f"\n[{i + 1}] {d.page_content}" for i, d in enumerate(text_docs))
        return f"Text Quotes are:{quotes}\n\nThe user question is: {query}"

    chain = SingleText2TextChain(llm=llm, retriever=retriever, user_content_builder=builder)
    chain.query(QUESTION)
    content = server.requests[0].json["messages"][-1]["content"]
    assert content.startswith("Text Quotes are:\n[1] ") and content.endswith(QUESTION)


class ReverseReranker(Reranker):
    """Scores by position, reversed: a real Reranker subclass with a trivial scoring rule."""

    def rerank(self, query, texts, batch_size=32):  # type: ignore[no-untyped-def]
        return list(range(len(texts)))


def test_reranker_reorders_and_truncates(llm: Text2TextLLM, retriever: Retriever) -> None:
    plain = SingleText2TextChain(llm=llm, retriever=retriever).query(QUESTION)
    reranked = SingleText2TextChain(llm=llm, retriever=retriever, reranker=ReverseReranker(k=1)).query(QUESTION)
    assert [d["page_content"] for d in reranked["source_documents"]] == [plain["source_documents"][1]["page_content"]]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"prompt": ""}, "prompt"), ({"prompt": "x" * (1024 * 1024 + 1)}, "prompt"),
     ({"sys_messages": [{"role": "system"}] * 17}, "sys_messages"), ({"source": "yes"}, "source"),
     ({"user_content_builder": "not callable"}, "user_content_builder"), ({"reranker": object()}, "reranker")],
)
def test_constructor_limits(llm: Text2TextLLM, retriever: Retriever, kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        SingleText2TextChain(llm=llm, retriever=retriever, **kwargs)


def test_query_limits(llm: Text2TextLLM, retriever: Retriever) -> None:
    chain = SingleText2TextChain(llm=llm, retriever=retriever, user_content_builder=lambda q, d, p: "")
    with pytest.raises(ParameterError, match="text"):
        chain.query("")
    with pytest.raises(ParameterError, match="text"):
        chain.query("x" * 1_000_001)
    with pytest.raises(ParameterError, match="llm_config"):
        chain.query("q", {"temperature": 0})  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="user_content_builder result"):
        chain.query("q")


def test_aquery_plain_and_streamed(llm: Text2TextLLM, retriever: Retriever, server: ScriptedServer) -> None:
    chain = SingleText2TextChain(llm=llm, retriever=retriever)

    async def run() -> tuple[dict, list[dict]]:
        plain = await chain.aquery(QUESTION)
        streamed = await chain.aquery(QUESTION, LLMParameterConfig(stream=True))
        return plain, [item async for item in streamed]  # type: ignore[union-attr]

    plain, items = asyncio.run(run())
    assert plain["result"].startswith("echo: ")
    assert items[-1]["result"] == plain["result"]
