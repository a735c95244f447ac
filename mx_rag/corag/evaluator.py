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
and stays in every denominator; its record carries ``error``.

Resuming: each finished question is appended (flushed and fsynced) to a checkpoint next to the
report, ``<save_file>.partial.jsonl``, whose first line pins the eval file's content and the
settings that change results. A later ``evaluate`` with the same ``save_file`` reuses the
questions found there and runs only the others; a checkpoint of another file or other settings is
refused (``restart=True`` discards it); a retrieval source given as an object, not a URL, is
known by its class only. Questions that failed while running (``error`` or
``naive_error`` set) are run again; invalid records are not. When every question is done the
report is written and the checkpoint removed - kept instead while some question failed, so that
running again retries just those. Without a terminal on stderr, one ``INFO`` line per finished
question (``i/N done, EM so far ...``) replaces the progress bar.

Example:
    >>> report = CoRagEvaluator(config).evaluate("hotpotqa_dev.json", "out/report.json")  # doctest: +SKIP
    >>> report[0]["corag_accuracy"], report[0]["corag_em"], report[0]["corag_f1"]          # doctest: +SKIP
    (0.42, 0.31, 0.44)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from mx_rag.corag.config import DEFAULT_SAMPLE_TASK_DESC, DEFAULT_TASK_DESC, CoRagBaseConfig
from mx_rag.corag.corag_agent import CoRagAgent, ReasoningPath
from mx_rag.corag.datasets import MultiHopItem, load_records, parse_item
from mx_rag.corag.metrics import exact_match, f1_score, fact_recall, judge_answer, title_recall
from mx_rag.corag.prompts import NO_RELEVANT_INFO, clean_answer, get_generate_intermediate_answer_prompt
from mx_rag.corag.retrieval_api import as_document_source
from mx_rag.corag.sample_generator import build_agent, llm_config_of, run_parallel
from mx_rag.corag.types import DocumentSource, RetrievedDocument
from mx_rag.errors import ParameterError
from mx_rag.utils.checks import check_bool, check_instance, check_int, check_str
from mx_rag.utils.common import MAX_TOP_K, TEXT_MAX_LEN
from mx_rag.utils.file_check import check_path

__all__ = ["CHECKPOINT_SUFFIX", "CoRagEvaluator", "CountingSource", "checkpoint_path", "select_documents_for_recall"]

logger = logging.getLogger(__name__)

CHECKPOINT_SUFFIX = ".partial.jsonl"
CHECKPOINT_TYPE = "CoRagEvaluator checkpoint"
CHECKPOINT_VERSION = 1


class CountingSource:
    """A ``DocumentSource`` wrapper that counts calls, failures and empty answers for one question.

    Failures are seen when the inner source has ``retrieve_strict`` (which raises); a plain
    ``retrieve`` that degrades to ``[]`` shows up as an empty answer only.
    """

    def __init__(self, inner: DocumentSource) -> None:
        self.inner = inner
        self.calls = self.failures = self.empty = 0
        self._lock = threading.Lock()

    def retrieve_strict(self, query: str, top_k: int) -> list[RetrievedDocument]:
        """The inner source's documents; its errors propagate (and are counted)."""
        strict = getattr(self.inner, "retrieve_strict", None)
        try:
            found = strict(query, top_k) if callable(strict) else self.inner.retrieve(query, top_k)
        except Exception:
            with self._lock:
                self.calls += 1
                self.failures += 1
            raise
        with self._lock:
            self.calls += 1
            self.empty += not found
        return list(found)

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        """Like ``retrieve_strict``, but a failure gives ``[]`` and a warning (the protocol)."""
        try:
            return self.retrieve_strict(query, top_k)
        except ParameterError:
            raise
        except Exception as exc:
            logger.warning("retrieval failed, using no documents: %s: %s", type(exc).__name__, str(exc)[:300])
            return []


