"""CoRagAgent, CoRagBaseConfig, prompts and text budget: scripted OpenAI-compatible LLM, real retrieval.

Retrieval is a real ``Retriever`` (MindFAISS + SQLiteDocstore + HashEmbedding) over the HotpotQA
sample paragraphs, behind a small ``DocumentSource``. Sequential flows script the LLM by queue
order; threaded flows use ``Router``, a ScriptedServer whose reply depends on the prompt.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mx_rag.corag.config import DEFAULT_SAMPLE_TASK_DESC, DEFAULT_TASK_DESC, CoRagBaseConfig
from mx_rag.corag.corag_agent import CoRagAgent, ReasoningPath
from mx_rag.corag.prompts import (
    NO_RELEVANT_INFO,
    clean_answer,
    is_prompt_echo,
    parse_judge_score,
    parse_subquery,
    unique_documents,
)
from mx_rag.corag.retrieval_policy import RetrievalCounts
from mx_rag.corag.text_budget import TextBudget, estimate_tokens, truncate_middle
from mx_rag.corag.types import RetrievedDocument
from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.retrievers.sources import RetrievalError
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import HashEmbedding, RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

HOTPOT = Path(__file__).resolve().parents[1] / "data" / "multihop" / "hotpotqa_sample.json"
TASK = "answer multi-hop questions"
NOLAN_Q = "Are Christopher Nolan and Sathish Kalathil both film directors?"


# -- shared helpers (test_decoding.py imports them) -------------------------------------------------


def build_kb(root: Path, dim: int = 512) -> Retriever:
    """A real dense retriever over every HotpotQA sample paragraph (one chunk each, titled)."""
    items = json.loads(HOTPOT.read_text(encoding="utf-8"))
    paragraphs: dict[str, str] = {}
    for item in items:
        for title, sentences in item["context"]:
            paragraphs.setdefault(title, "".join(sentences).strip())
    embed = HashEmbedding(dim)
    docstore = SQLiteDocstore(db_path=str(root / "kb.db"))
    vectors = MindFAISS(x_dim=dim, devs=[0], load_local_index=str(root / "kb.index"))
    ids = docstore.add([MxDocument(text, {"title": title}) for title, text in paragraphs.items()], 1)
    vectors.add(ids, embed.embed_documents(list(paragraphs.values())), document_id=1)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=embed.embed_documents, k=3)


class KbSource:
    """A ``DocumentSource`` over a ``Retriever``; document ids are the paragraph titles."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self.queries: list[str] = []

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        self.queries.append(query)
        docs = self.retriever.model_copy(update={"k": top_k}).invoke(query)
        return [RetrievedDocument(id=d.metadata["title"], text=d.page_content) for d in docs]


class FailingSource:
    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        raise ConnectionError("retrieval service down")


class FixedSource:
    def __init__(self, docs: list[str]) -> None:
        self.docs = docs

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        return [RetrievedDocument(id=f"d{i}", text=t) for i, t in enumerate(self.docs[:top_k])]


class Router(ScriptedServer):
    """A ScriptedServer that answers from ``route(prompt, body)`` once its queue is empty."""

    def __init__(self, route: Callable[[str, dict[str, Any]], str]) -> None:
        super().__init__()
        self.route = route
        self.lock = threading.Lock()

    def _take(self, record: RecordedRequest) -> Reply | None:
        queued = super()._take(record)
        if queued is not None:
            return queued
        body = record.json if isinstance(record.json, dict) else {}
        return Reply.chat(self.route(body["messages"][-1]["content"], body))


def section(prompt: str, name: str) -> str:
    """The text of a ``## name`` section of one of our prompts."""
    match = re.search(rf"## {re.escape(name)}\n(.*?)(?:\n\n## |\Z)", prompt, re.DOTALL)
    assert match, f"no section {name!r} in {prompt[:200]!r}"
    return match.group(1).strip()


def kind_of(prompt: str) -> str:
    if "Rate from 1 to 10" in prompt:
        return "judge"
    if "## Reference documents" in prompt:
        return "final"
    if "## Documents" in prompt:
        return "subanswer"
    return "subquery"


def make_llm(server: ScriptedServer, **config: Any) -> Text2TextLLM:
    settings = {"max_tokens": 64, "temperature": 0.2, "seed": 7, **config}
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                        llm_config=LLMParameterConfig(**settings), client_param=ClientParam(use_http=True, retries=0))


