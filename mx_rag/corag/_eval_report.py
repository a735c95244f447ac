# SPDX-License-Identifier: Apache-2.0
"""The evaluator's records and report: the empty per-question record, the documents counted for
CoRAG's recall, the summary, and the progress tally."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from mx_rag.corag.reasoning_path import ReasoningPath

__all__ = ["Tally", "empty_record", "mean", "micro", "ratio", "select_documents_for_recall", "stderr_is_terminal",
           "summarize"]

logger = logging.getLogger("mx_rag.corag.evaluator")


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


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def micro(records: list[dict[str, Any]], key: str) -> float | None:
    parts = [r[key] for r in records if isinstance(r.get(key), dict)]
    total = sum(p["total"] for p in parts)
    return sum(p["hits"] for p in parts) / total if total else None


def ratio(count: int, total: int) -> float:
    return count / total if total else 0.0


def empty_record() -> dict[str, Any]:
    """A per-question record before anything ran (the seed's keys first, then ours)."""
    return {
        "id": None, "question": None, "ground_truth": None, "corag_prediction": "", "naive_prediction": None,
        "is_correct": False, "naive_is_correct": None, "reasoning_steps": [], "time": [0.0, 0.0],
        "corag_recall": None, "naive_recall": None, "ground_truths": [], "em": 0.0, "f1": 0.0,
        "naive_em": None, "naive_f1": None, "corag_title_recall": None, "naive_title_recall": None,
        "stop_reason": None, "judge": None, "naive_judge": None, "retrieval_calls": 0,
        "retrieval_failures": 0, "empty_retrievals": 0, "error": None, "naive_error": None,
    }


def stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(callable(isatty) and isatty())


class Tally:
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


def summarize(
    records: list[dict[str, Any]], calc_recall: bool, naive: bool, num_contexts: int, max_path_length: int
) -> dict[str, Any]:
    """The report's first entry: the seed's summary keys, then ours (see ``CoRagEvaluator.evaluate``)."""
    total = len(records)
    correct = sum(bool(r["is_correct"]) for r in records)
    naive_correct = sum(bool(r["naive_is_correct"]) for r in records) if naive else None
    timed = [r for r in records if r["question"] is not None]
    return {
        "type": "Summary",
        "total_samples": total,
        "corag_accuracy": ratio(correct, total),
        "naive_accuracy": ratio(naive_correct, total) if naive_correct is not None else None,
        "corag_correct_count": correct,
        "naive_correct_count": naive_correct,
        "avg_path_time": mean([r["time"][0] for r in timed]),
        "avg_time": mean([r["time"][1] for r in timed]),
        "corag_micro_recall": micro(records, "corag_recall") if calc_recall else None,
        "naive_micro_recall": micro(records, "naive_recall") if calc_recall and naive else None,
        "corag_em": mean([r["em"] for r in records]),
        "corag_f1": mean([r["f1"] for r in records]),
        "naive_em": mean([r["naive_em"] or 0.0 for r in records]) if naive else None,
        "naive_f1": mean([r["naive_f1"] or 0.0 for r in records]) if naive else None,
        "corag_title_recall": micro(records, "corag_title_recall") if calc_recall else None,
        "naive_title_recall": micro(records, "naive_title_recall") if calc_recall and naive else None,
        "failed_count": sum(r["error"] is not None for r in records),
        "naive_failed_count": sum(r["naive_error"] is not None for r in records) if naive else None,
        "retrieval_failure_count": sum(r["retrieval_failures"] for r in records),
        "empty_retrieval_count": sum(r["empty_retrievals"] for r in records),
        "judge_fallback_count": sum((r["judge"] == "fallback") + (r["naive_judge"] == "fallback") for r in records),
        "num_contexts": num_contexts,
        "max_path_length": max_path_length,
    }
