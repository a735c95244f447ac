# SPDX-License-Identifier: Apache-2.0
"""``SampleGenerator``: CoRAG training samples by rejection sampling of reasoning paths.

For each query of the input file, up to ``n_samples`` paths are sampled (``sample_path`` +
``generate_final_answer``); the first path whose final answer is judged correct (judge LLM
YES/NO, else normalised containment, see :mod:`mx_rag.corag.metrics`) is turned into chat
samples, one JSON object a line (``query_id`` ties the lines of one query together)::

    {"type": "subquery_generation", "query_id": "5a8b57f2",
     "messages": [{"role": "user", "content": "<sub-query prompt>"},
                  {"role": "assistant", "content": "SubQuery: <sub-query>"}]}
    {"type": "subanswer_generation", ... "SubAnswer: <sub-answer>"}            (one pair per step)
    {"type": "final_answer_generation", ... "Final Answer: <reference answer>"}

The user messages are the prompts the agent sends at inference time (same builders, same
context-budget fitting, the task descriptions the path was sampled with). Each query's lines are
written and flushed together as soon as it is done, so an interrupted run loses at most the
queries in flight; a re-run with the same output file skips the queries already there (keyed by
the record's ``id``/``_id``, else by the query text) and drops a half-written last query.

Example:
    >>> config = CoRagBaseConfig(llm, "http://127.0.0.1:9000/retrieve", num_threads=4,
    ...                          client_param=ClientParam(use_http=True))         # doctest: +SKIP
    >>> samples = SampleGenerator(config).generate("train.jsonl", "out/samples.jsonl", n_samples=3)  # doctest: +SKIP
    >>> sum(len(query_samples) for query_samples in samples)                      # doctest: +SKIP
    9
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mx_rag.corag.config import DEFAULT_SAMPLE_TASK_DESC, DEFAULT_TASK_DESC, CoRagBaseConfig
from mx_rag.corag.corag_agent import CoRagAgent, ReasoningPath
from mx_rag.corag.datasets import MultiHopItem, load_records, parse_item
from mx_rag.corag.metrics import judge_answer
from mx_rag.corag.prompts import (
    get_generate_final_answer_prompt,
    get_generate_intermediate_answer_prompt,
    get_generate_subquery_prompt,
    render_final_history,
    render_history,
    unique_documents,
)
from mx_rag.errors import ParameterError
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.utils.checks import check_instance, check_int, check_str
from mx_rag.utils.common import TEXT_MAX_LEN
from mx_rag.utils.file_check import check_path
from mx_rag.utils.progress import Progress

__all__ = ["SAMPLE_TYPES", "GenerationStats", "SampleGenerator", "build_training_samples"]

logger = logging.getLogger(__name__)

SAMPLE_TYPES = ("subquery_generation", "subanswer_generation", "final_answer_generation")
RESAMPLE_TEMPERATURE = 0.7  # attempts after the first sample at least this hot (the CoRAG paper's setting)
MAX_SAMPLES_PER_QUERY = 256


def llm_config_of(llm: Any) -> LLMParameterConfig:
    """The LLM's own ``LLMParameterConfig`` (read only), or the defaults."""
    config = getattr(llm, "llm_config", None)
    return config if isinstance(config, LLMParameterConfig) else LLMParameterConfig()


def run_parallel(items: list[Any], work: Callable[[Any], Any], threads: int, desc: str) -> list[Any]:
    """``[work(item) for item in items]`` on ``threads`` workers, in input order, with progress.

    On an interrupt or error the queued items are cancelled and the running ones finished.
    """
    progress = Progress(len(items), desc)

    def step(item: Any) -> Any:
        try:
            return work(item)
        finally:
            progress.update()

    pool = ThreadPoolExecutor(max_workers=max(1, min(threads, len(items))), thread_name_prefix="corag")
    try:
        futures = [pool.submit(step, item) for item in items]
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        progress.close()


@dataclass
class GenerationStats:
    """What the last ``generate`` call did, counted in queries (``attempts``/``errors``: paths)."""

    total: int = 0
    skipped: int = 0  # already in the output file, or a repeated query of the input
    accepted: int = 0  # a correct path was found and its samples written
    rejected: int = 0  # no correct path within n_samples attempts
    failed: int = 0  # an invalid record (no query or no answer), or every attempt raised
    attempts: int = 0
    errors: int = 0


