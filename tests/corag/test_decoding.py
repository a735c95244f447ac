"""CoRAG decoding strategies: greedy, best-of-N (answer agreement and judge) and tree search.

The LLM is a prompt-aware ``Router`` (a ScriptedServer), so paths sampled in parallel threads get
deterministic replies: a sampled sub-query names its request's seed, a greedy one says "greedy".
Retrieval is the real HotpotQA knowledge base of test_corag_agent.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from test_corag_agent import TASK, KbSource, Router, build_kb, kind_of, make_llm, prompts, section

from mx_rag.corag.corag_agent import CoRagAgent
from mx_rag.corag.decoding import answer_key, best_of_n, greedy, tree_search
from mx_rag.corag.prompts import NO_RELEVANT_INFO
from mx_rag.errors import ParameterError
from mx_rag.retrievers import Retriever
from mx_rag.testing import Reply, ScriptedServer

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
FINALS = {100: "Lyon", 101: "Paris.", 102: "paris", 103: NO_RELEVANT_INFO}


def step_of(prompt: str) -> int:
    return len(re.findall(r"^Step \d+:", section(prompt, "Previous searches"), re.MULTILINE)) + 1


def first_query_seed(prompt: str) -> int:
    match = re.search(r"\[Query 1\] about (\d+)", prompt)
    assert match, prompt[-300:]
    return int(match.group(1))


def route(prompt: str, body: dict[str, Any]) -> str:
    """Sub-query: "about <seed> step <n>"; sub-answer: "found ..."; final: FINALS by the path's seed."""
    kind = kind_of(prompt)
    if kind == "subquery":
        return f"SubQuery: about {body['seed']} step {step_of(prompt)}"
    if kind == "subanswer":
        return "found " + section(prompt, "Question")
    if kind == "final":
        return "Final Answer: " + FINALS[first_query_seed(prompt)]
    return "Score: 9/10" if "about 102" in prompt else "3"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    return build_kb(tmp_path_factory.mktemp("decoding_kb"))


@pytest.fixture
def source(kb: Retriever) -> KbSource:
    return KbSource(kb)


@pytest.fixture
def router() -> Iterator[Router]:
    with Router(route) as srv:
        yield srv


def bodies(server: ScriptedServer, kind: str) -> list[dict[str, Any]]:
    return [r.json for r in server.requests if kind_of(r.json["messages"][-1]["content"]) == kind]


def test_greedy_samples_sub_queries_at_temperature_zero(source: KbSource) -> None:
    with ScriptedServer() as server:
        server.enqueue(*[Reply.chat(t) for t in ("Who directed Maximum Overdrive?", "Stephen King.",
                                                 "Final Answer: Stephen King", "Stephen King")])
        agent = CoRagAgent(make_llm(server), source)
        answer, path = greedy(agent, QUESTION, TASK, max_path_length=3)
        assert (answer, path.subqueries, path.stop_reason) == ("Stephen King", ["Who directed Maximum Overdrive?"],
                                                               "early_stop")
        assert [r.json["temperature"] for r in server.requests] == [0.0, 0.2, 0.0, 0.2]  # sub-answers: LLM's own


def test_best_of_n_by_answer_agreement(router: Router, source: KbSource) -> None:
    agent = CoRagAgent(make_llm(router, seed=100), source)
    answer, path = best_of_n(agent, QUESTION, TASK, n=4, max_path_length=2)
    assert answer == "Paris." and path.score == 0.5  # "Paris." and "paris" agree; the first of them wins
    assert path.subqueries == ["about 101 step 1", "about 101 step 2"]
    assert path.subanswers == ["found about 101 step 1", "found about 101 step 2"]
    temperatures = {b["seed"]: b["temperature"] for b in bodies(router, "subquery")}
    assert temperatures == {100: 0.0, 101: 0.7, 102: 0.7, 103: 0.7}  # path 0 greedy, others sampled
    assert len(bodies(router, "final")) == 4
    assert answer_key("Final Answer: Paris.") == answer_key("paris") == "paris"


def test_best_of_n_by_judge_answers_only_the_best_path(router: Router, source: KbSource) -> None:
    agent = CoRagAgent(make_llm(router, seed=100), source)
    judge = make_llm(router, temperature=0.9)
    answer, path = agent.answer(QUESTION, TASK, strategy="best_of_n", n=4, max_path_length=1, judge_llm=judge)
    assert path.subqueries == ["about 102 step 1"] and path.score == 0.9
    assert answer == "paris"
    judged = bodies(router, "judge")
    assert len(judged) == 4 and {b["temperature"] for b in judged} == {0.0}
    assert len(bodies(router, "final")) == 1


