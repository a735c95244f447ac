# SPDX-License-Identifier: Apache-2.0
"""``RAGEvaluator``: score RAG answers with an LLM judge and an embedder (the RAGAS 0.1 metrics)."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.embeddings import Embeddings

from mx_rag.errors import MxRagError, ParameterError
from mx_rag.evaluate.judge import Judge
from mx_rag.evaluate.metrics import METRICS, NAN, REQUIRED, RESULT_KEY
from mx_rag.evaluate.prompts import LANGUAGES, load_prompts
from mx_rag.llm.llm_parameter import LLMParameterConfig
from mx_rag.summary.summary import is_chinese
from mx_rag.utils.checks import check_bool, check_optional_str, check_str, fail
from mx_rag.utils.progress import Progress

__all__ = ["RAGEvaluator", "check_metrics"]

logger = logging.getLogger(__name__)

FIELDS = ("user_input", "response", "retrieved_contexts", "reference")
MAX_METRICS = 14
MAX_ROWS = 128
MAX_TEXT = 1_000_000
JUDGE_CONFIG = LLMParameterConfig(max_tokens=256, temperature=0.0, seed=0)


def check_metrics(metrics: Any) -> list[str]:
    if not isinstance(metrics, (list, tuple)) or not 0 < len(metrics) <= MAX_METRICS:
        raise fail("metrics", metrics, f"a list of 1 to {MAX_METRICS} metric names")
    for name in metrics:
        check_str("metrics item", name, 1, 50)
        if name not in METRICS:
            raise fail("metrics item", name, f"one of {sorted(METRICS)}")
    if len(set(metrics)) != len(metrics):
        raise fail("metrics", metrics, "a list without repeated names")
    return list(metrics)


def _check_texts(name: str, value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_ROWS:
        raise fail(f"dataset[{name!r}]", value, f"a list of at most {MAX_ROWS} strings")
    return [check_str(f"dataset[{name!r}] item", text, 1, MAX_TEXT) for text in value]


def _check_dataset(dataset: Any, metrics: list[str]) -> list[dict[str, Any]]:
    if not isinstance(dataset, dict) or not 0 < len(dataset) <= len(FIELDS):
        raise fail("dataset", dataset, f"a dict of 1 to 4 of the keys {list(FIELDS)}")
    unknown = sorted(set(dataset) - set(FIELDS))
    if unknown:
        raise fail("dataset", unknown, f"keys among {list(FIELDS)}")
    columns: dict[str, list[Any]] = {}
    for name, value in dataset.items():
        if name == "retrieved_contexts":
            if not isinstance(value, (list, tuple)) or not 0 < len(value) <= MAX_ROWS:
                raise fail("dataset['retrieved_contexts']", value, f"a list of 1 to {MAX_ROWS} lists of strings")
            columns[name] = [_check_texts("retrieved_contexts", inner) for inner in value]
        else:
            columns[name] = _check_texts(name, value)
    sizes = {name: len(column) for name, column in columns.items()}
    if len(set(sizes.values())) > 1:
        raise ParameterError(f"dataset lists must have one length, got {sizes}")
    for metric in metrics:
        missing = [field for field in REQUIRED[metric] if field not in columns]
        if missing:
            raise ParameterError(f"metric {metric!r} needs dataset keys {list(REQUIRED[metric])}; missing {missing}")
    rows = next(iter(sizes.values()))
    return [{name: column[i] for name, column in columns.items()} for i in range(rows)]


class RAGEvaluator:
    """Score question/answer/context rows with the metrics of RAGAS 0.1, using our own judge prompts.

    Args:
        llm: the judge: a ``Text2TextLLM`` (asked with temperature 0) or any LangChain LLM.
        embeddings: a LangChain ``Embeddings`` (``TextEmbedding``, ``TEIEmbedding``) for
            ``answer_relevancy``, ``answer_similarity`` and ``answer_correctness``. None loads
            the packaged ``TextEmbedding`` on first use (multilingual-e5-small for Chinese rows).

    Example:
        >>> from mx_rag.evaluate import RAGEvaluator
        >>> # evaluator = RAGEvaluator(llm=llm, embeddings=TextEmbedding())
        >>> # scores = evaluator.evaluate(["faithfulness", "answer_relevancy"], {
        >>> #     "user_input": ["Who proposed relativity?"], "response": ["Einstein"],
        >>> #     "retrieved_contexts": [["Albert Einstein proposed the theory of relativity."]]},
        >>> #     language="english")
        >>> # scores["faithfulness"] -> [1.0]
    """

    def __init__(self, llm: Any, embeddings: Embeddings | None = None) -> None:
        if not (callable(getattr(llm, "chat", None)) or callable(getattr(llm, "invoke", None))):
            raise fail("llm", llm, "a Text2TextLLM or a LangChain LLM")
        if embeddings is not None and not isinstance(embeddings, Embeddings):
            raise fail("embeddings", embeddings, "a LangChain Embeddings (TextEmbedding, TEIEmbedding)")
        self.llm = llm
        self.embeddings = embeddings
        self._default_embeddings: dict[str, Embeddings] = {}

    def evaluate(
        self,
        metrics: list[str],
        dataset: dict[str, Any],
        language: str | None = None,
        prompts_path: str | None = None,
        show_progress: bool = False,
    ) -> dict[str, list[float]]:
        """One score per row for each metric.

        Args:
            metrics: 1 to 14 distinct names among the twelve metrics (``answer_similarity``'s
                scores come back under ``semantic_similarity``).
            dataset: ``{"user_input", "response", "retrieved_contexts", "reference"}`` lists of one
                length (at most 128 rows; texts of 1 to 1,000,000 characters); the keys the
                metrics need.
            language: ``"english"`` or ``"chinese"`` prompts; None picks per row by its script.
            prompts_path: a folder with ``english.json``/``chinese.json`` prompt overrides.
            show_progress: a progress bar on stderr (one step per row).

        Returns:
            ``{metric: [score per row]}``; a score is NaN where the judge failed for that row
            (the error is logged).

        Raises:
            ParameterError: an argument is out of range.
        """
        metrics = check_metrics(metrics)
        rows = _check_dataset(dataset, metrics)
        if language is not None and language not in LANGUAGES:
            raise fail("language", language, f"None or one of {list(LANGUAGES)}")
        check_optional_str("prompts_path", prompts_path, 1, 255)
        check_bool("show_progress", show_progress)
        judges = {lang: Judge(self.llm, _LazyEmbeddings(self, lang), load_prompts(lang, prompts_path), JUDGE_CONFIG)
                  for lang in ([language] if language else LANGUAGES)}
        scores: dict[str, list[float]] = {RESULT_KEY.get(m, m): [] for m in metrics}
        progress = Progress(len(rows) if show_progress else 0, "evaluate")
        try:
            for row in rows:
                judge = judges[language or ("chinese" if is_chinese(_row_text(row)) else "english")]
                for metric in metrics:
                    scores[RESULT_KEY.get(metric, metric)].append(_score(metric, row, judge))
                progress.update()
        finally:
            progress.close()
        return scores

    def embeddings_for(self, language: str) -> Embeddings:
        if self.embeddings is not None:
            return self.embeddings
        if language not in self._default_embeddings:
            from mx_rag.embedding.local import TextEmbedding

            self._default_embeddings[language] = (TextEmbedding("multilingual-e5-small") if language == "chinese"
                                                  else TextEmbedding())
        return self._default_embeddings[language]


class _LazyEmbeddings:
    """The evaluator's embeddings for one language, loaded on the first call (most metrics need none)."""

    def __init__(self, evaluator: RAGEvaluator, language: str) -> None:
        self._evaluator, self._language = evaluator, language

    def embed_query(self, text: str) -> list[float]:
        return self._evaluator.embeddings_for(self._language).embed_query(text)


def _row_text(row: dict[str, Any]) -> list[str]:
    return [str(row.get("user_input", "")), str(row.get("response", "")), str(row.get("reference", ""))]


def _score(metric: str, row: dict[str, Any], judge: Judge) -> float:
    try:
        return float(METRICS[metric](row, judge))
    except (MxRagError, ValueError) as exc:
        logger.warning("%s: a row could not be scored: %s", metric, exc)
        return NAN
