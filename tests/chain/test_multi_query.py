"""MultiQueryRetriever with the scripted LLM and real stores."""

import pytest
from langchain_core.prompts import PromptTemplate

from mx_rag.errors import ParameterError
from mx_rag.llm import Text2TextLLM
from mx_rag.retrievers import MultiQueryRetriever
from mx_rag.retrievers.multi_query_retriever import DefaultOutputParser
from mx_rag.testing import Reply, ScriptedServer

REWRITES = "1. What is FAISS?\n2、What is apt in Debian?\n3) Which fruit is yellow?"


def make(stores, embed, llm, **kwargs):  # type: ignore[no-untyped-def]
    vectors, docstore = stores
    return MultiQueryRetriever(llm=llm, vector_store=vectors, document_store=docstore,
                               embed_func=embed.embed_documents, k=1, **kwargs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (REWRITES, ["What is FAISS?", "What is apt in Debian?", "Which fruit is yellow?"]),
        ("Here are three questions:\n1. A?\n\n2. B?", ["A?", "B?"]),
        ("2024年高考作文\n3.7 million people\n10000 words\n1. Real question?", ["Real question?"]),
        ("（1）中文编号的问题？\n2：第二个？", ["中文编号的问题？", "第二个？"]),
        ("no numbers at all", []),
    ],
)
def test_parser(text: str, expected: list[str]) -> None:
    assert DefaultOutputParser().parse(text) == expected


def test_every_rewrite_and_the_question_are_searched(stores, embed, llm: Text2TextLLM,  # type: ignore[no-untyped-def]
                                                     server: ScriptedServer) -> None:
    server.enqueue(Reply.chat(REWRITES))
    docs = make(stores, embed, llm).invoke("Tell me about the mxVision architecture")
    contents = [d.page_content for d in docs]
    assert len(contents) == len(set(contents)) == 4  # question + 3 rewrites, k=1 each, all distinct
    assert contents == sorted(contents, key=len, reverse=True)
    assert "{question}" not in server.requests[0].json["messages"][-1]["content"]
    assert "Tell me about the mxVision architecture" in server.requests[0].json["messages"][-1]["content"]


def test_rrf_fusion(stores, embed, llm: Text2TextLLM, server: ScriptedServer) -> None:  # type: ignore[no-untyped-def]
    server.enqueue(Reply.chat("1. What is FAISS?\n2. FAISS similarity search library"))
    docs = make(stores, embed, llm, fusion="rrf").invoke("What is FAISS?")
    assert "FAISS" in docs[0].page_content and docs[0].metadata["rrf_score"] > 0


def test_llm_failure_falls_back_to_the_question(stores, embed, llm: Text2TextLLM,  # type: ignore[no-untyped-def]
                                                server: ScriptedServer) -> None:
    server.enqueue(Reply.status(400, "bad"))
    docs = make(stores, embed, llm).invoke("What is FAISS?")
    assert len(docs) == 1 and "FAISS" in docs[0].page_content


def test_prompt_must_take_question(stores, embed, llm: Text2TextLLM) -> None:  # type: ignore[no-untyped-def]
    bad = PromptTemplate(input_variables=["query"], template="{query}")
    with pytest.raises(ParameterError, match="prompt"):
        make(stores, embed, llm, prompt=bad)
    custom = PromptTemplate(input_variables=["question"], template="Rewrite: {question}")
    assert make(stores, embed, llm, prompt=custom).prompt.template == "Rewrite: {question}"


def test_copied_examples_and_cut_lines_are_dropped(stores, embed, llm: Text2TextLLM,  # type: ignore[no-untyped-def]
                                                   server: ScriptedServer) -> None:
    copied = "1. What were Einstein's life and main scientific achievements?\n2. What is FAISS?\n3. What is apt......"
    server.enqueue(Reply.chat(copied))
    assert make(stores, embed, llm).generate_queries("Tell me about vectors") == ["Tell me about vectors",
                                                                                  "What is FAISS?"]
    assert "Answer in English" in server.requests[0].json["messages"][-1]["content"]
    server.enqueue(Reply.chat("1. 什么是FAISS？"))
    make(stores, embed, llm).generate_queries("介绍一下向量检索")
    assert "用中文回答" in server.requests[1].json["messages"][-1]["content"]
