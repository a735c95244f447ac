"""Summary over a scripted OpenAI-compatible server (the prompts and rounds it sends), plus one llama.cpp case."""

from collections.abc import Iterator

import pytest
from langchain_core.prompts import PromptTemplate

from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.summary import Summary
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

EN_TEXT = "FAISS is a library for efficient similarity search and clustering of dense vectors. " * 3
ZH_TEXT = "FAISS 是一个用于稠密向量高效相似度搜索和聚类的库，由 Meta 的研究团队开发并开源。" * 2


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def summary(server: ScriptedServer) -> Summary:
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                       client_param=ClientParam(use_http=True, retries=0))
    return Summary(llm=llm)


def _prompts(server: ScriptedServer) -> list[str]:
    return [request.json["messages"][-1]["content"] for request in server.requests]


def test_summarize_keeps_short_texts_and_sends_the_settings(summary: Summary, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("FAISS searches vectors."))
    out = summary.summarize(["too short", EN_TEXT])
    assert out == ["too short", "FAISS searches vectors."]
    assert len(server.requests) == 1  # the short text never went to the LLM
    body = server.requests[0].json
    assert body["temperature"] == 0.5 and body["top_p"] == 0.95
    assert body["messages"][-1]["content"].startswith("Summarise the following text") and EN_TEXT in _prompts(server)[0]


def test_chinese_text_gets_the_documented_chinese_prompt(summary: Summary, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("FAISS 是向量搜索库。"))
    assert summary.summarize([ZH_TEXT]) == ["FAISS 是向量搜索库。"]
    assert _prompts(server)[0].startswith("使用简洁的语言提取以下内容的摘要") and _prompts(server)[0].endswith(ZH_TEXT)


def test_custom_prompt_and_threshold(summary: Summary, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("one"))
    prompt = PromptTemplate(input_variables=["text"], template="TL;DR: {text}")
    assert summary.summarize(["abcdef"], not_summarize_threshold=5, prompt=prompt) == ["one"]
    assert _prompts(server) == ["TL;DR: abcdef"]


def test_merge_is_map_reduce_within_the_threshold(summary: Summary, server: ScriptedServer) -> None:
    parts = [f"Part {i}: " + "x" * 400 for i in range(5)]  # 3 groups of at most 1024 characters
    server.enqueue(*(Reply.chat(f"merged {i} " + "y" * 40) for i in range(3)), Reply.chat("final summary"))
    assert summary.merge_text_summarize(parts, merge_threshold=1024) == "final summary"
    prompts = _prompts(server)
    assert len(prompts) == 4
    assert all(len(p) <= 1024 + 200 for p in prompts[:3])  # each group within the threshold (plus the prompt)
    assert all(f"merged {i}" in prompts[3] for i in range(3))
    assert prompts[0].startswith("Merge the following summaries")


def test_merge_splits_a_text_longer_than_the_threshold(summary: Summary, server: ScriptedServer) -> None:
    server.enqueue(Reply.chat("a"), Reply.chat("b"), Reply.chat("ab"))
    assert summary.merge_text_summarize(["z" * 2000], merge_threshold=1024, not_summarize_threshold=1) == "ab"
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.summarize([]), "texts must be a list of 1 to 1024 strings"),
        (lambda s: s.summarize(["x"] * 1025), "texts must be a list of 1 to 1024 strings"),
        (lambda s: s.summarize(["x" * (1024 * 1024 + 1)]), "characters in all"),
        (lambda s: s.summarize(["abc"], not_summarize_threshold=0), "not_summarize_threshold must be in [1, 1048576]"),
        (lambda s: s.summarize(["abc"], prompt=PromptTemplate(input_variables=["doc"], template="{doc}")),
         "prompt.input_variables must be"),
        (lambda s: s.merge_text_summarize(["abc"], merge_threshold=1023), "merge_threshold must be in [1024, 1048576]"),
        (lambda s: s.merge_text_summarize(["abc"], merge_threshold=2000, not_summarize_threshold=2000),
         "more than not_summarize_threshold"),
    ],
)
def test_bad_arguments_name_the_parameter(summary: Summary, call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=message.replace("[", r"\[").replace("(", r"\(")):
        call(summary)


def test_constructor_checks_types() -> None:
    with pytest.raises(ParameterError, match="llm must be a Text2TextLLM"):
        Summary(llm="not an llm")  # type: ignore[arg-type]


@pytest.mark.llm
def test_summary_with_the_embedded_llm(local_llm) -> None:  # type: ignore[no-untyped-def]
    llm = Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,
                       client_param=ClientParam(use_http=True, timeout=600))
    summary = Summary(llm, LLMParameterConfig(max_tokens=40, temperature=0.0, seed=1))
    parts = summary.summarize([EN_TEXT, "Norwich City is a football club based in Norwich, England. " * 3])
    assert len(parts) == 2 and all(part.strip() for part in parts)
    assert summary.merge_text_summarize(parts).strip()
