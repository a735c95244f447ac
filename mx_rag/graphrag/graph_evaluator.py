# SPDX-License-Identifier: Apache-2.0
"""``GraphEvaluator``: an LLM judges the triples extracted from each passage.

For each passage (``raw_text``) and each kind of extraction it holds, the LLM is asked twice:
which extracted items the text does not support (wrong ones), and which items the text states
that the extraction missed. From the counts, per kind:

- precision = (extracted - wrong) / extracted
- recall = (extracted - wrong) / (extracted - wrong + missed)
- F1, their harmonic mean

summed over all passages (micro average). The report keeps, per passage, the wrong and the
missed items as the LLM named them, so a prompt or an extractor can be fixed where it fails.

The kinds, as in the original's relations files:

- ``entity_relations``: ``[{"Head": ..., "Relation": ..., "Tail": ...}]``
- ``event_entity_relations``: ``[{"Event": sentence, "Entity": [names]}]`` (each entity counts)
- ``event_relations``: ``[{"Head": event, "Relation": before/after/at the same time/because/as a result,
  "Tail": event}]``
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from mx_rag.errors import ParameterError, RemoteError
from mx_rag.graphrag.json_repair import loads_tolerant
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.llm.protocol import ChatLLM, chat_llm
from mx_rag.utils.checks import check_instance, check_int, fail

__all__ = ["KINDS", "GraphEvaluation", "GraphEvaluator", "KindScore", "PassageReport", "pipeline_relations"]

logger = logging.getLogger(__name__)

KINDS = ("entity_relations", "event_entity_relations", "event_relations")
MAX_RELATIONS = 50_000
MAX_DEPTH = 5
MAX_TEXT = 4096

_SHAPES = {
    "entity_relations": '{"Head": "...", "Relation": "...", "Tail": "..."}',
    "event_entity_relations": '{"Event": "<sentence>", "Entity": ["...", "..."]}',
    "event_relations": '{"Head": "<event>", "Relation": "before|after|at the same time|because|as a result", '
                       '"Tail": "<event>"}',
}
_WHAT = {
    "entity_relations": "relations between entities",
    "event_entity_relations": "events with the entities taking part in them",
    "event_relations": "relations between events (before, after, at the same time, because, as a result)",
}

WRONG_PROMPT = """You check information extracted from a text.
Text:
{text}

Extracted {what}:
{items}

List the extracted items that the text does not support. Judge the meaning, not the exact wording:
an item is wrong only when the text contradicts it or says nothing like it.{entity_note}
Answer with a JSON array of the wrong items, each written as {shape}. Answer [] if all are right."""

MISSING_PROMPT = """You check information extracted from a text.
Text:
{text}

Extracted {what}:
{items}

List the important {what} that the text states clearly but the extraction lacks (not items similar to
extracted ones). Answer with a JSON array, each item written as {shape}. Answer [] if nothing important is missing."""

_ENTITY_NOTE = " For events, list only the wrong entities in each item's Entity list."


@dataclass
class KindScore:
    """The counts and scores of one kind of extraction (NaN where undefined: nothing extracted)."""

    extracted: int = 0
    wrong: int = 0
    missed: int = 0

    @property
    def precision(self) -> float:
        return (self.extracted - self.wrong) / self.extracted if self.extracted else math.nan

    @property
    def recall(self) -> float:
        correct = self.extracted - self.wrong
        return correct / (correct + self.missed) if correct + self.missed else math.nan

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else math.nan  # NaN propagates


@dataclass
class PassageReport:
    """What the LLM found wrong and missing in one passage's extraction of one kind."""

    index: int
    kind: str
    extracted: int
    wrong: list[Any] = field(default_factory=list)
    missed: list[Any] = field(default_factory=list)


