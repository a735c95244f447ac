# SPDX-License-Identifier: Apache-2.0
"""``EvalDataGenerator``: question/passage pairs for evaluating an embedding model (to be reviewed by hand)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mx_rag.llm.protocol import ChatLLM
from mx_rag.tools.finetune.generator.common import BaseGenerator, check_docs, check_prompt
from mx_rag.tools.finetune.prompts import GENERATE_QD_PROMPT
from mx_rag.utils.checks import check_int

__all__ = ["EvalDataGenerator"]

logger = logging.getLogger(__name__)

EVAL_FILE = "evaluate_data.jsonl"


class EvalDataGenerator(BaseGenerator):
    """Writes ``evaluate_data.jsonl`` (``{"query", "corpus"}`` per line): LLM questions per passage.

    The pairs are a first draft: keep the ones that use the domain's own vocabulary before
    measuring a model with them (``mx_rag.tools.finetune.evaluate_embedding``).

    Args:
        llm: writes the questions (a ``Text2TextLLM`` or any object with ``chat``).
        dataset_path: an existing directory for the file.
        encrypt_fn / decrypt_fn: optional ``str -> str`` applied to the texts written / read.
    """

    def __init__(self, llm: ChatLLM, dataset_path: str, encrypt_fn: Callable[[str], str] | None = None,
                 decrypt_fn: Callable[[str], str] | None = None) -> None:
        super().__init__(llm, dataset_path, encrypt_fn, decrypt_fn)

    def generate_evaluate_data(self, split_doc_list: list[str], generate_qd_prompt: str = GENERATE_QD_PROMPT,
                               question_number: int = 3, batch_size: int = 8) -> None:
        """Ask ``question_number`` questions (1 to 20) per passage; write ``evaluate_data.jsonl``.

        Args:
            split_doc_list: the passages, 1 to 1,000,000 strings of 1 to 128 Mi characters.
            generate_qd_prompt: the prompt, with ``{question_number}`` and ``{doc}``.
            question_number: questions per passage, 1 to 20 (default 3).
            batch_size: LLM calls in flight at once, 1 to 1024 (default 8).

        An existing ``evaluate_data.jsonl`` is replaced.
        """
        docs = check_docs("split_doc_list", split_doc_list)
        check_prompt("generate_qd_prompt", generate_qd_prompt, "question_number", "doc")
        check_int("question_number", question_number, 1, 20)
        pairs = self._questions(docs, generate_qd_prompt, question_number, batch_size)
        path = self._write_pairs(EVAL_FILE, pairs)
        logger.info("%d evaluation pairs written to %s", len(pairs), path)
