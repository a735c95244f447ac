# SPDX-License-Identifier: Apache-2.0
"""``TrainDataGenerator``: fine-tuning pairs from documents (generate, select, score, rewrite)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mx_rag.llm.protocol import ChatLLM
from mx_rag.reranker.reranker import Reranker
from mx_rag.tools.finetune.filters import feature_pairs, parse_score
from mx_rag.tools.finetune.generator.common import BaseGenerator, check_docs, check_prompt, parse_questions
from mx_rag.tools.finetune.prompts import GENERATE_QD_PROMPT, REWRITE_QUERY_PROMPT, SCORING_QD_PROMPT
from mx_rag.utils.checks import check_bool, check_instance, check_int, fail

__all__ = ["DataProcessConfig", "TrainDataGenerator"]

logger = logging.getLogger(__name__)

TRAIN_FILE = "train_data.jsonl"
GENERATED_FILE = "generated_qd.jsonl"  # the LLM's raw pairs, kept so that a rerun skips generation


@dataclass
class DataProcessConfig:
    """How ``TrainDataGenerator.generate_train_data`` builds the pairs.

    Attributes:
        generate_qd_prompt: the question prompt, with ``{question_number}`` and ``{doc}`` (1 to 1 Mi characters).
        llm_preferred_prompt: the scoring prompt, with ``{query}`` and ``{doc}``.
        question_number: questions asked per passage, 1 to 20 (default 3).
        featured: keep the best pairs by fused BM25 and reranker ranks (default True).
        featured_percentage: the share kept by that step, in (0, 1) (default 0.8).
        preferred: keep the pairs the LLM scores at least ``llm_threshold_score`` (default True).
        llm_threshold_score: that threshold, in (0, 1) (default 0.8).
        rewrite: add LLM rewrites of each question, with the same passage (default True).
        query_rewrite_number: rewrites per question, 1 to 20 (default 2).
    """

    generate_qd_prompt: str = GENERATE_QD_PROMPT
    llm_preferred_prompt: str = SCORING_QD_PROMPT
    question_number: int = 3
    featured: bool = True
    featured_percentage: float = 0.8
    preferred: bool = True
    llm_threshold_score: float = 0.8
    rewrite: bool = True
    query_rewrite_number: int = 2

    def __post_init__(self) -> None:
        check_prompt("generate_qd_prompt", self.generate_qd_prompt, "question_number", "doc")
        check_prompt("llm_preferred_prompt", self.llm_preferred_prompt, "query", "doc")
        check_int("question_number", self.question_number, 1, 20)
        check_bool("featured", self.featured)
        _check_open_unit("featured_percentage", self.featured_percentage)
        check_bool("preferred", self.preferred)
        _check_open_unit("llm_threshold_score", self.llm_threshold_score)
        check_bool("rewrite", self.rewrite)
        check_int("query_rewrite_number", self.query_rewrite_number, 1, 20)


def _check_open_unit(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise fail(name, value, "a number in (0.0, 1.0)")


class TrainDataGenerator(BaseGenerator):
    """Writes ``train_data.jsonl`` (``{"query", "corpus"}`` per line) for fine-tuning an embedding model.

    Args:
        llm: writes, scores and rewrites the questions (a ``Text2TextLLM`` or any object with ``chat``).
        dataset_path: an existing directory for the files.
        reranker: any ``Reranker``, used to select pairs.
        encrypt_fn / decrypt_fn: optional ``str -> str`` applied to the texts written / read.

    Example:
        >>> gen = TrainDataGenerator(llm, "/data/ft", LocalReranker("/models/bge-reranker-base"))  # doctest: +SKIP
        >>> docs = gen.generate_origin_document("/data/docs", loader_mng)                          # doctest: +SKIP
        >>> gen.generate_train_data(docs, DataProcessConfig(question_number=2))                    # doctest: +SKIP
    """

    def __init__(self, llm: ChatLLM, dataset_path: str, reranker: Reranker,
                 encrypt_fn: Callable[[str], str] | None = None,
                 decrypt_fn: Callable[[str], str] | None = None) -> None:
        super().__init__(llm, dataset_path, encrypt_fn, decrypt_fn)
        self.reranker = check_instance("reranker", reranker, Reranker)

    def generate_train_data(self, split_doc_list: list[str], data_process_config: DataProcessConfig,
                            batch_size: int = 8) -> None:
        """Generate, select and extend the pairs; write ``train_data.jsonl`` in ``dataset_path``.

        Args:
            split_doc_list: the passages, 1 to 1,000,000 strings of 1 to 128 Mi characters.
            data_process_config: the steps and their settings.
            batch_size: LLM calls in flight at once, 1 to 1024 (default 8).

        Nothing is done when ``train_data.jsonl`` exists already (delete it to start over). The
        LLM's raw pairs are kept in ``generated_qd.jsonl``, so a rerun after a failure in a later
        step does not ask for them again.
        """
        docs = check_docs("split_doc_list", split_doc_list)
        config = check_instance("data_process_config", data_process_config, DataProcessConfig)
        check_int("batch_size", batch_size, 1, 1024)
        if self._file(TRAIN_FILE).exists():
            logger.info("%s exists: training data already generated", self._file(TRAIN_FILE))
            return
        if self._file(GENERATED_FILE).exists():
            pairs = self._read_pairs(GENERATED_FILE)
        else:
            pairs = self._questions(docs, config.generate_qd_prompt, config.question_number, batch_size)
            self._write_pairs(GENERATED_FILE, pairs)
        logger.info("%d generated pairs", len(pairs))
        if config.featured:
            pairs = feature_pairs(pairs, self.reranker, config.featured_percentage)
            logger.info("%d pairs after BM25 + reranker selection", len(pairs))
        if config.preferred:
            pairs = self._prefer(pairs, config.llm_preferred_prompt, config.llm_threshold_score, batch_size)
            logger.info("%d pairs after LLM scoring", len(pairs))
        if config.rewrite:
            pairs = pairs + self._rewrite(pairs, config.query_rewrite_number, batch_size)
            logger.info("%d pairs with rewrites", len(pairs))
        self._write_pairs(TRAIN_FILE, pairs)

    def _prefer(self, pairs: list[tuple[str, str]], prompt: str, threshold: float,
                batch_size: int) -> list[tuple[str, str]]:
        answers = self._map(lambda p: self._chat(prompt.format(query=p[0], doc=p[1])), pairs, batch_size)
        kept = []
        for pair, answer in zip(pairs, answers, strict=True):
            score = parse_score(answer) if answer else None
            if score is not None and score >= threshold:
                kept.append(pair)
        return kept

    def _rewrite(self, pairs: list[tuple[str, str]], number: int, batch_size: int) -> list[tuple[str, str]]:
        answers = self._map(lambda p: self._chat(REWRITE_QUERY_PROMPT.format(query=p[0], number=number)),
                            pairs, batch_size)
        extra = []
        for (query, doc), answer in zip(pairs, answers, strict=True):
            for rewrite in parse_questions(answer or "", number):
                if rewrite != query:
                    extra.append((rewrite, doc))
        return extra