@dataclass
class GraphEvaluation:
    """The result of ``GraphEvaluator.evaluate``: scores per kind, details per passage, failures."""

    scores: dict[str, KindScore]
    passages: list[PassageReport]
    failed: list[tuple[int, str]]  # (passage index, error) where the LLM could not be asked or understood

    def worst(self, kind: str, n: int = 10) -> list[PassageReport]:
        """The ``n`` passages with the most wrong plus missed items of ``kind``: where to look first."""
        reports = [p for p in self.passages if p.kind == kind and (p.wrong or p.missed)]
        return sorted(reports, key=lambda p: -(len(p.wrong) + len(p.missed)))[:n]

    def to_dict(self) -> dict[str, Any]:
        return {kind: {"extracted": s.extracted, "wrong": s.wrong, "missed": s.missed, "precision": s.precision,
                       "recall": s.recall, "f1": s.f1} for kind, s in self.scores.items()}

    def __str__(self) -> str:
        lines = [f"{'kind':<24}{'extracted':>10}{'wrong':>7}{'missed':>8}{'precision':>11}{'recall':>8}{'F1':>8}"]
        for kind, s in self.scores.items():
            lines.append(f"{kind:<24}{s.extracted:>10}{s.wrong:>7}{s.missed:>8}"
                         f"{s.precision:>11.4f}{s.recall:>8.4f}{s.f1:>8.4f}")
        if self.failed:
            lines.append(f"{len(self.failed)} passage(s) not evaluated (LLM errors), first: {self.failed[0]}")
        return "\n".join(lines)


def pipeline_relations(pipeline: Any, max_passages: int = MAX_RELATIONS) -> list[dict[str, Any]]:
    """What ``GraphRAGPipeline.build_graph`` extracted, per chunk, in ``evaluate``'s format.

    Each built chunk with at least one relation gives ``{"raw_text": chunk, "entity_relations":
    [{"Head", "Relation", "Tail"}]}`` (mx_rag extracts entity relations only), in document order,
    at most ``max_passages`` of them; chunks longer than 4096 characters are cut to that length.

    >>> report = GraphEvaluator(llm, LLMParameterConfig()).evaluate(pipeline_relations(pipeline))  # doctest: +SKIP
    """
    from mx_rag.graphrag.pipeline import GraphRAGPipeline

    check_instance("pipeline", pipeline, GraphRAGPipeline)
    check_int("max_passages", max_passages, 1, MAX_RELATIONS)
    registry = pipeline._registry
    out: list[dict[str, Any]] = []
    for document in registry.documents():
        for chunk in registry.chunks(registry.chunk_ids(document)).values():
            extraction = registry.cached(chunk.hash)
            if extraction is None or not extraction.relations:
                continue
            triples = [{"Head": r.source[:MAX_TEXT], "Relation": r.relation[:MAX_TEXT], "Tail": r.target[:MAX_TEXT]}
                       for r in extraction.relations]
            out.append({"raw_text": chunk.text[:MAX_TEXT], "entity_relations": triples})
            if len(out) == max_passages:
                return out
    return out


