# SPDX-License-Identifier: Apache-2.0
"""CoRAG decoding strategies (Wang et al., 2025): greedy, best-of-N and tree search.

The paper scores paths with log-probabilities (``prompt_logprobs`` of a vLLM server), which an
OpenAI-compatible endpoint does not give. These versions need none:

* ``greedy``: one path with sub-queries at temperature 0.
* ``best_of_n``: path 0 greedy, paths 1..n-1 sampled at ``temperature`` (in threads); the best is
  chosen by a judge LLM's 1-10 rating of the path's findings, or without a judge by **answer
  agreement**: the final answer most paths agree on (after SQuAD normalisation) wins.
* ``tree_search``: at each step ``breadth`` candidate sub-queries (the first greedy) are each
  retrieved and answered; the best child is kept (beam 1). Rollout-free: a child is scored by the
  judge on its findings, or by whether its new sub-answer found relevant information.

Ties go to the path with more informative sub-answers, then to the greedy one. The agent's
``max_tokens_per_question`` is shared: best-of-N gives each path ``budget // n``; tree search
counts every candidate against one budget and stops before a step that would not fit.

Example:
    >>> answer, path = best_of_n(agent, "Who founded the company that owns YouTube?", n=4)  # doctest: +SKIP
    >>> answer, path = agent.answer("...", strategy="tree", breadth=3)                       # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from mx_rag.corag.config import DEFAULT_SAMPLE_TASK_DESC, DEFAULT_TASK_DESC, MAX_PATH_LENGTH, MAX_THREADS
from mx_rag.corag.prompts import ParsedSubquery, clean_answer, is_no_info
from mx_rag.corag.reasoning_path import (
    STOP_BUDGET,
    STOP_CALLS,
    STOP_EARLY,
    STOP_LENGTH,
    ReasoningPath,
    informativeness,
    subquery_key,
    usable_subquery,
)
from mx_rag.corag.text_budget import TokenMeter
from mx_rag.utils.checks import check_int, check_number, check_str
from mx_rag.utils.common import INT_32_MAX, TEXT_MAX_LEN

if TYPE_CHECKING:
    from mx_rag.corag.corag_agent import CoRagAgent

__all__ = ["answer_key", "best_of_n", "greedy", "tree_search"]

logger = logging.getLogger(__name__)

MAX_N = 64
MAX_BREADTH = 16
SAMPLE_TEMPERATURE = 0.7

_T = TypeVar("_T")
_R = TypeVar("_R")


def answer_key(answer: str) -> str:
    """The form answers are compared in for agreement ("" for a non-answer such as
    "No relevant information available").

    >>> answer_key("Final Answer: The Eiffel Tower."), answer_key("unknown")
    ('eiffel tower', '')
    """
    from mx_rag.corag.metrics import normalize_answer

    text = clean_answer(answer)
    return "" if is_no_info(text) else normalize_answer(text)


def greedy(agent: CoRagAgent, query: str, task_desc: str | None = None, max_path_length: int = 3
           ) -> tuple[str, ReasoningPath]:
    """One path with greedy (temperature 0) sub-queries, then its final answer."""
    path_desc, final_desc = _task_descs(task_desc)
    path = agent.sample_path(query, path_desc, max_path_length, temperature=0.0)
    return agent.generate_final_answer(path, final_desc), path


def best_of_n(
    agent: CoRagAgent,
    query: str,
    task_desc: str | None = None,
    n: int = 4,
    max_path_length: int = 3,
    *,
    temperature: float = SAMPLE_TEMPERATURE,
    judge_llm: Any = None,
    num_threads: int | None = None,
) -> tuple[str, ReasoningPath]:
    """Sample ``n`` paths (path 0 greedy) and return ``(final_answer, best_path)``.

    With ``judge_llm`` the judge rates each path (``path.score`` = rating in [0, 1]) and only the
    best path gets a final answer; without, every path gets one and the most common answer wins
    (``path.score`` = share of paths giving it).
    """
    check_int("n", n, 1, MAX_N)
    check_number("temperature", temperature, 0.0, 2.0)
    path_desc, final_desc = _task_descs(task_desc)
    check_str("query", query, 1, TEXT_MAX_LEN)
    budget = agent.max_tokens_per_question
    share = None if budget is None else max(1, budget // n)
    seed = agent_seed(agent)

    def sample(i: int) -> ReasoningPath:
        return agent.sample_path(query, path_desc, max_path_length, temperature=0.0 if i == 0 else temperature,
                                 seed=None if seed is None else (seed + i) % INT_32_MAX, token_budget=share)

    workers = _workers(num_threads, n)
    paths = _map(sample, list(range(n)), workers)
    if judge_llm is not None:
        scores = _map(lambda p: agent.score_path(p, judge_llm), paths, workers)
        best = max(range(n), key=lambda i: (scores[i], informativeness(paths[i]), -i))
        logger.debug("best-of-%d by judge: path %d, scores %s", n, best, scores)
        return agent.generate_final_answer(paths[best], final_desc), replace(paths[best], score=scores[best])
    answers = _map(lambda p: agent.generate_final_answer(p, final_desc), paths, workers)
    keys = [answer_key(a) for a in answers]
    votes = Counter(k for k in keys if k)
    best = max(range(n), key=lambda i: (votes[keys[i]], informativeness(paths[i]), -i))
    logger.debug("best-of-%d by agreement: path %d, votes %s", n, best, dict(votes))
    return answers[best], replace(paths[best], score=votes[keys[best]] / n)


def tree_search(
    agent: CoRagAgent,
    query: str,
    task_desc: str | None = None,
    breadth: int = 4,
    depth: int = 3,
    *,
    temperature: float = SAMPLE_TEMPERATURE,
    judge_llm: Any = None,
    num_threads: int | None = None,
) -> tuple[str, ReasoningPath]:
    """Grow one path, choosing each step among ``breadth`` candidates; ``(final_answer, path)``.

    Stops after ``depth`` steps, when the greedy candidate is a final answer (``early_stop``),
    when no usable candidate is left, or before a step whose cost (estimated as the previous
    step's) would exceed the agent's ``max_tokens_per_question``.
    """
    check_int("breadth", breadth, 1, MAX_BREADTH)
    check_int("depth", depth, 1, MAX_PATH_LENGTH)
    check_number("temperature", temperature, 0.0, 2.0)
    check_str("query", query, 1, TEXT_MAX_LEN)
    path_desc, final_desc = _task_descs(task_desc)
    meter = TokenMeter(agent.max_tokens_per_question)
    workers = _workers(num_threads, breadth)
    seed = agent_seed(agent)
    path, reason, score, last_cost = ReasoningPath(query), STOP_LENGTH, None, 0
    for _ in range(depth):
        if meter.exhausted or (path.subqueries and not meter.fits(last_cost)):
            reason = STOP_BUDGET
            break
        before, current = meter.used, path

        def propose(i: int, current: ReasoningPath = current) -> ParsedSubquery:
            return agent.next_subquery(current, path_desc, temperature=0.0 if i == 0 else temperature,
                                       seed=None if seed is None else (seed + i) % INT_32_MAX, meter=meter)

        proposals = _map(propose, list(range(breadth)), workers)
        if agent.early_stop and path.subqueries and proposals[0].kind == "final":
            reason = STOP_EARLY
            break
        candidates = _distinct(path, proposals)
        if not candidates:
            reason = STOP_CALLS
            break
        def expand(c: ParsedSubquery, current: ReasoningPath = current) -> ReasoningPath:
            return agent.extend_path(current, c.text, c.thought, meter=meter)

        children = _map(expand, candidates, workers)
        if judge_llm is not None:
            scores = _map(lambda child: agent.score_path(child, judge_llm, meter=meter), children, workers)
        else:
            scores = [informativeness(child) for child in children]
        best = max(range(len(children)), key=lambda i: (scores[i], -i))
        path, score = children[best], scores[best]
        last_cost = meter.used - before
    path = replace(path, stop_reason=reason, tokens_used=meter.used, score=score)
    return agent.generate_final_answer(path, final_desc), path


def agent_seed(agent: CoRagAgent) -> int | None:
    """The base LLM's configured seed (so sampled paths can get distinct ones), or None."""
    config = getattr(agent.base_llm, "llm_config", None)
    seed = getattr(config, "seed", None)
    return seed if isinstance(seed, int) else None


def _distinct(path: ReasoningPath, proposals: Sequence[ParsedSubquery]) -> list[ParsedSubquery]:
    seen: set[str] = set()
    out: list[ParsedSubquery] = []
    for proposal in proposals:
        usable = usable_subquery(proposal, path)
        if usable is not None and subquery_key(usable.text) not in seen:
            seen.add(subquery_key(usable.text))
            out.append(usable)
    return out


def _task_descs(task_desc: str | None) -> tuple[str, str]:
    if task_desc is None:
        return DEFAULT_TASK_DESC, DEFAULT_SAMPLE_TASK_DESC
    check_str("task_desc", task_desc, 1, TEXT_MAX_LEN)
    return task_desc, task_desc


def _workers(num_threads: int | None, items: int) -> int:
    if num_threads is None:
        return min(items, MAX_THREADS)
    return check_int("num_threads", num_threads, 1, MAX_THREADS)


def _map(func: Callable[[_T], _R], items: Sequence[_T], workers: int) -> list[_R]:
    """``func`` over ``items`` in order, in up to ``workers`` threads (errors propagate)."""
    if workers <= 1 or len(items) <= 1:
        return [func(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="corag") as pool:
        return list(pool.map(func, items))