def select_documents_for_recall(path: ReasoningPath, num_contexts: int) -> list[tuple[str, str]]:
    """At most ``num_contexts`` distinct ``(id, text)`` documents of ``path``, spread over its steps.

    Texts are de-duplicated (first occurrence wins); each step gets ``num_contexts // steps``
    slots (the first ``num_contexts % steps`` steps one more), in rank order; unused slots are
    filled with the remaining documents in path order (the original's allocation).

    >>> p = ReasoningPath("q", ["a", "b"], ["x", "y"], [["1", "2", "3"], ["2", "4"]], [None, None],
    ...                   [["t1", "t2", "t3"], ["t2", "t4"]])
    >>> select_documents_for_recall(p, 3)
    [('1', 't1'), ('2', 't2'), ('4', 't4')]
    """
    seen: set[str] = set()
    steps: list[list[tuple[str, str]]] = []
    for index, texts in enumerate(path.documents):
        ids = path.document_ids[index] if index < len(path.document_ids) else []
        step = []
        for position, text in enumerate(texts):
            key = " ".join(text.split())
            if key and key not in seen:
                seen.add(key)
                step.append((ids[position] if position < len(ids) else "", text))
        steps.append(step)
    if not steps:
        return []
    share, extra = divmod(num_contexts, len(steps))
    chosen = [step[: share + (1 if i < extra else 0)] for i, step in enumerate(steps)]
    picked = [doc for part in chosen for doc in part]
    rest = [doc for i, step in enumerate(steps) for doc in step[len(chosen[i]):]]
    picked += rest[: max(0, num_contexts - len(picked))]
    order = {doc: n for n, doc in enumerate(doc for step in steps for doc in step)}
    return sorted(picked, key=order.__getitem__)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _micro(records: list[dict[str, Any]], key: str) -> float | None:
    parts = [r[key] for r in records if isinstance(r.get(key), dict)]
    total = sum(p["total"] for p in parts)
    return sum(p["hits"] for p in parts) / total if total else None


def _ratio(count: int, total: int) -> float:
    return count / total if total else 0.0


def _empty_record() -> dict[str, Any]:
    """A per-question record before anything ran (the seed's keys first, then ours)."""
    return {
        "id": None, "question": None, "ground_truth": None, "corag_prediction": "", "naive_prediction": None,
        "is_correct": False, "naive_is_correct": None, "reasoning_steps": [], "time": [0.0, 0.0],
        "corag_recall": None, "naive_recall": None, "ground_truths": [], "em": 0.0, "f1": 0.0,
        "naive_em": None, "naive_f1": None, "corag_title_recall": None, "naive_title_recall": None,
        "stop_reason": None, "judge": None, "naive_judge": None, "retrieval_calls": 0,
        "retrieval_failures": 0, "empty_retrievals": 0, "error": None, "naive_error": None,
    }


def _atomic_write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=4, ensure_ascii=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def checkpoint_path(save_file: str | os.PathLike[str]) -> Path:
    """Where ``evaluate(..., save_file)`` keeps its finished questions: ``<save_file>.partial.jsonl``."""
    path = Path(save_file)
    return path.with_name(path.name + CHECKPOINT_SUFFIX)