def _check_depth(value: Any, depth: int, where: str) -> None:
    if depth > MAX_DEPTH:
        raise ParameterError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ParameterError(f"{where} has {len(value)} characters, more than {MAX_TEXT}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_depth(item, depth + 1, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_depth(item, depth + 1, f"{where}[{i}]")


def _size(kind: str, items: Sequence[Any]) -> int:
    """How many judgements a list holds: one per triple, one per entity of an event."""
    if kind != "event_entity_relations":
        return len(items)
    return sum(len(item.get("Entity") or []) if isinstance(item, dict) else 1 for item in items)


class GraphEvaluator:
    """Judges extracted triples with an LLM and reports precision, recall and F1 per kind.

    Args:
        llm: a ``Text2TextLLM`` (or any object with ``chat``) that judges.
        llm_config: the settings of its calls (an ``LLMParameterConfig``).

    Example:
        >>> evaluator = GraphEvaluator(llm, LLMParameterConfig(temperature=0.5, top_p=0.8))   # doctest: +SKIP
        >>> report = evaluator.evaluate(relations)                                            # doctest: +SKIP
        >>> report.scores["entity_relations"].precision, report.worst("entity_relations", 3)   # doctest: +SKIP
    """

    def __init__(self, llm: ChatLLM, llm_config: LLMParameterConfig) -> None:
        self.llm = chat_llm("llm", llm, stream=False)
        self.llm_config = check_instance("llm_config", llm_config, LLMParameterConfig)

    def evaluate(self, relations: list[dict[str, Any]], max_workers: int = 8, verbose: bool = True) -> GraphEvaluation:
        """Judge every passage's extraction; print the score table (``verbose``) and return the report.

        Args:
            relations: 1 to 50000 dicts with ``raw_text`` and any of ``entity_relations``,
                ``event_entity_relations``, ``event_relations`` (a one-item list around a dict
                is unwrapped, as the original did); nested at most 5 deep, strings of at most
                4096 characters.
            max_workers: passages judged concurrently, 1 to 64.
            verbose: print the score table when done.

        A passage whose LLM call fails is listed in ``failed`` and left out of the scores.
        """
        items = self._check(relations)
        check_int("max_workers", max_workers, 1, 64)
        scores = {kind: KindScore() for kind in KINDS}
        passages: list[PassageReport] = []
        failed: list[tuple[int, str]] = []
        with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mx_rag-graph-eval") as pool:
            for index, outcome in enumerate(pool.map(self._judge_passage, items)):
                if isinstance(outcome, str):
                    failed.append((index, outcome))
                    continue
                for report in outcome:
                    report.index = index
                    score = scores[report.kind]
                    score.extracted += report.extracted
                    score.wrong += min(_size(report.kind, report.wrong), report.extracted)
                    score.missed += _size(report.kind, report.missed)
                    passages.append(report)
        result = GraphEvaluation({k: s for k, s in scores.items() if any(p.kind == k for p in passages)},
                                 passages, failed)
        logger.info("graph evaluation of %d passages:\n%s", len(items), result)
        if verbose:
            print(result)
        return result

    @staticmethod
    def _check(relations: Any) -> list[dict[str, Any]]:
        if not isinstance(relations, list) or not 1 <= len(relations) <= MAX_RELATIONS:
            raise fail("relations", relations, f"a list of 1 to {MAX_RELATIONS} dicts")
        items = []
        for i, item in enumerate(relations):
            if isinstance(item, list) and len(item) == 1:
                item = item[0]
            if not isinstance(item, dict) or not isinstance(item.get("raw_text"), str) or not item["raw_text"].strip():
                raise fail(f"relations[{i}]", item, "a dict with a non-empty 'raw_text' string")
            for kind in KINDS:
                if kind in item and not isinstance(item[kind], list):
                    raise fail(f"relations[{i}][{kind!r}]", item[kind], "a list")
            _check_depth(item, 1, f"relations[{i}]")
            items.append(item)
        return items

    def _judge_passage(self, item: dict[str, Any]) -> list[PassageReport] | str:
        reports = []
        try:
            for kind in KINDS:
                if kind not in item:
                    continue
                extracted = item[kind]
                shown = json.dumps(extracted, ensure_ascii=False)
                args = {"text": item["raw_text"], "what": _WHAT[kind], "items": shown, "shape": _SHAPES[kind]}
                wrong = self._ask(WRONG_PROMPT.format(
                    entity_note=_ENTITY_NOTE if kind == "event_entity_relations" else "", **args)) if extracted else []
                missed = self._ask(MISSING_PROMPT.format(**args))
                reports.append(PassageReport(0, kind, _size(kind, extracted), wrong, missed))
        except (RemoteError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return reports

    def _ask(self, prompt: str) -> list[Any]:
        answer = self.llm.chat(prompt, llm_config=self.llm_config)
        if not answer.strip() or answer.strip().rstrip(".!").lower() in ("none", "all correct", "all recognized"):
            return []
        value = loads_tolerant(answer)
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            raise ValueError(f"the LLM did not answer a JSON list: {answer[:200]!r}")
        return value
