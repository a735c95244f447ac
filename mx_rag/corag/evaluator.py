# SPDX-License-Identifier: Apache-2.0
"""``CoRagEvaluator``: CoRAG against naive retrieval on HotpotQA / MuSiQue files.

Per question: a CoRAG path (``sample_path``) and its final answer; when enabled, the naive
baseline (the question itself retrieves ``num_contexts`` documents, ``final_llm`` answers from
them with the sub-answer prompt); correctness (judge LLM YES/NO, else normalised containment, as
the original), EM and F1 (SQuAD normalisation, best over the answer aliases), and retrieval
recall. The report is ``[summary] + one record per input record``, written atomically as JSON.

Recall, two measures:

* ``corag_recall`` / ``naive_recall`` (the original's): supporting *sentences* found in the
  retrieved texts (soft inclusion, see :func:`mx_rag.corag.metrics.fact_recall`). CoRAG's
  documents are de-duplicated and capped to ``num_contexts``, spread evenly over the steps.
* ``corag_title_recall`` / ``naive_title_recall`` (ours): supporting *titles* among the
  retrieved documents' titles. A document's title is the first line of its text (``Title:``
  prefix and quotes removed) or, for a text without a line break, its id - build the corpus with
  :func:`mx_rag.corag.datasets.iter_passages` (``"Title\\ntext"``) or return titles as ids.
  None when the record names no supporting titles (e.g. MuSiQue paragraphs without ``title``).

Every record counts: a question whose CoRAG run fails (or an invalid record) is wrong for CoRAG
and stays in every denominator; its record carries ``error``. A failing retrieval is counted
(``retrieval_failures``) by the question's agent, which goes on without documents for that step;
a failing naive retrieval sets ``naive_error``.

Resuming: each finished question is appended (flushed and fsynced) to a checkpoint next to the
report, ``<save_file>.partial.jsonl``, whose first line pins the settings that change results. A
later ``evaluate`` with the same ``save_file`` reuses the questions found there (known by id, and
only when the eval file's record has the same question and answers) and runs only the others; a
checkpoint of other settings or of another file (none of its questions in this one) is refused
(``restart=True`` discards it); a retrieval source given as an object, not a URL, is known by its
class only. Without a checkpoint, a finished report at ``save_file`` whose summary has the same
``settings`` is extended the same way: the report of the first 10 questions serves a run over the
first 20, which then answers only the 10 new ones (other settings: the report is replaced).
Questions that failed while running (``error`` or ``naive_error`` set) are run again; invalid
records are not. When every question is done the report is written and the checkpoint removed -
kept instead while some question failed, so that running again retries just those. Without a
terminal on stderr, one ``INFO`` line per finished question (``i/N done, EM so far ...``) replaces
the progress bar.

Example:
    >>> report = CoRagEvaluator(config).evaluate("hotpotqa_dev.json", "out/report.json")  # doctest: +SKIP
    >>> report[0]["corag_accuracy"], report[0]["corag_em"], report[0]["corag_f1"]          # doctest: +SKIP
    (0.42, 0.31, 0.44)
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from mx_rag.corag._eval_checkpoint import (
    CHECKPOINT_SUFFIX,
    CHECKPOINT_TYPE,
    CHECKPOINT_VERSION,
    Checkpoint,
    atomic_write_json,
    checkpoint_path,
    digest,
    question_keys,
    read_checkpoint,
    read_report,
    retryable,
)
from mx_rag.corag._eval_report import Tally, empty_record, select_documents_for_recall, stderr_is_terminal, summarize
from mx_rag.corag.config import DEFAULT_SAMPLE_TASK_DESC, DEFAULT_TASK_DESC, CoRagBaseConfig
from mx_rag.corag.corag_agent import CoRagAgent, ReasoningPath
from mx_rag.corag.datasets import MultiHopItem, load_records, parse_item
from mx_rag.corag.metrics import exact_match, f1_score, fact_recall, judge_answer, title_recall
from mx_rag.corag.prompts import NO_RELEVANT_INFO, clean_answer, get_generate_intermediate_answer_prompt
from mx_rag.corag.retrieval_api import as_document_source
from mx_rag.corag.sample_generator import llm_config_of, run_parallel
from mx_rag.corag.types import DocumentSource
from mx_rag.errors import ParameterError
from mx_rag.retrievers.sources import RetrievalError
from mx_rag.utils.checks import check_bool, check_instance, check_int, check_str
from mx_rag.utils.common import MAX_TOP_K, TEXT_MAX_LEN
from mx_rag.utils.file_check import check_path

__all__ = ["CHECKPOINT_SUFFIX", "CoRagEvaluator", "checkpoint_path", "select_documents_for_recall"]

logger = logging.getLogger(__name__)


def _llm_identity(llm: Any) -> Any:
    """What of an LLM changes answers: its model name and generation settings (never its URL)."""
    if llm is None:
        return None
    identity: dict[str, Any] = {"model": getattr(llm, "model_name", None) or type(llm).__name__}
    config = llm_config_of(llm)
    for name in ("max_tokens", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
        identity[name] = getattr(config, name)
    return identity


class CoRagEvaluator:
    """Evaluates CoRAG (and the naive baseline) on a HotpotQA or MuSiQue file.

    Args:
        config: the ``CoRagBaseConfig`` (LLMs, retrieval source, ``num_threads``,
            ``max_path_length``, ``judge_llm``).
        task_desc: (keyword, ours) task description for the paths. Default ``DEFAULT_TASK_DESC``.
        final_task_desc: (keyword, ours) task description for the final answers. Default
            ``DEFAULT_SAMPLE_TASK_DESC`` (as the original).

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

    def evaluate(
        self,
        eval_file: str,
        save_file: str,
        calc_recall: bool = True,
        enable_naive_retrieval: bool = True,
        num_contexts: int = 10,
        *,
        restart: bool = False,
    ) -> list[dict[str, Any]]:
        """Evaluate every record of ``eval_file``; return and save ``[summary] + records``.

        Resumable (see the module docstring): questions already in ``<save_file>.partial.jsonl``
        from an interrupted run with the same settings, or in a finished report at ``save_file``
        with the same settings, are not run again.

        Args:
            eval_file: a JSON array (or JSON Lines) of HotpotQA or MuSiQue records.
            save_file: where the report is written (JSON, atomically; directory created).
            calc_recall: compute the recall measures. Default True.
            enable_naive_retrieval: also run the naive baseline (whether or not recall is
                computed). Default True.
            num_contexts: documents the naive baseline retrieves, and the cap of CoRAG's
                documents counted for recall, in [1, 10000]. Default 10.
            restart: (keyword, ours) ignore an existing checkpoint or report and run every question.
                Default False.

        Returns:
            The summary, then one record per input record in input order. Summary: the seed's ``type``
            ("Summary"), ``total_samples``, ``corag_accuracy``, ``naive_accuracy``,
            ``corag_correct_count``, ``naive_correct_count``, ``avg_path_time``, ``avg_time`` (mean time
            after the path), ``corag_micro_recall``, ``naive_micro_recall``; ours: ``corag_em``,
            ``corag_f1``, ``naive_em``, ``naive_f1``, ``corag_title_recall``, ``naive_title_recall``,
            ``failed_count``, ``naive_failed_count``, ``retrieval_failure_count``,
            ``empty_retrieval_count``, ``judge_fallback_count``, ``num_contexts``, ``max_path_length``,
            ``settings`` (what changes results: the models and their generation settings, path length,
            top-k, ...). Naive values are None when the baseline is off, recall values None when
            ``calc_recall`` is False. Record: the seed's ``question``, ``ground_truth``,
            ``corag_prediction``, ``naive_prediction``, ``is_correct``, ``naive_is_correct``,
            ``reasoning_steps`` (``subquery``, ``subanswer``, and our ``document_ids``), ``time``
            (``[path seconds, seconds after the path]``), ``corag_recall``, ``naive_recall``; ours:
            ``id``, ``ground_truths`` (aliases included), ``em``, ``f1``, ``naive_em``, ``naive_f1``,
            the title recalls, ``stop_reason``, ``judge`` / ``naive_judge`` (``"judge"``,
            ``"containment"`` or ``"fallback"``), ``retrieval_calls``, ``retrieval_failures``,
            ``empty_retrievals``, ``error`` and ``naive_error`` (None unless that part failed).

        Raises:
            ParameterError: an argument is invalid, ``eval_file`` is not valid JSON, or the
                checkpoint belongs to another eval file or other settings (and ``restart`` is False).
        """
        check_bool("calc_recall", calc_recall)
        check_bool("enable_naive_retrieval", enable_naive_retrieval)
        num_contexts = check_int("num_contexts", num_contexts, 1, MAX_TOP_K)
        check_bool("restart", restart)
        records = load_records(eval_file, "eval_file")
        out_path = check_path("save_file", save_file)
        if out_path.is_dir():
            raise ParameterError(f"save_file {save_file!r} is a directory, expected a JSON file path")
        options = (calc_recall, enable_naive_retrieval, num_contexts)
        keys = question_keys(records)
        settings = self._settings(*options)
        header = {"type": CHECKPOINT_TYPE, "version": CHECKPOINT_VERSION, "eval_file": str(Path(eval_file).resolve()),
                  "questions": len(records), "settings": settings}
        partial = checkpoint_path(out_path)
        done, origin = ({} if restart else read_checkpoint(partial, header, records, keys)), partial
        if not done and not restart:
            done, origin = read_report(out_path, settings, records, keys), out_path
        results: list[dict[str, Any] | None] = [
            done[index] if index in done and not retryable(done[index]) else None for index in range(len(records))
        ]
        todo = [index for index, record in enumerate(results) if record is None]
        if done:
            logger.info("CoRAG eval: %s %s: %d of %d questions done, %d to run (failed ones again)",
                        "resuming from" if origin == partial else "extending", origin, len(records) - len(todo),
                        len(records), len(todo))
        tally = Tally(len(records), log_lines=not stderr_is_terminal())
        for record in results:
            if record is not None:
                tally.add(record, announce=False)
        kept = [{"key": keys[i], "index": i, "record": r} for i, r in enumerate(results) if r is not None]
        checkpoint = Checkpoint(partial, header, kept)
        source = as_document_source(self.config.retrieve_api_url, self.config.client_param,
                                    self.config.retrieve_top_k)

        def work(index: int) -> None:
            record = self._guarded(records[index], index, source, *options)
            checkpoint.write({"key": keys[index], "index": index, "record": record})
            results[index] = record
            tally.add(record)

        desc = "CoRAG eval" if len(todo) == len(records) else f"CoRAG eval ({len(records) - len(todo)} resumed)"
        try:
            run_parallel(todo, work, self.config.num_threads, desc)
        finally:
            checkpoint.close()
            close = getattr(source, "close", None)
            if source is not self.config.retrieve_api_url and callable(close):
                close()
        finished = [record for record in results if record is not None]
        report = [{**summarize(finished, *options, self.config.max_path_length), "settings": settings},
                  *finished]
        atomic_write_json(out_path, report)
        retry = sum(retryable(record) for record in finished)
        if retry:
            logger.warning("CoRAG eval: %d question(s) failed; %s is kept: run again with the same settings to "
                           "retry only those (restart=True / --restart runs everything)", retry, partial)
        else:
            partial.unlink(missing_ok=True)
        return report

    def _settings(self, calc_recall: bool, naive: bool, num_contexts: int) -> dict[str, Any]:
        """The settings that change results, pinned in the checkpoint's header (threads do not)."""
        config = self.config
        source = config.retrieve_api_url
        return {
            "max_path_length": config.max_path_length, "retrieve_top_k": config.retrieve_top_k,
            "num_contexts": num_contexts, "calc_recall": calc_recall, "naive_retrieval": naive,
            "early_stop": config.early_stop, "context_tokens": config.context_tokens,
            "max_tokens_per_question": config.max_tokens_per_question,
            "task_desc_sha256": digest(self.task_desc)[:16],
            "final_task_desc_sha256": digest(self.final_task_desc)[:16],
            "base_llm": _llm_identity(config.base_llm), "final_llm": _llm_identity(config.final_llm),
            "sub_answer_llm": _llm_identity(config.sub_answer_llm), "judge_llm": _llm_identity(config.judge_llm),
            "retrieval": source if isinstance(source, str) else type(source).__name__,
        }

    # -- one question ------------------------------------------------------------------------------

    def _guarded(self, raw: Any, index: int, source: DocumentSource, *options: Any) -> dict[str, Any]:
        """``_evaluate_one``, with an unexpected error turned into a failed record (the run goes on)."""
        try:
            return self._evaluate_one(raw, index, source, *options)
        except Exception as exc:
            logger.exception("CoRAG eval record %d failed unexpectedly", index)
            record = empty_record()
            record["error"] = f"evaluation failed: {type(exc).__name__}: {exc}"
            return record

    def _evaluate_one(
        self, raw: Any, index: int, source: DocumentSource, calc_recall: bool, naive: bool, num_contexts: int
    ) -> dict[str, Any]:
        started = time.perf_counter()
        record = empty_record()
        try:
            item = parse_item(raw, index)
        except ParameterError as exc:
            record["error"] = str(exc)
            return record
        record.update(id=item.id or None, question=item.question, ground_truth=item.answer,
                      ground_truths=item.answers)
        agent = CoRagAgent.from_config(self.config, source)  # one per question: its retrieval_stats are this question's
        path: ReasoningPath | None = None
        try:
            path = agent.sample_path(item.question, self.task_desc, self.config.max_path_length)
        except Exception as exc:
            record["error"] = f"reasoning path failed: {type(exc).__name__}: {exc}"
            logger.warning("CoRAG eval record %d: %s", index, record["error"][:300])
        path_time = time.perf_counter() - started
        if path is not None:
            record["reasoning_steps"] = [
                {"subquery": q, "subanswer": a, "document_ids": ids}
                for q, a, ids in zip(path.subqueries, path.subanswers, path.document_ids, strict=False)
            ]
            record["stop_reason"] = path.stop_reason
        if calc_recall:
            docs = select_documents_for_recall(path, num_contexts) if path is not None else []
            self._recall(record, "corag", item, docs)
        if naive:
            self._naive(record, item, agent, calc_recall, num_contexts)
        if path is not None:
            try:
                record["corag_prediction"] = agent.generate_final_answer(path, self.final_task_desc)
            except Exception as exc:
                record["error"] = f"final answer failed: {type(exc).__name__}: {exc}"
                logger.warning("CoRAG eval record %d: %s", index, record["error"][:300])
        if record["error"] is None:
            verdict = judge_answer(item.question, record["corag_prediction"], item.answers, self.config.judge_llm)
            record.update(is_correct=verdict.correct, judge=verdict.source)
        record["em"] = exact_match(record["corag_prediction"], item.answers)
        record["f1"] = f1_score(record["corag_prediction"], item.answers)
        counts = agent.retrieval_stats.snapshot()
        record.update(retrieval_calls=counts.calls, retrieval_failures=counts.failures, empty_retrievals=counts.empty)
        record["time"] = [path_time, time.perf_counter() - started - path_time]
        return record

    @staticmethod
    def _recall(record: dict[str, Any], prefix: str, item: MultiHopItem, docs: list[tuple[str, str]]) -> None:
        key = "corag_recall" if prefix == "corag" else "naive_recall"
        record[key] = fact_recall(item.golden_facts, [text for _, text in docs])
        if item.supporting_titles:
            record[f"{prefix}_title_recall"] = title_recall(item.supporting_titles, docs)

    def _naive(self, record: dict[str, Any], item: MultiHopItem, agent: CoRagAgent, calc_recall: bool,
               num_contexts: int) -> None:
        """The baseline: the question retrieves ``num_contexts`` documents; ``final_llm`` answers."""
        record.update(naive_prediction="", naive_is_correct=False, naive_em=0.0, naive_f1=0.0)
        try:
            found = agent.retrieve(item.question, num_contexts, on_error="raise")
        except RetrievalError as exc:
            found = []
            record["naive_error"] = f"retrieval failed: {exc}"
        docs = [(d.id, d.text) for d in found][:num_contexts]
        if calc_recall:
            self._recall(record, "naive", item, docs)
        if record["naive_error"] is not None:
            return
        prediction = NO_RELEVANT_INFO
        if docs:
            llm = self.config.final_llm
            config = llm_config_of(llm)

            def build(texts: list[str], _: str) -> str:
                return get_generate_intermediate_answer_prompt(item.question, texts)

            try:
                prompt = agent.budget.fit(build, [text for _, text in docs], "", config.max_tokens)
                prediction = clean_answer(str(llm.chat(prompt, llm_config=config)))
            except Exception as exc:
                record["naive_error"] = f"naive answer failed: {type(exc).__name__}: {exc}"
                return
        verdict = judge_answer(item.question, prediction, item.answers, self.config.judge_llm)
        record.update(naive_prediction=prediction, naive_is_correct=verdict.correct, naive_judge=verdict.source,
                      naive_em=exact_match(prediction, item.answers), naive_f1=f1_score(prediction, item.answers))

    # -- summary -------------------------------------------------------------------------------------