def _chat_sample(kind: str, prompt: str, target: str, query_id: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": target}]
    return {"type": kind, "messages": messages, "query_id": query_id}


def build_training_samples(
    agent: CoRagAgent,
    path: ReasoningPath,
    final_answer: str,
    task_desc: str = DEFAULT_TASK_DESC,
    final_task_desc: str = DEFAULT_SAMPLE_TASK_DESC,
    query_id: str = "",
) -> list[dict[str, Any]]:
    """Chat samples of an accepted path: per step a sub-query and a sub-answer sample, then the final answer.

    Steps with an empty sub-query or sub-answer are left out. Prompts are built and fitted as
    ``agent`` builds them at inference time.
    """
    budget, query = agent.budget, path.original_query
    sub_tokens = llm_config_of(agent.base_llm).max_tokens
    answer_tokens = llm_config_of(agent.sub_answer_llm).max_tokens
    samples: list[dict[str, Any]] = []
    for index, (subquery, subanswer) in enumerate(zip(path.subqueries, path.subanswers, strict=True)):
        if not subquery.strip() or not subanswer.strip():
            continue
        history = render_history(path.subqueries[:index], path.subanswers[:index])

        def ask(_: list[str], hist: str) -> str:
            return get_generate_subquery_prompt(query, [], [], task_desc, allow_final_answer=agent.early_stop,
                                                history=hist)

        def answer(docs: list[str], _: str, subquery: str = subquery) -> str:
            return get_generate_intermediate_answer_prompt(subquery, docs)

        documents = path.documents[index] if index < len(path.documents) else []
        samples.append(_chat_sample(SAMPLE_TYPES[0], budget.fit(ask, [], history, sub_tokens),
                                    f"SubQuery: {subquery}", query_id))
        samples.append(_chat_sample(SAMPLE_TYPES[1], budget.fit(answer, documents, "", answer_tokens),
                                    f"SubAnswer: {subanswer}", query_id))

    def final(docs: list[str], hist: str) -> str:
        return get_generate_final_answer_prompt(query, [], [], final_task_desc, docs, history=hist)

    history = render_final_history(path.subqueries, path.subanswers)
    prompt = budget.fit(final, unique_documents(path.documents), history, llm_config_of(agent.final_llm).max_tokens)
    samples.append(_chat_sample(SAMPLE_TYPES[2], prompt, f"Final Answer: {final_answer}", query_id))
    return samples


class _JsonlWriter:
    """Appends one query's lines at a time, flushed, under a lock (shared by the worker threads)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._file: TextIO = path.open("a", encoding="utf-8")

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        with self._lock:
            self._file.write(text)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _read_previous(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The complete queries already in ``path``, by query id; rewrites the file (atomically) when it
    holds a half-written query or a broken line, so appending continues from clean lines."""
    if not path.is_file():
        return {}
    groups: dict[str, list[dict[str, Any]]] = {}
    kept: list[str] = []
    dropped = 0
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            dropped += bool(line.strip())
            continue
        query_id = record.get("query_id") if isinstance(record, dict) else None
        if not isinstance(query_id, str):  # a line from elsewhere: keep it, it marks nothing done
            kept.append(line)
            continue
        groups.setdefault(query_id, []).append(record)
    complete = {qid: recs for qid, recs in groups.items() if recs[-1].get("type") == SAMPLE_TYPES[2]}
    dropped += sum(len(recs) for qid, recs in groups.items() if qid not in complete)
    if dropped:
        logger.warning("%s: dropping %d broken or half-written line(s) before resuming", path, dropped)
        kept += [json.dumps(r, ensure_ascii=False) for recs in complete.values() for r in recs]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, path)
    return complete