def prompts(server: ScriptedServer) -> list[str]:
    return [r.json["messages"][-1]["content"] for r in server.requests]


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return build_kb(tmp_path_factory.mktemp("corag_kb"))


@pytest.fixture
def source(kb: Retriever) -> KbSource:
    return KbSource(kb)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def llm(server: ScriptedServer) -> Text2TextLLM:
    return make_llm(server)


def chats(*texts: str) -> list[Reply]:
    return [Reply.chat(t) for t in texts]


# -- sample_path ------------------------------------------------------------------------------------


def test_path_holds_exact_steps_documents_and_prompts(server: ScriptedServer, llm: Text2TextLLM,
                                                      source: KbSource) -> None:
    server.enqueue(*chats("SubQuery: Is Christopher Nolan a film director?", "Yes, a British-American director.",
                          'Step 2: "Who is Sathish Kalathil?"', "An Indian film director."))
    agent = CoRagAgent(llm, source, retrieve_top_k=3)
    path = agent.sample_path(NOLAN_Q, TASK, max_path_length=2)

    assert path.original_query == NOLAN_Q
    assert path.subqueries == ["Is Christopher Nolan a film director?", "Who is Sathish Kalathil?"]
    assert path.subanswers == ["Yes, a British-American director.", "An Indian film director."]
    expected = [source.retrieve(q, 3) for q in path.subqueries]
    assert path.document_ids == [[d.id for d in docs] for docs in expected]
    assert path.documents == [[d.text for d in docs] for docs in expected]
    assert path.document_ids[0][0] == "Christopher Nolan"
    assert path.reasoning_steps == [None, None]
    assert path.stop_reason == "max_path_length" and not path.stopped_early
    assert path.tokens_used > 0

    sent = prompts(server)
    assert [kind_of(p) for p in sent] == ["subquery", "subanswer", "subquery", "subanswer"]
    assert section(sent[0], "Main question") == NOLAN_Q and section(sent[0], "Previous searches") == "None yet."
    assert section(sent[0], "Task") == TASK
    assert section(sent[1], "Question") == "Is Christopher Nolan a film director?"
    assert section(sent[1], "Documents").startswith("Document 1:\n" + expected[0][0].text)
    assert section(sent[2], "Previous searches") == (
        "Step 1: Is Christopher Nolan a film director?\nAnswer 1: Yes, a British-American director."
    )


def test_path_positional_construction_as_documented() -> None:
    path = ReasoningPath("q", ["s"], ["a"], [["d1"]], ["why"], [["text"]])
    assert (path.subqueries, path.document_ids, path.documents) == (["s"], [["d1"]], [["text"]])
    assert ReasoningPath("q").subqueries is not ReasoningPath("q").subqueries
    assert path.stop_reason == "" and path.score is None


def test_duplicate_subquery_is_resampled_hotter_per_call(server: ScriptedServer, llm: Text2TextLLM,
                                                         source: KbSource) -> None:
    config = llm.llm_config
    before = config.to_dict()
    server.enqueue(*chats("Who directed Maximum Overdrive?", "Stephen King.",
                          "SubQuery: who directed Maximum Overdrive", "Where is Leland, North Carolina?",
                          "In Brunswick County.", "Stephen King"))
    agent = CoRagAgent(llm, source)
    path = agent.sample_path("Who directed the film shot in Leland in 1986?", TASK, max_path_length=2)
    agent.generate_final_answer(path, TASK)

    assert path.subqueries == ["Who directed Maximum Overdrive?", "Where is Leland, North Carolina?"]
    bodies = [r.json for r in server.requests]
    assert [b["temperature"] for b in bodies] == [0.2, 0.2, 0.2, 0.7, 0.2, 0.2]
    assert [b["seed"] for b in bodies] == [7, 7, 7, 8, 7, 7]
    assert llm.llm_config is config and config.to_dict() == before  # nothing leaked into the LLM


