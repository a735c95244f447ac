# SPDX-License-Identifier: Apache-2.0
"""The twelve metrics of ``RAGEvaluator``, each a function of one row and a ``Judge``.

They follow the definitions of RAGAS 0.1 (the original's engine) with our own prompts. A row is
``{"user_input", "response", "retrieved_contexts", "reference"}``; a metric returns a score in
[0, 1], or NaN when the judge gave nothing to score.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from mx_rag.evaluate.judge import Judge

__all__ = ["METRICS", "REQUIRED", "RESULT_KEY"]

Row = dict[str, Any]
NAN = float("nan")
_EVASIVE = re.compile(r"\b(i don'?t know|i do not know|cannot answer|can'?t answer|no information|not sure)\b|"
                      r"不知道|无法回答|没有相关信息|不确定", re.IGNORECASE)


def _context(row: Row) -> str:
    return "\n\n".join(row["retrieved_contexts"])


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else NAN


def faithfulness(row: Row, judge: Judge) -> float:
    statements = judge.statements(row["user_input"], row["response"])
    return _share(judge.supported(_context(row), statements))


def answer_relevancy(row: Row, judge: Judge) -> float:
    if _EVASIVE.search(row["response"]):
        return 0.0
    questions = judge.questions(row["response"])
    if not questions:
        return NAN
    return sum(judge.similarity(row["user_input"], q) for q in questions) / len(questions)


def _average_precision(flags: list[bool]) -> float:
    if not any(flags):
        return 0.0 if flags else NAN
    hits, total = 0, 0.0
    for k, useful in enumerate(flags, start=1):
        if useful:
            hits += 1
            total += hits / k
    return total / hits


def context_precision(row: Row, judge: Judge) -> float:
    return _average_precision(judge.useful(row["user_input"], row["reference"], row["retrieved_contexts"]))


def context_utilization(row: Row, judge: Judge) -> float:
    return _average_precision(judge.useful(row["user_input"], row["response"], row["retrieved_contexts"]))


def context_recall(row: Row, judge: Judge) -> float:
    statements = judge.statements(row["user_input"], row["reference"])
    return _share(judge.supported(_context(row), statements))


def context_entity_recall(row: Row, judge: Judge) -> float:
    entities = judge.entities(row["reference"])
    context = _context(row).casefold()
    return _share([entity.casefold() in context for entity in entities])


def answer_similarity(row: Row, judge: Judge) -> float:
    return judge.similarity(row["reference"], row["response"])


def answer_correctness(row: Row, judge: Judge) -> float:
    said = judge.statements(row["user_input"], row["response"])
    truth = judge.statements(row["user_input"], row["reference"])
    true_pos = sum(judge.supported(row["reference"], said))
    false_pos = len(said) - true_pos
    false_neg = len(truth) - sum(judge.supported(row["response"], truth))
    denominator = true_pos + 0.5 * (false_pos + false_neg)
    f1 = true_pos / denominator if denominator else 0.0
    return 0.75 * f1 + 0.25 * answer_similarity(row, judge)


def noise_sensitivity(row: Row, judge: Judge) -> float:
    """Share of the response's statements that are wrong (not in the reference) yet taken from the context."""
    said = judge.statements(row["user_input"], row["response"])
    correct = judge.supported(row["reference"], said)
    from_context = judge.supported(_context(row), said)
    return _share([f and not c for c, f in zip(correct, from_context, strict=True)])


def _two_judges(judge: Judge, names: tuple[str, str], top: int, **fields: Any) -> float:
    allowed = tuple(range(0, top + 1, 2 if top == 4 else 1))
    scores = [judge.rating(name, allowed, **fields) for name in names]
    kept = [s / top for s in scores if s is not None]
    return sum(kept) / len(kept) if kept else NAN


def nv_accuracy(row: Row, judge: Judge) -> float:
    return _two_judges(judge, ("accuracy_1", "accuracy_2"), 4, question=row["user_input"],
                       answer=row["response"], reference=row["reference"])


def nv_context_relevance(row: Row, judge: Judge) -> float:
    return _two_judges(judge, ("relevance_1", "relevance_2"), 2, question=row["user_input"], context=_context(row))


def nv_response_groundedness(row: Row, judge: Judge) -> float:
    return _two_judges(judge, ("grounded_1", "grounded_2"), 2, answer=row["response"], context=_context(row))


METRICS: dict[str, Callable[[Row, Judge], float]] = {
    "answer_correctness": answer_correctness,
    "answer_relevancy": answer_relevancy,
    "answer_similarity": answer_similarity,
    "context_entity_recall": context_entity_recall,
    "context_precision": context_precision,
    "context_recall": context_recall,
    "context_utilization": context_utilization,
    "faithfulness": faithfulness,
    "noise_sensitivity": noise_sensitivity,
    "nv_accuracy": nv_accuracy,
    "nv_context_relevance": nv_context_relevance,
    "nv_response_groundedness": nv_response_groundedness,
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "answer_correctness": ("user_input", "response", "reference"),
    "answer_relevancy": ("user_input", "response"),
    "answer_similarity": ("reference", "response"),
    "context_entity_recall": ("reference", "retrieved_contexts"),
    "context_precision": ("user_input", "reference", "retrieved_contexts"),
    "context_recall": ("user_input", "reference", "retrieved_contexts"),
    "context_utilization": ("user_input", "response", "retrieved_contexts"),
    "faithfulness": ("user_input", "response", "retrieved_contexts"),
    "noise_sensitivity": ("user_input", "reference", "response", "retrieved_contexts"),
    "nv_accuracy": ("user_input", "response", "reference"),
    "nv_context_relevance": ("user_input", "retrieved_contexts"),
    "nv_response_groundedness": ("response", "retrieved_contexts"),
}

RESULT_KEY = {"answer_similarity": "semantic_similarity"}


def is_nan(value: float) -> bool:
    return isinstance(value, float) and math.isnan(value)