class SampleGenerator:
    """Generates CoRAG fine-tuning samples by rejection sampling (see the module docstring).

    Args:
        config: the ``CoRagBaseConfig`` (LLMs, retrieval source, ``num_threads``,
            ``max_path_length``, ``judge_llm``).
        task_desc: (keyword, ours) task description for path sampling and the sub-query samples.
            Default ``DEFAULT_TASK_DESC``.
        final_task_desc: (keyword, ours) task description for the final answer and its sample.
            Default ``DEFAULT_SAMPLE_TASK_DESC``.

    ``stats`` (a ``GenerationStats``) tells what the last ``generate`` call did.

    Raises:
        ParameterError: ``config`` is not a ``CoRagBaseConfig``.
    """

    def __init__(
        self,
        config: CoRagBaseConfig,
        *,
        task_desc: str = DEFAULT_TASK_DESC,
        final_task_desc: str = DEFAULT_SAMPLE_TASK_DESC,
    ) -> None:
        self.config: CoRagBaseConfig = check_instance("config", config, CoRagBaseConfig)
        self.task_desc = check_str("task_desc", task_desc, 1, TEXT_MAX_LEN)
        self.final_task_desc = check_str("final_task_desc", final_task_desc, 1, TEXT_MAX_LEN)
        self.stats = GenerationStats()

    def generate(self, input_file: str, output_file: str | None, n_samples: int = 5) -> list[list[dict[str, Any]]]:
        """Sample paths for every query of ``input_file`` and write the accepted ones' samples.

        Args:
            input_file: JSON Lines (or a JSON array) of ``{"query": str, "answer": str | [str],
                "id"?: ...}``; HotpotQA/MuSiQue records (``question``, aliases) work too.
            output_file: the JSONL file to append to (its directory is created); queries already
                in it are skipped. None: nothing is written.
            n_samples: paths tried per query at most, in [1, 256]; the first correct one is kept.

        Returns:
            One list of samples per query that has an accepted path (those from an earlier run
            included), in input order.

        Raises:
            ParameterError: a path or ``n_samples`` is invalid, or ``input_file`` is not JSON.
        """
        n_samples = check_int("n_samples", n_samples, 1, MAX_SAMPLES_PER_QUERY)
        records = load_records(input_file, "input_file")
        out_path = None if output_file is None else check_path("output_file", output_file)
        previous: dict[str, list[dict[str, Any]]] = {}
        if out_path is not None:
            if out_path.is_dir():
                raise ParameterError(f"output_file {output_file!r} is a directory, expected a JSONL file path")
            out_path.parent.mkdir(parents=True, exist_ok=True)
            previous = _read_previous(out_path)
        self.stats = stats = GenerationStats(total=len(records))
        todo: list[tuple[MultiHopItem, str]] = []
        keys: list[str | None] = []
        seen: set[str] = set()
        for index, raw in enumerate(records):
            try:
                item = parse_item(raw, index)
            except ParameterError as exc:
                logger.warning("input_file: %s; skipped", exc)
                stats.failed += 1
                keys.append(None)
                continue
            if not item.answers:
                logger.warning("input_file: record %d has no answer to check paths against; skipped", index)
                stats.failed += 1
                keys.append(None)
                continue
            key = item.id or item.question
            keys.append(key)
            if key in previous or key in seen:
                stats.skipped += 1
                continue
            seen.add(key)
            todo.append((item, key))
        writer = _JsonlWriter(out_path) if out_path is not None else None
        lock = threading.Lock()
        agent = CoRagAgent.from_config(self.config)
        results: dict[str, list[dict[str, Any]]] = {}

        def work(job: tuple[MultiHopItem, str]) -> None:
            job_item, key = job
            samples, attempts, errors = self._sample_query(agent, job_item, key, n_samples)
            if samples and writer is not None:
                writer.write(samples)
            with lock:
                stats.attempts += attempts
                stats.errors += errors
                if samples:
                    stats.accepted += 1
                    results[key] = samples
                elif errors == attempts:
                    stats.failed += 1
                else:
                    stats.rejected += 1

        try:
            run_parallel(todo, work, self.config.num_threads, "CoRAG samples")
        finally:
            agent.close()
            if writer is not None:
                writer.close()
        logger.info("CoRAG samples: %s", stats)
        ordered = [results.get(key) or previous.get(key) for key in dict.fromkeys(k for k in keys if k is not None)]
        return [samples for samples in ordered if samples]

    def _sample_query(
        self, agent: CoRagAgent, item: MultiHopItem, key: str, n_samples: int
    ) -> tuple[list[dict[str, Any]] | None, int, int]:
        """(samples of the first correct path or None, attempts made, attempts that raised)."""
        base = llm_config_of(self.config.base_llm)
        errors = 0
        for attempt in range(n_samples):
            temperature = None if attempt == 0 else max(base.temperature, RESAMPLE_TEMPERATURE)
            seed = None if attempt == 0 or base.seed is None else (base.seed + attempt) % (2**31 - 1)
            try:
                path = agent.sample_path(item.question, self.task_desc, self.config.max_path_length,
                                         temperature=temperature, seed=seed)
                prediction = agent.generate_final_answer(path, self.final_task_desc)
                verdict = judge_answer(item.question, prediction, item.answers, self.config.judge_llm)
                if verdict.correct:
                    target = item.answers[0]
                    samples = build_training_samples(agent, path, target, self.task_desc, self.final_task_desc, key)
                    return samples, attempt + 1, errors
            except Exception as exc:  # one failed attempt (LLM down, bad reply): try the next one
                errors += 1
                logger.warning("CoRAG sample attempt %d for %r failed: %s: %s", attempt + 1, item.question[:80],
                               type(exc).__name__, str(exc)[:300])
                continue
            logger.debug("CoRAG path %d for %r rejected: %r", attempt + 1, item.question[:80], prediction[:80])
        return None, n_samples, errors