def test_call_budget_ends_a_path_that_only_repeats(server: ScriptedServer, llm: Text2TextLLM,
                                                   source: KbSource) -> None:
    server.enqueue(*chats("Who directed Maximum Overdrive?", "Stephen King.", *["Who directed Maximum Overdrive?"] * 7))
    path = CoRagAgent(llm, source).sample_path("Who directed it?", TASK, max_path_length=2)
    assert path.subqueries == ["Who directed Maximum Overdrive?"] and path.stop_reason == "call_budget"
    assert len(server.requests) == 9  # 4 x max_path_length sub-query calls, one sub-answer
    assert [r.json["temperature"] for r in server.requests[2:]] == [0.2, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0]


def test_replies_that_echo_the_prompt_are_asked_again_not_searched(server: ScriptedServer, llm: Text2TextLLM,
                                                                    source: KbSource) -> None:
    # Replies SmolLM2-135M gave on HotpotQA: a line of the instructions, a bare label, a lead-in.
    server.enqueue(*chats("Do not repeat an earlier query.", "SubQuery: SubAnswer: SubAnswer:", "The answer is:",
                          "Who directed Maximum Overdrive?", "Stephen King."))
    path = CoRagAgent(llm, source).sample_path("Who directed the film shot in Leland in 1986?", TASK,
                                               max_path_length=1)
    assert path.subqueries == ["Who directed Maximum Overdrive?"] and path.subanswers == ["Stephen King."]
    assert len(path.document_ids) == 1  # one search: none for the echoes
    assert [r.json["temperature"] for r in server.requests] == [0.2, 0.7, 0.8, 0.9, 0.2]


