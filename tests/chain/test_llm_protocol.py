"""Any LangChain model as a chain's LLM: LangChain's own ``ChatOpenAI`` (the real openai client over
HTTP) against the scripted server, through our chains, the multi-query retriever and CoRAG's check."""

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models import FakeListLLM
from langchain_openai import ChatOpenAI

from mx_rag.chain import SingleText2TextChain
from mx_rag.corag.config import check_llm
from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.llm.protocol import ChatLLM, LangChainLLM, chat_llm
from mx_rag.retrievers import MultiQueryRetriever, Retriever
from mx_rag.testing import HashEmbedding, Reply, ScriptedServer
from mx_rag.utils import ClientParam

QUESTION = "Which modules does the mxVision architecture contain?"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def chat_openai(server: ScriptedServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.url("/v1"), api_key="sk-test", model="scripted",  # type: ignore[arg-type]
                      max_retries=0, **kwargs)


def test_our_client_is_taken_as_it_is(server: ScriptedServer) -> None:
    ours = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                        client_param=ClientParam(use_http=True))
    assert chat_llm("llm", ours) is ours and isinstance(ours, ChatLLM)


def test_chain_answers_through_chat_openai_with_roles_and_settings(server: ScriptedServer,
                                                                   retriever: Retriever) -> None:
    server.enqueue(Reply.chat("stream manager, plugins, inference"))
    chain = SingleText2TextChain(llm=chat_openai(server), retriever=retriever,
                                 sys_messages=[{"role": "system", "content": "Answer briefly."}])
    result = chain.query(QUESTION, LLMParameterConfig(max_tokens=77, temperature=0.3, top_p=0.9))
    assert result["result"] == "stream manager, plugins, inference"
    body = server.requests[0].json
    assert [m["role"] for m in body["messages"]] == ["system", "user"]  # the system role is kept
    assert body["messages"][0]["content"] == "Answer briefly."
    assert body["messages"][1]["content"].endswith(QUESTION)
    assert (body.get("max_tokens") or body.get("max_completion_tokens"), body["temperature"], body["top_p"]) == \
        (77, 0.3, 0.9)


def test_chain_streams_through_chat_openai(server: ScriptedServer, retriever: Retriever) -> None:
    server.enqueue(Reply.stream(["stream ", "manager"]))
    chain = SingleText2TextChain(llm=chat_openai(server), retriever=retriever)
    answers = [item["result"] for item in chain.query(QUESTION, LLMParameterConfig(stream=True))]
    assert answers == ["stream ", "stream manager"]  # the empty role chunk of ChatOpenAI is not an answer
    assert server.requests[0].json["stream"] is True


def test_pass_config_false_leaves_the_models_own_settings(server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("ok"))
    llm = LangChainLLM(chat_openai(server, temperature=0.0), pass_config=False)
    assert llm.chat("hi", llm_config=LLMParameterConfig(temperature=1.5)) == "ok"
    assert server.requests[0].json["temperature"] == 0.0


def test_multi_query_rewrites_with_a_langchain_text_model(stores: Any, embed: HashEmbedding) -> None:
    vectors, docstore = stores
    retriever = MultiQueryRetriever(llm=FakeListLLM(responses=["1. What is FAISS used for?"]), vector_store=vectors,
                                    document_store=docstore, embed_func=embed.embed_documents, k=2)
    assert isinstance(retriever.llm, LangChainLLM)
    assert retriever.generate_queries("Tell me about FAISS.") == ["Tell me about FAISS.", "What is FAISS used for?"]


def test_corag_takes_a_langchain_model_and_chat_only_objects(retriever: Retriever) -> None:
    class ChatOnly:
        def chat(self, query: str, llm_config: Any = None) -> str:
            return "x"

    assert isinstance(check_llm("base_llm", FakeListLLM(responses=["a"])), LangChainLLM)
    only = ChatOnly()
    assert check_llm("base_llm", only) is only
    with pytest.raises(ParameterError, match="llm must be"):
        SingleText2TextChain(llm=only, retriever=retriever)  # chains stream: chat() is not enough


@pytest.mark.parametrize("bad", [None, "gpt-4", 3])
def test_anything_else_is_refused_naming_the_parameter(bad: Any) -> None:
    with pytest.raises(ParameterError, match=r"^judge_llm must be a Text2TextLLM, an object with chat\(\)"):
        chat_llm("judge_llm", bad)
    with pytest.raises(ParameterError, match=r"^model must be a LangChain"):
        LangChainLLM(bad)


class _GrowingOnly:
    """A user's LLM that streams only the answer so far (the original's shape), with no ``chat_deltas``."""

    def chat(self, query: str, sys_messages: Any = None, role: str = "user", llm_config: Any = None) -> str:
        return "stream manager"

    def chat_streamly(self, query: str, sys_messages: Any = None, role: str = "user",
                      llm_config: Any = None) -> Iterator[str]:
        yield from ["stream", "stream", "stream man", "stream manager"]  # a repeat adds nothing


@pytest.mark.parametrize("llm", ["ours", "langchain", "growing"])
def test_stream_sends_the_deltas_then_the_whole_result(llm: str, server: ScriptedServer,
                                                       retriever: Retriever) -> None:
    server.enqueue(Reply.stream(["stream", " man", "ager"]))
    model: Any = {"ours": lambda: Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                                               client_param=ClientParam(use_http=True)),
                  "langchain": lambda: chat_openai(server), "growing": _GrowingOnly}[llm]()
    chain = SingleText2TextChain(llm=model, retriever=retriever)
    events = list(chain.stream(QUESTION))
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "result" and set(kinds[:-1]) == {"delta"}
    assert "".join(value for kind, value in events if kind == "delta") == "stream manager"
    result = events[-1][1]
    assert result["query"] == QUESTION and result["result"] == "stream manager"
    assert [d["page_content"] for d in result["source_documents"]]  # the sources come with the result
    if llm != "growing":
        assert [value for kind, value in events if kind == "delta"] == ["stream", " man", "ager"]
        assert server.requests[-1].json["stream"] is True
