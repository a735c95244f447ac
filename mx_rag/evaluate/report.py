# SPDX-License-Identifier: Apache-2.0
"""Scoring one answered test question, and the report of a run: per-setting means, paired comparison, Markdown.

A record is ``{"key", "setting", "id", "question", "reference", "answer", "contexts", "recall",
"em", "f1", "seconds", "metrics": {...}, "error"}``; the report's numbers are means over the
records of a setting (NaN scores left out), with the count of questions each mean is over.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mx_rag.corag.metrics import answer_tokens, exact_match, f1_score, normalize_answer

__all__ = ["compare", "passage_recall", "score_answer", "summarize", "to_markdown"]

BASE_COLUMNS = ("recall", "em", "f1", "seconds")


def _overlap(gold: str, text: str) -> float:
    gold_tokens = answer_tokens(gold)
    if not gold_tokens:
        return 0.0
    found = set(answer_tokens(text))
    return sum(token in found for token in gold_tokens) / len(gold_tokens)


def passage_recall(passages: Sequence[str], contexts: Sequence[str]) -> float:
    """Share of the gold passages found among the retrieved contexts (same text, one inside the other,
    or 80 % of the gold passage's words in one context)."""
    if not passages:
        return math.nan
    found = 0
    for passage in passages:
        gold = normalize_answer(passage)
        for context in contexts:
            text = normalize_answer(context)
            if gold and (gold in text or (text and text in gold and len(text) * 2 >= len(gold))
                         or _overlap(passage, context) >= 0.8):
                found += 1
                break
    return found / len(passages)


def score_answer(answer: str, reference: str) -> dict[str, float]:
    """SQuAD exact match and token F1 against the reference answer."""
    return {"em": exact_match(answer, [reference]), "f1": f1_score(answer, [reference])}


def _mean(values: list[Any]) -> tuple[float | None, int]:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return (sum(kept) / len(kept) if kept else None), len(kept)


def summarize(records: Sequence[dict[str, Any]], settings: Sequence[str], metrics: Sequence[str]) -> dict[str, Any]:
    """``{setting: {"questions", "failed", column: mean, "n_"+column: count}}`` for each setting."""
    out: dict[str, Any] = {}
    for setting in settings:
        mine = [r for r in records if r["setting"] == setting]
        ok = [r for r in mine if r.get("error") is None]
        row: dict[str, Any] = {"questions": len(mine), "failed": len(mine) - len(ok)}
        for column in BASE_COLUMNS:
            row[column], row[f"n_{column}"] = _mean([r.get(column) for r in ok])
        for metric in metrics:
            row[metric], row[f"n_{metric}"] = _mean([(r.get("metrics") or {}).get(metric) for r in ok])
        out[setting] = row
    return out


def compare(records: Sequence[dict[str, Any]], first: str, second: str, columns: Sequence[str]) -> dict[str, Any]:
    """Paired differences ``first - second`` over the questions both answered: mean and standard error."""
    def by_id(setting: str) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in records if r["setting"] == setting and r.get("error") is None}

    a, b = by_id(first), by_id(second)
    shared = sorted(set(a) & set(b))
    result: dict[str, Any] = {"first": first, "second": second, "paired_questions": len(shared)}
    for column in columns:
        diffs = []
        for key in shared:
            x, y = _value(a[key], column), _value(b[key], column)
            if x is not None and y is not None:
                diffs.append(x - y)
        if not diffs:
            result[column] = None
            continue
        mean = sum(diffs) / len(diffs)
        spread = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
        result[column] = {"mean_diff": mean, "stderr": spread / math.sqrt(len(diffs)), "n": len(diffs)}
    return result


def _value(record: dict[str, Any], column: str) -> float | None:
    value = record.get(column, (record.get("metrics") or {}).get(column))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _cell(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def to_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: one row per setting, then the comparison when there is one."""
    columns = [*BASE_COLUMNS, *report["metrics"]]
    lines = [f"# mxrag eval: {report['knowledge_base']}", "",
             f"{report['questions']} questions ({report['testset']}); judge and answers by {report['llm']}.", "",
             "| setting | questions | failed | " + " | ".join(columns) + " |",
             "|---|---|---|" + "---|" * len(columns)]
    for name, row in report["summary"].items():
        cells = [_cell(row.get(column)) for column in columns]
        lines.append(f"| {name} | {row['questions']} | {row['failed']} | " + " | ".join(cells) + " |")
    comparison = report.get("comparison")
    if comparison:
        lines += ["", f"{comparison['first']} minus {comparison['second']} over {comparison['paired_questions']} "
                      "questions both answered (mean difference ± standard error):", "",
                  "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines.append("| " + " | ".join(
            "–" if comparison.get(c) is None else f"{comparison[c]['mean_diff']:+.3f} ± {comparison[c]['stderr']:.3f}"
            for c in columns) + " |")
    timings = report.get("timings")
    if timings:
        lines += ["", f"Time of this run: ingestion and LLM start {timings['ingest_and_llm_start_s']:.0f} s, "
                      f"test set {timings['testset_s']:.0f} s, answers and judging {timings['answers_s']:.0f} s."]
    lines += ["", "recall: share of the gold passages among the retrieved chunks; em/f1: SQuAD exact match and "
                  "token F1 against the reference answers; seconds: time to the whole answer."]
    return "\n".join(lines) + "\n"