def test_failing_source_gives_no_documents_and_the_path_goes_on(
    server: ScriptedServer, llm: Text2TextLLM, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(*chats("SubQuery: first", "SubQuery: second"))
    with caplog.at_level(logging.WARNING, logger="mx_rag.corag"):
        path = CoRagAgent(llm, FailingSource()).sample_path("a question", TASK, max_path_length=2)
    assert path.subqueries == ["first", "second"]
    assert path.subanswers == [NO_RELEVANT_INFO, NO_RELEVANT_INFO]
    assert path.documents == [[], []] and path.document_ids == [[], []]
    assert len(server.requests) == 2  # no sub-answer call without documents
    assert "retrieval service down" in caplog.text


def test_the_agent_counts_failed_and_empty_retrievals(server: ScriptedServer, llm: Text2TextLLM) -> None:
    failing = CoRagAgent(llm, FailingSource())
    assert failing.retrieve("q") == [] and failing.retrieve("q", top_k=2) == []
    assert failing.retrieval_stats.snapshot() == RetrievalCounts(calls=2, failures=2, empty=0)
    fixed = CoRagAgent(llm, FixedSource(["Paris is in France.", "  "]))
    assert [d.text for d in fixed.retrieve("q")] == ["Paris is in France."]
    empty = CoRagAgent(llm, FixedSource(["  "]))
    assert empty.retrieve("q") == []
    assert fixed.retrieval_stats.snapshot() == RetrievalCounts(calls=1, failures=0, empty=0)
    assert empty.retrieval_stats.snapshot() == RetrievalCounts(calls=1, failures=0, empty=1)


def test_on_retrieval_error_raise_propagates_a_retrieval_error(server: ScriptedServer, llm: Text2TextLLM) -> None:
    agent = CoRagAgent(llm, FailingSource(), on_retrieval_error="raise")
    server.enqueue(*chats("SubQuery: first"))
    with pytest.raises(RetrievalError, match=r"^ConnectionError: retrieval service down$") as raised:
        agent.sample_path("a question", TASK, max_path_length=2)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert agent.retrieval_stats.snapshot().failures == 1
    lenient = CoRagAgent(llm, FailingSource())
    with pytest.raises(RetrievalError):
        lenient.retrieve("q", on_error="raise")  # one call may ask for the error
    with pytest.raises(ParameterError, match="on_retrieval_error"):
        CoRagAgent(llm, FailingSource(), on_retrieval_error="ignore")
    with pytest.raises(ParameterError, match="on_error"):
        lenient.retrieve("q", on_error="skip")


def test_a_retrieval_error_is_raised_as_it_is(server: ScriptedServer, llm: Text2TextLLM) -> None:
    class DownApi:
        def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
            raise RetrievalError("retrieval API answered HTTP 503 (url: http://kb/retrieve)")

    with pytest.raises(RetrievalError, match="HTTP 503") as raised:
        CoRagAgent(llm, DownApi(), on_retrieval_error="raise").retrieve("q")
    assert raised.value.__cause__ is None


def test_retrieve_api_url_is_used_through_the_http_client(server: ScriptedServer, llm: Text2TextLLM) -> None:
    with ScriptedServer() as api:
        api.enqueue(Reply.json({"document_ids": ["d1"], "documents": ["Paris is the capital of France."]}),
                    Reply.status(500, {"error": "down"}))
        server.enqueue(*chats("capital of France?", "Paris.", "SubQuery: population of Paris?"))
        with CoRagAgent(llm, api.url("/retrieve"), client_param=ClientParam(use_http=True, retries=0)) as agent:
            path = agent.sample_path("What is the capital of France?", TASK, max_path_length=2)
        assert api.requests[0].json == {"query": "capital of France?", "top_k": 5}
    assert path.document_ids == [["d1"], []] and path.subanswers == ["Paris.", NO_RELEVANT_INFO]


def test_http_url_without_use_http_is_refused_at_construction(llm: Text2TextLLM) -> None:
    with pytest.raises(ParameterError, match="use_http"):
        CoRagAgent(llm, "http://127.0.0.1:9/retrieve", client_param=ClientParam(ca_file=""))
    with pytest.raises(ParameterError, match="use_http"):
        CoRagBaseConfig(llm, "http://127.0.0.1:9/retrieve")


def test_early_stop_when_the_model_gives_its_final_answer(server: ScriptedServer, llm: Text2TextLLM,
                                                          source: KbSource) -> None:
    server.enqueue(*chats("Who directed Maximum Overdrive?", "Stephen King.",
                          "<think>enough</think>Final Answer: Stephen King"))
    path = CoRagAgent(llm, source).sample_path("Who directed the 1986 film shot in Leland?", TASK, max_path_length=3)
    assert path.subqueries == ["Who directed Maximum Overdrive?"]
    assert path.stop_reason == "early_stop" and path.stopped_early
    assert len(server.requests) == 3
    assert 'reply "Final Answer: <answer>"' in prompts(server)[0]


def test_without_early_stop_a_final_answer_is_resampled(server: ScriptedServer, llm: Text2TextLLM,
                                                        source: KbSource) -> None:
    server.enqueue(*chats("Who directed Maximum Overdrive?", "Stephen King.", "Final Answer: Stephen King",
                          "Where is Leland?", "North Carolina."))
    agent = CoRagAgent(llm, source, early_stop=False)
    path = agent.sample_path("Who directed the 1986 film shot in Leland?", TASK, max_path_length=2)
    assert path.subqueries == ["Who directed Maximum Overdrive?", "Where is Leland?"]
    assert path.stop_reason == "max_path_length"
    assert "Final Answer" not in prompts(server)[0]
    assert server.requests[3].json["temperature"] == 0.7


def test_final_answer_before_any_retrieval_searches_the_question(server: ScriptedServer, llm: Text2TextLLM,
                                                                 source: KbSource) -> None:
    server.enqueue(*chats("Final Answer: yes", "Both are directors."))
    path = CoRagAgent(llm, source).sample_path(NOLAN_Q, TASK, max_path_length=1)
    assert path.subqueries == [NOLAN_Q] and path.subanswers == ["Both are directors."]


def test_token_budget_stops_before_a_step_that_would_not_fit(server: ScriptedServer, llm: Text2TextLLM,
                                                             source: KbSource) -> None:
    question = "Who directed the 1986 film shot in Leland?"
    server.enqueue(*chats("Who directed Maximum Overdrive?", "Stephen King."))
    one = CoRagAgent(llm, source).sample_path(question, TASK, max_path_length=1)
    sent = prompts(server)
    assert one.tokens_used == sum(estimate_tokens(p) for p in sent) + estimate_tokens(
        "Who directed Maximum Overdrive?") + estimate_tokens("Stephen King.")  # estimated: chat gives no usage

    server.reset()
    server.enqueue(*chats("Who directed Maximum Overdrive?", "Stephen King.", "Where is Leland?", "NC."))
    agent = CoRagAgent(llm, source, max_tokens_per_question=one.tokens_used * 3 // 2)
    path = agent.sample_path(question, TASK, max_path_length=3)
    assert path.stop_reason == "token_budget" and len(path.subqueries) == 1
    assert path.tokens_used == one.tokens_used <= agent.max_tokens_per_question
    assert len(server.requests) == 2


class UsageLLM:
    """An LLM that reports the server's usage: the agent counts it instead of estimating."""

    llm_config = LLMParameterConfig(max_tokens=32)

    def __init__(self, replies: list[str]) -> None:
        self.replies = iter(replies)

    def chat(self, query: str, sys_messages: Any = None, role: str = "user", llm_config: Any = None) -> str:
        raise AssertionError("chat_with_usage should be used")

    def chat_with_usage(self, query: str, llm_config: Any = None) -> tuple[str, dict[str, int]]:
        return next(self.replies), {"prompt_tokens": 350, "completion_tokens": 50, "total_tokens": 400}


def test_reported_usage_counts_against_the_budget(source: KbSource) -> None:
    agent = CoRagAgent(UsageLLM(["Who directed Maximum Overdrive?", "Stephen King.", "x", "y"]), source,
                       max_tokens_per_question=1000)
    path = agent.sample_path("Who directed it?", TASK, max_path_length=3)
    assert path.tokens_used == 800 and path.subqueries == ["Who directed Maximum Overdrive?"]
    assert path.stop_reason == "token_budget"


LONG_DOCS = [f"Document number {i} begins here. " + "The quick brown fox jumps over the lazy dog. " * 44
             for i in range(5)]


def test_prompts_are_cut_to_the_context_not_to_max_tokens(server: ScriptedServer) -> None:
    llm = make_llm(server, max_tokens=512)  # the seeds' setting: the original cut prompts to ~1024 chars
    server.enqueue(*chats("What does the fox do?", "It jumps."))
    CoRagAgent(llm, FixedSource(LONG_DOCS), context_tokens=8192).sample_path("fox?", TASK, max_path_length=1)
    full = prompts(server)[1]
    assert all(doc in full for doc in LONG_DOCS) and len(full) > 10_000

    server.reset()
    server.enqueue(*chats("What does the fox do?", "It jumps."))
    CoRagAgent(llm, FixedSource(LONG_DOCS), context_tokens=1024).sample_path("fox?", TASK, max_path_length=1)
    cut = prompts(server)[1]
    assert estimate_tokens(cut) <= 1024 - 512 - 32
    assert section(cut, "Question") == "What does the fox do?"  # the question is kept whole
    assert "Document 1:\nDocument number 0 begins here." in cut and "Document number 1" not in cut
    assert len(cut) > 1500  # sized by the context budget (~1900 chars), not by max_tokens (1024 chars)


def test_context_must_leave_room_besides_max_tokens(server: ScriptedServer, source: KbSource) -> None:
    with pytest.raises(ParameterError, match="context_tokens"):
        CoRagAgent(make_llm(server, max_tokens=4000), source, context_tokens=4096)


def test_final_answer_shows_each_document_once(server: ScriptedServer, llm: Text2TextLLM,
                                               source: KbSource) -> None:
    path = ReasoningPath("Which is older?", ["age of A?", "age of B?"], ["1990", "1985"],
                         [["a", "b"], ["b", "c"]], [None, None],
                         [["Doc A: founded 1990.", "Doc B: founded 1985."], ["Doc B: founded 1985.", "Doc C."]])
    server.enqueue(Reply.chat("<think>B is older</think>Final Answer: B"))
    answer = CoRagAgent(llm, source).generate_final_answer(path, DEFAULT_SAMPLE_TASK_DESC)
    assert answer == "B"
    prompt = prompts(server)[0]
    for doc in ("Doc A: founded 1990.", "Doc B: founded 1985.", "Doc C."):
        assert prompt.count(doc) == 1
    assert "[Document 3]" in prompt and "[Document 4]" not in prompt and "['" not in prompt
    history = "[Query 1] age of A?\n[Answer 1] 1990\n[Query 2] age of B?\n[Answer 2] 1985"
    assert section(prompt, "Search history") == history
    assert section(prompt, "Main question") == "Which is older?"
    assert server.requests[0].json["max_tokens"] == 64


def test_one_agent_serves_eight_threads_without_cross_talk(kb: Retriever) -> None:
    def route(prompt: str, body: dict[str, Any]) -> str:
        if kind_of(prompt) == "subanswer":
            return "answer to " + section(prompt, "Question")
        step = len(re.findall(r"^Step \d+:", section(prompt, "Previous searches"), re.MULTILINE))
        return f"SubQuery: {section(prompt, 'Main question')} part {step + 1}"

    questions = [item["question"] for item in json.loads(HOTPOT.read_text())[:8]]
    source = KbSource(kb)
    with Router(route) as router:
        agent = CoRagAgent(make_llm(router), source)
        with ThreadPoolExecutor(8) as pool:
            paths = list(pool.map(lambda q: agent.sample_path(q, TASK, max_path_length=2), questions))
    for question, path in zip(questions, paths, strict=True):
        expected = [f"{' '.join(question.split())} part {i}" for i in (1, 2)]  # the parser squeezes spaces
        assert path.original_query == question and path.subqueries == expected
        assert path.subanswers == [f"answer to {q}" for q in expected]
        assert path.document_ids == [[d.id for d in source.retrieve(q, 5)] for q in expected]


# -- config -----------------------------------------------------------------------------------------


def test_config_defaults_and_fresh_client_param(llm: Text2TextLLM, source: KbSource) -> None:
    first, second = CoRagBaseConfig(llm, source), CoRagBaseConfig(llm, source)
    assert (first.num_threads, first.max_path_length, first.retrieve_top_k) == (8, 3, 5)
    assert first.final_llm is llm and first.sub_answer_llm is llm and first.judge_llm is None
    assert first.client_param == ClientParam() and first.client_param is not second.client_param
    assert first.early_stop is True and first.max_tokens_per_question is None
    agent = CoRagAgent.from_config(first)
    assert isinstance(agent, CoRagAgent) and agent.source is source
    assert "/no_think" not in DEFAULT_TASK_DESC and DEFAULT_SAMPLE_TASK_DESC == "answer multi-hop questions"


@pytest.mark.parametrize(("field", "value"), [
    ("num_threads", 0), ("num_threads", 65), ("max_path_length", 0), ("max_path_length", 33),
    ("retrieve_top_k", 0), ("retrieve_top_k", 10_001), ("num_threads", "8"), ("judge_llm", "gpt"),
    ("final_llm", object()), ("client_param", {"use_http": True}),
])
def test_config_rejects_bad_values(llm: Text2TextLLM, source: KbSource, field: str, value: Any) -> None:
    with pytest.raises(ParameterError, match=field):
        CoRagBaseConfig(llm, source, **{field: value})


def test_config_accepts_url_source_and_langchain_retriever(llm: Text2TextLLM, kb: Retriever) -> None:
    assert CoRagBaseConfig(llm, kb).retrieve_api_url is kb
    url = "http://127.0.0.1:9/retrieve"
    assert CoRagBaseConfig(llm, url, client_param=ClientParam(use_http=True)).retrieve_api_url == url
    with pytest.raises(ParameterError, match="retrieve_api_url"):
        CoRagBaseConfig(llm, 42)
    with pytest.raises(ParameterError, match="base_llm"):
        CoRagBaseConfig("llm", url)


# -- parsing and budgets ----------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "kind", "text"), [
    ("Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ('"Who founded YouTube?"', "subquery", "Who founded YouTube?"),
    ("SubQuery: Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("SubQuery 3: Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("**SubQuery:** Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("Step 2: Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("Intermediate query 1: Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("<think>let me see</think>\nSubQuery: Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("planning...</think>Who founded YouTube?", "subquery", "Who founded YouTube?"),
    ("<think>I should first look up the founders and", "empty", ""),
    ("Who founded YouTube?......", "subquery", "Who founded YouTube?"),
    ("SubQuery: Who founded YouTube?\nSubAnswer: Chad Hurley", "subquery", "Who founded YouTube?"),
    # the 1.5B ran on in the format on one line (MuSiQue, 2026-12-03)
    ('Who wrote "Brand"? SubAnswer: No relevant information available. Final Answer', "subquery", 'Who wrote "Brand"?'),
    ("Who founded YouTube? Final Answer: Chad Hurley", "subquery", "Who founded YouTube?"),
    ("What is the final answer to the riddle?", "subquery", "What is the final answer to the riddle?"),
    ("Final Answer: Chad Hurley", "final", "Chad Hurley"),
    ("最终答案：北京", "final", "北京"),
    ("", "empty", ""),
])
def test_parse_subquery(raw: str, kind: str, text: str) -> None:
    parsed = parse_subquery(raw)
    assert (parsed.kind, parsed.text) == (kind, text)


@pytest.mark.parametrize(("text", "query", "echo"), [
    ("Do not repeat an earlier query.", "Who founded YouTube?", True),
    ("Do not repeat the question.", "Who founded YouTube?", True),
    ("Write the next search query", "Who founded YouTube?", True),
    ("Break the question down into simple sub-queries", "Who founded YouTube?", True),  # from the task
    ("SubAnswer: SubAnswer:", "Who founded YouTube?", True),
    ("1", "Who founded YouTube?", True),
    ("The answer is:", "Who founded YouTube?", True),
    ("To solve this puzzle, follow these steps:", "Who founded YouTube?", True),
    ("1998", "Who founded YouTube?", True),
    ("Lover Come Back:", "Lover Come Back contained the actress who played which part?", False),
    ("Who founded YouTube?", "Which company owns YouTube?", False),
    ("Which search engine did Google buy?", "What did Google buy?", False),
    ("What is a search engine?", "Which search engine came first?", False),  # its words are the question's
    ("谁创立了YouTube？", "YouTube属于哪家公司？", False),
])
def test_prompt_echoes_are_told_from_questions(text: str, query: str, echo: bool) -> None:
    assert is_prompt_echo(text, query, DEFAULT_TASK_DESC) is echo


def test_parse_keeps_the_reasoning_block_as_the_thought() -> None:
    parsed = parse_subquery("<reasoning>need the founder</reasoning>SubQuery: Who founded YouTube?")
    assert (parsed.text, parsed.thought) == ("Who founded YouTube?", "need the founder")


def test_answers_scores_and_documents_are_cleaned() -> None:
    assert clean_answer("<think>x</think>SubAnswer: Paris......") == "Paris"
    assert [parse_judge_score(s) for s in ("8", "Score: 7/10", "90%", "YES", "no", "none")] == [
        0.8, 0.7, 0.9, 1.0, 0.0, None]
    assert unique_documents([["a", "b"], ["c", "a"], []]) == ["a", "c", "b"]  # rank by rank, first wins
    assert unique_documents([["x  y"], ["x y", "z"]]) == ["x  y", "z"]


def test_estimates_and_truncation_keep_head_and_tail() -> None:
    assert estimate_tokens("abcdefgh") == 2 and estimate_tokens("北京是中国的首都") == 8
    assert estimate_tokens("abc", token_counter=lambda t: [1] * 10) == 10
    text = "HEAD " + "filler words " * 500 + " TAIL?"
    cut = truncate_middle(text, 100)
    assert cut.startswith("HEAD") and cut.endswith("TAIL?") and estimate_tokens(cut) <= 100


def test_fit_shortens_history_but_keeps_the_question() -> None:
    budget = TextBudget(context_tokens=600)

    def build(docs: list[str], history: str) -> str:
        return f"rules\n## History\n{history}\n## Docs\n{' | '.join(docs)}\n## Main question\nThe question?"

    prompt = budget.fit(build, ["doc one " * 200, "doc two"], "step " * 2000, max_tokens=100)
    assert budget.count(prompt) <= budget.prompt_budget(100)
    assert prompt.endswith("## Main question\nThe question?") and "doc one" in prompt


# -- the real local LLM -----------------------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.timeout(900)  # five short calls; a shared 2-CPU box can make each take a minute
def test_real_local_llm_builds_a_short_path(local_llm: Any, source: KbSource) -> None:  # type: ignore[misc]
    llm = Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,
                       llm_config=LLMParameterConfig(max_tokens=48, temperature=0.0, seed=1),
                       client_param=ClientParam(use_http=True, timeout=300))
    agent = CoRagAgent(llm, source, retrieve_top_k=1, context_tokens=1024)
    path = agent.sample_path("Who directed the film that was shot in Leland, North Carolina in 1986?",
                             DEFAULT_TASK_DESC, max_path_length=2)
    assert 1 <= len(path.subqueries) <= 2 and all(q.strip() for q in path.subqueries)
    assert len(path.subanswers) == len(path.documents) == len(path.subqueries)
    answer = agent.generate_final_answer(path, DEFAULT_SAMPLE_TASK_DESC)
    assert isinstance(answer, str) and answer.strip()