def test_best_of_n_falls_back_to_informativeness_when_the_judge_says_nothing(source: KbSource) -> None:
    def quiet(prompt: str, body: dict[str, Any]) -> str:
        kind = kind_of(prompt)
        if kind == "subquery":
            return f"about {body['seed']}"
        if kind == "subanswer":
            return "a useful fact" if "about 3" in prompt else NO_RELEVANT_INFO
        return "I cannot tell." if kind == "judge" else "x"

    with Router(quiet) as server:
        agent = CoRagAgent(make_llm(server, seed=1), source, judge_llm=make_llm(server))
        _, path = agent.answer(QUESTION, strategy="best_of_n", n=3, max_path_length=1)
    assert path.subqueries == ["about 3"] and path.score == 1.0


def test_best_of_n_splits_the_token_budget(router: Router, source: KbSource) -> None:
    agent = CoRagAgent(make_llm(router, seed=100), source, max_tokens_per_question=4)
    _, path = best_of_n(agent, QUESTION, TASK, n=4, max_path_length=3)
    assert len(path.subqueries) == 1 and path.stop_reason == "token_budget"


def tree_route(prompt: str, body: dict[str, Any]) -> str:
    """Greedy sub-queries find nothing; the one sampled with seed 101 finds something."""
    kind = kind_of(prompt)
    if kind == "subquery":
        if step_of(prompt) == 2 and body["temperature"] == 0.0:
            return "Final Answer: Stephen King"
        who = "greedy" if body["temperature"] == 0.0 else f"alt {body['seed']}"
        return f"SubQuery: {who} {step_of(prompt)}"
    if kind == "subanswer":
        return "Stephen King directed it." if "alt 101" in section(prompt, "Question") else NO_RELEVANT_INFO
    return "Stephen King"


def test_tree_search_keeps_the_best_candidate_each_step(source: KbSource) -> None:
    with Router(tree_route) as server:
        agent = CoRagAgent(make_llm(server, seed=100), source, early_stop=False)
        answer, path = tree_search(agent, QUESTION, TASK, breadth=3, depth=2)
        assert answer == "Stephen King"
        assert path.subqueries == ["alt 101 1", "alt 101 2"] and path.score == 1.0
        assert path.subanswers == ["Stephen King directed it."] * 2
        # step 1: three candidates; step 2: the greedy one was a final answer (no early stop here), two left
        assert len(bodies(server, "subanswer")) == 5
        assert path.stop_reason == "max_path_length" and path.tokens_used > 0


def test_tree_search_stops_early_when_the_greedy_candidate_answers(source: KbSource) -> None:
    with Router(tree_route) as server:
        agent = CoRagAgent(make_llm(server, seed=100), source)
        _, path = agent.answer(QUESTION, TASK, strategy="tree", breadth=3, max_path_length=4)
    assert path.subqueries == ["alt 101 1"] and path.stop_reason == "early_stop"


def test_tree_search_stays_within_the_token_budget(source: KbSource) -> None:
    with Router(tree_route) as server:
        unlimited = CoRagAgent(make_llm(server, seed=100), source, early_stop=False)
        _, one = tree_search(unlimited, QUESTION, TASK, breadth=3, depth=1)
        budget = one.tokens_used * 3 // 2
        agent = CoRagAgent(make_llm(server, seed=100), source, early_stop=False, max_tokens_per_question=budget)
        _, path = tree_search(agent, QUESTION, TASK, breadth=3, depth=3)
    assert path.stop_reason == "token_budget" and len(path.subqueries) == 1
    assert path.tokens_used == one.tokens_used <= budget


def test_judge_scores_tree_candidates(source: KbSource) -> None:
    def judged(prompt: str, body: dict[str, Any]) -> str:
        if kind_of(prompt) == "judge":
            return "10" if "alt 102" in prompt else "2"
        return tree_route(prompt, body)

    with Router(judged) as server:
        agent = CoRagAgent(make_llm(server, seed=100), source, early_stop=False, judge_llm=make_llm(server))
        _, path = agent.answer(QUESTION, TASK, strategy="tree", breadth=3, max_path_length=1)
    assert path.subqueries == ["alt 102 1"] and path.score == 1.0


def test_answer_rejects_unknown_strategies(source: KbSource, router: Router) -> None:
    agent = CoRagAgent(make_llm(router), source)
    with pytest.raises(ParameterError, match="strategy"):
        agent.answer(QUESTION, strategy="beam")
    with pytest.raises(ParameterError, match="n must be"):
        best_of_n(agent, QUESTION, n=0)
    assert prompts(router) == []


def test_default_task_descriptions(router: Router, source: KbSource) -> None:
    agent = CoRagAgent(make_llm(router, seed=100), source)
    agent.answer(QUESTION, max_path_length=1)
    sent = prompts(router)
    assert section(sent[0], "Task").startswith("You are a helpful assistant")
    assert section(sent[-1], "Task") == "answer multi-hop questions"