def _question_keys(records: list[Any]) -> list[str]:
    """One key per record: its id (``id``/``_id``/...), or ``#<index>`` without one or for a repeated id."""
    keys: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(records):
        try:
            key = parse_item(raw, index).id
        except ParameterError:
            key = ""
        if not key or key in seen or key.startswith("#"):
            key = f"#{index}"
        seen.add(key)
        keys.append(key)
    return keys


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _llm_identity(llm: Any) -> Any:
    """What of an LLM changes answers: its model name and generation settings (never its URL)."""
    if llm is None:
        return None
    identity: dict[str, Any] = {"model": getattr(llm, "model_name", None) or type(llm).__name__}
    config = llm_config_of(llm)
    for name in ("max_tokens", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
        identity[name] = getattr(config, name)
    return identity


def _retryable(record: dict[str, Any]) -> bool:
    """A valid question whose run failed (an invalid record fails the same way every time)."""
    return record.get("question") is not None and (record.get("error") is not None
                                                    or record.get("naive_error") is not None)


def _stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(callable(isatty) and isatty())


def _read_checkpoint(path: Path, header: dict[str, Any], keys: list[str]) -> dict[str, dict[str, Any]]:
    """The finished records of the checkpoint at ``path`` by question key; {} when there is none.

    Raises:
        ParameterError: the file is not a checkpoint, or it was written for another eval file or
            other settings.
    """
    if not path.is_file():
        return {}
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or not lines[0].strip():  # stopped before its header was written
        return {}
    advice = "pass restart=True (mxrag corag evaluate --restart) to discard it, or choose another save_file"
    try:
        found = json.loads(lines[0])
    except ValueError:
        found = None
    if not isinstance(found, dict) or found.get("type") != CHECKPOINT_TYPE:
        raise ParameterError(f"{path} is not a CoRagEvaluator checkpoint; {advice}")
    if found.get("version") != CHECKPOINT_VERSION:
        raise ParameterError(f"checkpoint {path} has format version {found.get('version')!r}, this version "
                             f"reads {CHECKPOINT_VERSION}; {advice}")
    if found.get("eval_sha256") != header["eval_sha256"]:
        raise ParameterError(
            f"checkpoint {path} belongs to another eval file ({found.get('eval_file')!r}, "
            f"{found.get('questions')} questions), not {header['eval_file']!r} ({header['questions']} questions); "
            f"{advice}")
    then, now = found.get("settings") or {}, json.loads(json.dumps(header["settings"]))
    changed = [f"{name} {then.get(name)!r} then, {now.get(name)!r} now"
               for name in sorted(set(then) | set(now)) if then.get(name) != now.get(name)]
    if changed:
        raise ParameterError(f"checkpoint {path} was written with other settings ({'; '.join(changed)}); {advice}")
    known = set(keys)
    done: dict[str, dict[str, Any]] = {}
    broken = 0
    for line in lines[1:]:
        try:
            entry = json.loads(line)
        except ValueError:
            broken += bool(line.strip())
            continue
        if isinstance(entry, dict) and entry.get("key") in known and isinstance(entry.get("record"), dict):
            done[entry["key"]] = entry["record"]  # a later line (a retried question) wins
        else:
            broken += 1
    if broken:
        logger.warning("%s: ignoring %d broken or unknown line(s)", path, broken)
    return done


class _Checkpoint:
    """The checkpoint file, appended one finished question at a time (flushed, fsynced, under a lock)."""

    def __init__(self, path: Path, header: dict[str, Any], kept: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in [header, *kept])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:  # a clean start: no half-written last line to append to, no stale failed records
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._file: TextIO = path.open("a", encoding="utf-8")

    def write(self, entry: dict[str, Any]) -> None:
        text = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            self._file.write(text)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _Tally:
    """Finished questions so far, for the per-question progress line."""

    def __init__(self, total: int, log_lines: bool) -> None:
        self.total, self.log_lines = total, log_lines
        self.done = self.correct = self.failed = 0
        self.em = 0.0
        self._lock = threading.Lock()

    def add(self, record: dict[str, Any], *, announce: bool = True) -> None:
        with self._lock:
            self.done += 1
            self.em += record["em"]
            self.correct += bool(record["is_correct"])
            self.failed += record["error"] is not None
            if announce and self.log_lines:
                logger.info("CoRAG eval: %d/%d done, EM so far %.3f, accuracy so far %.3f, %d failed",
                            self.done, self.total, self.em / self.done, self.correct / self.done, self.failed)


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
        from an interrupted run with the same file and settings are not run again.

        Args:
            eval_file: a JSON array (or JSON Lines) of HotpotQA or MuSiQue records.
            save_file: where the report is written (JSON, atomically; directory created).
            calc_recall: compute the recall measures. Default True.
            enable_naive_retrieval: also run the naive baseline (whether or not recall is
                computed). Default True.
            num_contexts: documents the naive baseline retrieves, and the cap of CoRAG's
                documents counted for recall, in [1, 10000]. Default 10.
            restart: (keyword, ours) ignore an existing checkpoint and run every question.
                Default False.

        Returns:
            The summary, then one record per input record in input order. Summary: the seed's
            ``type`` ("Summary"), ``total_samples``, ``corag_accuracy``, ``naive_accuracy``,
            ``corag_correct_count``, ``naive_correct_count``, ``avg_path_time``, ``avg_time``
            (mean time after the path), ``corag_micro_recall``, ``naive_micro_recall``; ours:
            ``corag_em``, ``corag_f1``, ``naive_em``, ``naive_f1``, ``corag_title_recall``,
            ``naive_title_recall``, ``failed_count``, ``naive_failed_count``,
            ``retrieval_failure_count``, ``empty_retrieval_count``, ``judge_fallback_count``,
            ``num_contexts``, ``max_path_length``. Naive values are None when the baseline is off,
            recall values None when ``calc_recall`` is False. Record: the seed's ``question``,
            ``ground_truth``, ``corag_prediction``, ``naive_prediction``, ``is_correct``,
            ``naive_is_correct``, ``reasoning_steps`` (``subquery``, ``subanswer``, and our
            ``document_ids``), ``time`` (``[path seconds, seconds after the path]``),
            ``corag_recall``, ``naive_recall``; ours: ``id``, ``ground_truths`` (aliases
            included), ``em``, ``f1``, ``naive_em``, ``naive_f1``, the title recalls,
            ``stop_reason``, ``judge`` / ``naive_judge`` (``"judge"``, ``"containment"`` or
            ``"fallback"``), ``retrieval_calls``, ``retrieval_failures``, ``empty_retrievals``,
            ``error`` and ``naive_error`` (None unless that part failed).

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
        keys = _question_keys(records)
        header = {"type": CHECKPOINT_TYPE, "version": CHECKPOINT_VERSION, "eval_file": str(Path(eval_file).resolve()),
                  "eval_sha256": _digest(records), "questions": len(records), "settings": self._settings(*options)}
        partial = checkpoint_path(out_path)
        done = {} if restart else _read_checkpoint(partial, header, keys)
        results: list[dict[str, Any] | None] = [None] * len(records)
        for index, key in enumerate(keys):
            if key in done and not _retryable(done[key]):
                results[index] = done[key]
        todo = [index for index, record in enumerate(results) if record is None]
        if done:
            logger.info("CoRAG eval: resuming from %s: %d of %d questions done, %d to run (failed ones again)",
                        partial, len(records) - len(todo), len(records), len(todo))
        tally = _Tally(len(records), log_lines=not _stderr_is_terminal())
        for record in results:
            if record is not None:
                tally.add(record, announce=False)
        kept = [{"key": keys[i], "index": i, "record": r} for i, r in enumerate(results) if r is not None]
        checkpoint = _Checkpoint(partial, header, kept)
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
        report = [self._summary(finished, *options), *finished]
        _atomic_write_json(out_path, report)
        retry = sum(_retryable(record) for record in finished)
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
            "task_desc_sha256": _digest(self.task_desc)[:16],
            "final_task_desc_sha256": _digest(self.final_task_desc)[:16],
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
            record = _empty_record()
            record["error"] = f"evaluation failed: {type(exc).__name__}: {exc}"
            return record

    def _evaluate_one(
        self, raw: Any, index: int, source: DocumentSource, calc_recall: bool, naive: bool, num_contexts: int
    ) -> dict[str, Any]:
        started = time.perf_counter()
        record = _empty_record()
        try:
            item = parse_item(raw, index)
        except ParameterError as exc:
            record["error"] = str(exc)
            return record
        record.update(id=item.id or None, question=item.question, ground_truth=item.answer,
                      ground_truths=item.answers)
        counter = CountingSource(source)
        agent = build_agent(self.config, counter)
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
            self._naive(record, item, agent, counter, calc_recall, num_contexts)
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
        record.update(retrieval_calls=counter.calls, retrieval_failures=counter.failures,
                      empty_retrievals=counter.empty)
        record["time"] = [path_time, time.perf_counter() - started - path_time]
        return record

    @staticmethod
    def _recall(record: dict[str, Any], prefix: str, item: MultiHopItem, docs: list[tuple[str, str]]) -> None:
        key = "corag_recall" if prefix == "corag" else "naive_recall"
        record[key] = fact_recall(item.golden_facts, [text for _, text in docs])
        if item.supporting_titles:
            record[f"{prefix}_title_recall"] = title_recall(item.supporting_titles, docs)

    def _naive(self, record: dict[str, Any], item: MultiHopItem, agent: CoRagAgent, source: CountingSource,
               calc_recall: bool, num_contexts: int) -> None:
        """The baseline: the question retrieves ``num_contexts`` documents; ``final_llm`` answers."""
        record.update(naive_prediction="", naive_is_correct=False, naive_em=0.0, naive_f1=0.0)
        try:
            found = source.retrieve_strict(item.question, num_contexts)
        except Exception as exc:
            found = []
            record["naive_error"] = f"retrieval failed: {type(exc).__name__}: {exc}"
        docs = [(d.id, d.text) for d in found if isinstance(d, RetrievedDocument) and d.text.strip()][:num_contexts]
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

    def _summary(self, records: list[dict[str, Any]], calc_recall: bool, naive: bool,
                 num_contexts: int) -> dict[str, Any]:
        total = len(records)
        correct = sum(bool(r["is_correct"]) for r in records)
        naive_correct = sum(bool(r["naive_is_correct"]) for r in records) if naive else None
        timed = [r for r in records if r["question"] is not None]
        return {
            "type": "Summary",
            "total_samples": total,
            "corag_accuracy": _ratio(correct, total),
            "naive_accuracy": _ratio(naive_correct, total) if naive_correct is not None else None,
            "corag_correct_count": correct,
            "naive_correct_count": naive_correct,
            "avg_path_time": _mean([r["time"][0] for r in timed]),
            "avg_time": _mean([r["time"][1] for r in timed]),
            "corag_micro_recall": _micro(records, "corag_recall") if calc_recall else None,
            "naive_micro_recall": _micro(records, "naive_recall") if calc_recall and naive else None,
            "corag_em": _mean([r["em"] for r in records]),
            "corag_f1": _mean([r["f1"] for r in records]),
            "naive_em": _mean([r["naive_em"] or 0.0 for r in records]) if naive else None,
            "naive_f1": _mean([r["naive_f1"] or 0.0 for r in records]) if naive else None,
            "corag_title_recall": _micro(records, "corag_title_recall") if calc_recall else None,
            "naive_title_recall": _micro(records, "naive_title_recall") if calc_recall and naive else None,
            "failed_count": sum(r["error"] is not None for r in records),
            "naive_failed_count": sum(r["naive_error"] is not None for r in records) if naive else None,
            "retrieval_failure_count": sum(r["retrieval_failures"] for r in records),
            "empty_retrieval_count": sum(r["empty_retrievals"] for r in records),
            "judge_fallback_count": sum((r["judge"] == "fallback") + (r["naive_judge"] == "fallback") for r in records),
            "num_contexts": num_contexts,
            "max_path_length": self.config.max_path_length,
        }
