# SPDX-License-Identifier: Apache-2.0
"""``CoRagAgent``: chain-of-retrieval reasoning (sub-query → retrieve → sub-answer, then a final answer).

Example:
    >>> from mx_rag.corag.corag_agent import CoRagAgent
    >>> agent = CoRagAgent(base_llm=llm, retrieve_api_url="http://127.0.0.1:9000/retrieve",
    ...                    client_param=ClientParam(use_http=True))              # doctest: +SKIP
    >>> path = agent.sample_path("Who founded the company that owns YouTube?", "answer multi-hop questions",
    ...                          max_path_length=3)                              # doctest: +SKIP
    >>> agent.generate_final_answer(path, "answer multi-hop questions")          # doctest: +SKIP
    >>> answer, path = agent.answer("Who founded ...?", strategy="best_of_n", n=4)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mx_rag.corag import decoding
from mx_rag.corag.config import MAX_PATH_LENGTH, CoRagBaseConfig, check_llm, check_source
from mx_rag.corag.prompts import (
    NO_RELEVANT_INFO,
    ParsedSubquery,
    clean_answer,
    get_generate_final_answer_prompt,
    get_generate_intermediate_answer_prompt,
    get_generate_subquery_prompt,
    get_judge_path_prompt,
    is_prompt_echo,
    parse_judge_score,
    parse_subquery,
    render_final_history,
    render_history,
    unique_documents,
)
from mx_rag.corag.reasoning_path import (
    STOP_BUDGET,
    STOP_CALLS,
    STOP_EARLY,
    STOP_LENGTH,
    STOP_REASONS,
    ReasoningPath,
    informativeness,
    subquery_key,
    usable_subquery,
)
from mx_rag.corag.retrieval_policy import ON_RETRIEVAL_ERROR, RetrievalStats
from mx_rag.corag.text_budget import TextBudget, TokenCounter, TokenMeter
from mx_rag.corag.types import DocumentSource, RetrievedDocument
from mx_rag.errors import ParameterError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.retrievers.sources import as_retrieval_error, check_top_k
from mx_rag.utils.checks import check_bool, check_choice, check_instance, check_int, check_number, check_str, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import INT_32_MAX, MAX_TOP_K, TEXT_MAX_LEN
from mx_rag.utils.lifecycle import Closable

# ReasoningPath lives in reasoning_path.py; it is importable from here, as documented.
__all__ = ["STOP_REASONS", "CoRagAgent", "ReasoningPath", "informativeness", "subquery_key", "usable_subquery"]

logger = logging.getLogger(__name__)

RETRY_TEMPERATURE = 0.7  # a repeated or unusable sub-query is asked again at least this hot (per call)
CALLS_PER_STEP = 4  # sub-query calls allowed per step (the original's 4 x max_path_length)
MIN_PROMPT_BUDGET = 128

class CoRagAgent(Closable):
    """Builds reasoning paths and final answers; one agent may serve many threads at once.

    Args:
        base_llm: generates the sub-queries (``Text2TextLLM`` or anything with ``chat(query,
            llm_config=...)``); also the default for the other roles.
        retrieve_api_url: the retrieval API URL, a ``DocumentSource`` or a LangChain retriever.
        final_llm: writes the final answer; default ``base_llm``.
        sub_answer_llm: writes the sub-answers; default ``base_llm``.
        retrieve_top_k: documents per retrieval, in [1, 10000]. Default 5.
        client_param: HTTP settings of the retrieval client; default a fresh ``ClientParam()``.
        judge_llm: (keyword) scores paths in best-of-N and tree search; None: no judge.
        context_tokens: (keyword) the models' context window. Every prompt is cut to it minus
            the call's ``max_tokens`` (documents first, never the question). Default 4096.
        max_tokens_per_question: (keyword) LLM tokens one path may spend, None for no limit. A
            step starts only if the tokens spent plus the previous step's cost fit.
        early_stop: (keyword) offer the model a ``Final Answer:`` reply in the sub-query prompt
            and end the path when it gives one (after at least one retrieval). Default True,
            beyond the original, which always runs ``max_path_length`` steps.
        token_counter: (keyword) ``text -> int`` for exact token counts; default an estimate.
        on_retrieval_error: (keyword) what a failing document source means: ``"continue"``
            (default: the step has no documents, a WARNING is logged) or ``"raise"`` (the
            ``RetrievalError`` propagates). Either way it is counted in ``retrieval_stats``.

    The agent never changes an LLM's ``llm_config``: each call gets its own copy (a hotter
    temperature for a retry, temperature 0 for greedy decoding). All per-question state lives
    in the call, so concurrent ``sample_path`` calls do not interfere.
    """

    def __init__(
        self,
        base_llm: Any,
        retrieve_api_url: Any,
        final_llm: Any = None,
        sub_answer_llm: Any = None,
        retrieve_top_k: int = 5,
        client_param: ClientParam | None = None,
        *,
        judge_llm: Any = None,
        context_tokens: int = 4096,
        max_tokens_per_question: int | None = None,
        early_stop: bool = True,
        token_counter: TokenCounter | None = None,
        on_retrieval_error: str = "continue",
    ) -> None:
        if client_param is not None and not isinstance(client_param, ClientParam):
            raise fail("client_param", client_param, "None or a ClientParam")
        param = client_param if client_param is not None else ClientParam()
        self.base_llm = check_llm("base_llm", base_llm)
        self.final_llm = self.base_llm if final_llm is None else check_llm("final_llm", final_llm)
        self.sub_answer_llm = self.base_llm if sub_answer_llm is None else check_llm("sub_answer_llm", sub_answer_llm)
        self.judge_llm = check_llm("judge_llm", judge_llm, optional=True)
        self.retrieve_top_k = check_int("retrieve_top_k", retrieve_top_k, 1, MAX_TOP_K)
        if max_tokens_per_question is not None:
            check_int("max_tokens_per_question", max_tokens_per_question, 1, 1_000_000_000)
        self.max_tokens_per_question = max_tokens_per_question
        self.early_stop = check_bool("early_stop", early_stop)
        self.on_retrieval_error = check_choice("on_retrieval_error", on_retrieval_error, ON_RETRIEVAL_ERROR)
        self.retrieval_stats = RetrievalStats()
        self.budget = TextBudget(context_tokens, token_counter)
        for name, llm in (("base_llm", self.base_llm), ("final_llm", self.final_llm),
                          ("sub_answer_llm", self.sub_answer_llm)):
            max_tokens = _base_config(llm).max_tokens
            if self.budget.prompt_budget(max_tokens) < MIN_PROMPT_BUDGET:
                raise fail("context_tokens", context_tokens,
                           f"large enough to hold a prompt besides {name}'s max_tokens={max_tokens}")
        source = check_source("retrieve_api_url", retrieve_api_url, param)
        self._owns_source = not isinstance(source, DocumentSource)
        if self._owns_source:
            from mx_rag.corag.retrieval_api import as_document_source

            source = as_document_source(source, client_param=param, top_k=self.retrieve_top_k)
        self.source: DocumentSource = source

    @classmethod
    def from_config(cls, config: CoRagBaseConfig, source: Any = None, **options: Any) -> CoRagAgent:
        """An agent with a ``CoRagBaseConfig``'s settings, reading documents from ``source`` when
        given (else the config's ``retrieve_api_url``); ``options`` override its keywords."""
        check_instance("config", config, CoRagBaseConfig)
        settings: dict[str, Any] = {
            "judge_llm": config.judge_llm,
            "context_tokens": config.context_tokens,
            "max_tokens_per_question": config.max_tokens_per_question,
            "early_stop": config.early_stop,
            **options,
        }
        return cls(config.base_llm, config.retrieve_api_url if source is None else source, config.final_llm,
                   config.sub_answer_llm, config.retrieve_top_k, config.client_param, **settings)

    # -- the documented API ---------------------------------------------------------------------

    def sample_path(
        self,
        query: str,
        task_desc: str,
        max_path_length: int = 3,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        token_budget: int | None = None,
    ) -> ReasoningPath:
        """Build a path: up to ``max_path_length`` steps of sub-query (``base_llm``), retrieval and
        sub-answer (``sub_answer_llm``).

        Args:
            query: the main question.
            task_desc: the task description shown in the sub-query prompt.
            max_path_length: most steps, in [1, 32]. Default 3.
            temperature: sub-query temperature for this path (0 for greedy); None keeps the
                LLM's own. Sub-answers always use ``sub_answer_llm``'s own settings.
            seed: sub-query sampling seed for this path; None keeps the LLM's own.
            token_budget: overrides ``max_tokens_per_question`` for this path.

        A repeated or empty sub-query is asked again (hotter, per call); at most 4 sub-query
        calls per step. A failing retrieval gives no documents and the sub-answer
        ``"No relevant information available"`` without an LLM call. ``stop_reason`` tells why
        the path ended.
        """
        check_str("query", query, 1, TEXT_MAX_LEN)
        check_str("task_desc", task_desc, 1, TEXT_MAX_LEN)
        check_int("max_path_length", max_path_length, 1, MAX_PATH_LENGTH)
        overrides = self._overrides(temperature, seed)
        meter = TokenMeter(self._question_budget(token_budget))
        path = ReasoningPath(query)
        calls, retry, reason, last_cost = 0, 0, STOP_LENGTH, 0
        while len(path.subqueries) < max_path_length:
            if calls >= CALLS_PER_STEP * max_path_length:
                reason = STOP_CALLS
                break
            if meter.exhausted or (path.subqueries and not meter.fits(last_cost)):
                reason = STOP_BUDGET
                break
            calls += 1
            before = meter.used
            proposal = self.next_subquery(path, task_desc, meter=meter, attempt=retry, **overrides)
            if proposal.kind == "final" and path.subqueries and self.early_stop:
                logger.debug("CoRAG: the model has enough after %d steps", len(path.subqueries))
                reason = STOP_EARLY
                break
            usable = usable_subquery(proposal, path)
            if usable is None:
                retry += 1
                continue
            retry = 0
            path = self.extend_path(path, usable.text, usable.thought, meter=meter)
            last_cost = meter.used - before
        return replace(path, stop_reason=reason, tokens_used=meter.used)

    def generate_final_answer(self, rag_path: ReasoningPath, task_description: str) -> str:
        """The final answer (``final_llm``) from the path's history and its documents, each shown
        once; the prompt is cut to the context budget (documents first)."""
        check_instance("rag_path", rag_path, ReasoningPath)
        check_str("task_description", task_description, 1, TEXT_MAX_LEN)
        config = _base_config(self.final_llm)
        history = render_final_history(rag_path.subqueries, rag_path.subanswers)

        def build(docs: list[str], hist: str) -> str:
            return get_generate_final_answer_prompt(rag_path.original_query, [], [], task_description, docs,
                                                    history=hist)

        prompt = self.budget.fit(build, unique_documents(rag_path.documents), history, config.max_tokens)
        return clean_answer(self.final_llm.chat(prompt, llm_config=config))

    def answer(
        self,
        query: str,
        task_desc: str | None = None,
        strategy: str = "greedy",
        *,
        max_path_length: int = 3,
        n: int = 4,
        breadth: int = 4,
        judge_llm: Any = None,
    ) -> tuple[str, ReasoningPath]:
        """Answer ``query`` with a decoding strategy: ``"greedy"``, ``"best_of_n"`` (``n`` paths) or
        ``"tree"`` (``breadth`` candidates per step). Returns ``(final_answer, path)``.

        ``task_desc`` None: ``DEFAULT_TASK_DESC`` for the path, ``DEFAULT_SAMPLE_TASK_DESC`` for
        the final answer (as the original's evaluator); otherwise both use ``task_desc``.
        ``judge_llm`` defaults to the agent's.
        """
        judge = self.judge_llm if judge_llm is None else check_llm("judge_llm", judge_llm)
        if strategy == "greedy":
            return decoding.greedy(self, query, task_desc, max_path_length)
        if strategy == "best_of_n":
            return decoding.best_of_n(self, query, task_desc, n, max_path_length, judge_llm=judge)
        if strategy == "tree":
            return decoding.tree_search(self, query, task_desc, breadth, max_path_length, judge_llm=judge)
        raise fail("strategy", strategy, "one of ['greedy', 'best_of_n', 'tree']")

    # -- building blocks (used by the decoding strategies) --------------------------------------

    def next_subquery(
        self,
        path: ReasoningPath,
        task_desc: str,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        attempt: int = 0,
        meter: TokenMeter | None = None,
    ) -> ParsedSubquery:
        """Ask ``base_llm`` for the next sub-query of ``path`` (one call). ``attempt`` > 0 samples
        at least at 0.7 (+0.1 per further attempt, up to 1.0) with a shifted seed. A reply that
        only echoes the prompt (see ``is_prompt_echo``) comes back as kind ``"empty"``."""
        config = self._call_config(self.base_llm, temperature, seed, attempt)
        history = render_history(path.subqueries, path.subanswers)

        def build(_: list[str], hist: str) -> str:
            return get_generate_subquery_prompt(path.original_query, [], [], task_desc,
                                                allow_final_answer=self.early_stop, history=hist)

        prompt = self.budget.fit(build, [], history, config.max_tokens)
        parsed = parse_subquery(self._chat(self.base_llm, prompt, config, meter))
        if parsed.kind == "subquery" and is_prompt_echo(parsed.text, path.original_query, task_desc):
            logger.debug("CoRAG: sub-query %r only echoes the prompt; asking again", parsed.text[:80])
            return ParsedSubquery("empty", "", parsed.thought)
        return parsed

    def extend_path(
        self, path: ReasoningPath, subquery: str, thought: str | None = None, *, meter: TokenMeter | None = None
    ) -> ReasoningPath:
        """A copy of ``path`` with one more step: retrieve for ``subquery`` and answer it."""
        documents = self.retrieve(subquery)
        texts = [doc.text for doc in documents]
        if texts:
            config = _base_config(self.sub_answer_llm)

            def build(docs: list[str], _: str) -> str:
                return get_generate_intermediate_answer_prompt(subquery, docs)

            prompt = self.budget.fit(build, texts, "", config.max_tokens)
            answer = clean_answer(self._chat(self.sub_answer_llm, prompt, config, meter)) or NO_RELEVANT_INFO
        else:
            answer = NO_RELEVANT_INFO
        new = path.copy()
        new.subqueries.append(subquery)
        new.subanswers.append(answer)
        new.document_ids.append([doc.id for doc in documents])
        new.reasoning_steps.append(thought)
        new.documents.append(texts)
        if meter is not None:
            new.tokens_used = meter.used
        return new

    def retrieve(self, query: str, top_k: int | None = None, *, on_error: str | None = None) -> list[RetrievedDocument]:
        """Up to ``top_k`` (default ``retrieve_top_k``) documents with text for ``query``.

        The one place a failing source is caught: it is counted in ``retrieval_stats``, then
        ``on_error`` (default the agent's ``on_retrieval_error``) decides: ``"continue"`` logs a
        WARNING and returns ``[]``, ``"raise"`` raises.

        Raises:
            ParameterError: ``query``, ``top_k`` or ``on_error`` is invalid.
            RetrievalError: the source failed and the policy is ``"raise"``.
        """
        k = self.retrieve_top_k if top_k is None else check_top_k(top_k)
        policy = self.on_retrieval_error if on_error is None else check_choice("on_error", on_error, ON_RETRIEVAL_ERROR)
        try:
            found = self.source.retrieve(query, k)
        except ParameterError:
            raise
        except Exception as exc:  # any source, ours or the user's: the policy decides
            self.retrieval_stats.record(failed=True)
            error = as_retrieval_error(exc)
            if policy == "raise":
                if error is exc:
                    raise
                raise error from exc
            logger.warning("CoRAG retrieval failed, continuing without documents: %s", error)
            return []
        documents = [doc for doc in found if isinstance(doc, RetrievedDocument) and doc.text.strip()]
        self.retrieval_stats.record(found=len(documents))
        return documents

    def score_path(self, path: ReasoningPath, judge_llm: Any = None, *, meter: TokenMeter | None = None) -> float:
        """How well ``path`` supports an answer, in [0, 1]: the judge's 1-10 rating when a judge
        is given (or the agent has one) and answers sensibly, else the share of sub-answers that
        found relevant information."""
        judge = self.judge_llm if judge_llm is None else judge_llm
        if judge is not None and path.subqueries:
            config = self._call_config(judge, 0.0, None, 0)
            prompt = self.budget.truncate(get_judge_path_prompt(path.original_query, path.subqueries,
                                                                path.subanswers), config.max_tokens)
            score = parse_judge_score(self._chat(judge, prompt, config, meter))
            if score is not None:
                return score
            logger.debug("CoRAG judge reply has no score; using the informativeness of the path")
        return informativeness(path)

    def close(self) -> None:
        """Close the retrieval client the agent created (a source passed in is left open)."""
        close = getattr(self.source, "close", None)
        if self._owns_source and callable(close):
            close()


    # -- internals -------------------------------------------------------------------------------

    def _question_budget(self, token_budget: int | None) -> int | None:
        if token_budget is None:
            return self.max_tokens_per_question
        return check_int("token_budget", token_budget, 1, 1_000_000_000)

    @staticmethod
    def _overrides(temperature: float | None, seed: int | None) -> dict[str, Any]:
        if temperature is not None:
            check_number("temperature", temperature, 0.0, 2.0)
        if seed is not None:
            check_int("seed", seed, 0, INT_32_MAX)
        return {"temperature": temperature, "seed": seed}

    @staticmethod
    def _call_config(llm: Any, temperature: float | None, seed: int | None, attempt: int) -> LLMParameterConfig:
        base = _base_config(llm)
        changes: dict[str, Any] = {}
        if temperature is not None:
            changes["temperature"] = temperature
        if seed is not None:
            changes["seed"] = seed
        if attempt > 0:
            current = changes.get("temperature", base.temperature)
            changes["temperature"] = max(current, round(min(RETRY_TEMPERATURE + 0.1 * (attempt - 1), 1.0), 2))
            current_seed = changes.get("seed", base.seed)
            if current_seed is not None:
                changes["seed"] = (current_seed + attempt) % INT_32_MAX
        return base.replace(**changes) if changes else base

    def _chat(self, llm: Any, prompt: str, config: LLMParameterConfig, meter: TokenMeter | None) -> str:
        """One LLM call; its tokens (the server's usage if the LLM reports it, else the estimate)
        go to ``meter``. An LLM with ``chat_with_usage(query, llm_config=...) -> (text, usage)``
        reports usage; ``Text2TextLLM.chat`` returns text only."""
        with_usage = getattr(llm, "chat_with_usage", None)
        tokens: int | None = None
        if callable(with_usage):
            text, usage = with_usage(prompt, llm_config=config)
            tokens = _usage_tokens(usage)
        else:
            text = llm.chat(prompt, llm_config=config)
        if meter is not None:
            meter.add(tokens if tokens is not None else self.budget.count(prompt) + self.budget.count(text))
        return str(text)


def _base_config(llm: Any) -> LLMParameterConfig:
    config = getattr(llm, "llm_config", None)
    return config if isinstance(config, LLMParameterConfig) else LLMParameterConfig()


def _usage_tokens(usage: Any) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int) and total > 0:
        return total
    parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    counted = sum(p for p in parts if isinstance(p, int) and p > 0)
    return counted or None
