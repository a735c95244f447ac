# SPDX-License-Identifier: Apache-2.0
"""What both data generators share: the output directory, encryption hooks, document splitting,
concurrent question generation and the JSON-lines files."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mx_rag.errors import ParameterError, RemoteError
from mx_rag.llm.protocol import ChatLLM, chat_llm
from mx_rag.utils.checks import apply_text_fn, check_int, check_str, fail
from mx_rag.utils.common import MAX_PROMPT_LENGTH
from mx_rag.utils.file_check import check_dir

__all__ = ["MAX_BATCH", "MAX_DOCS", "MAX_DOC_LEN", "BaseGenerator", "check_docs", "parse_questions"]

logger = logging.getLogger(__name__)

MAX_DOCS = 1_000_000
MAX_DOC_LEN = 128 * 1024 * 1024
MAX_BATCH = 1024
MAX_FILES = 10_000

# "问题1：...", "问题 2: ...", "1. ...", "2、...", "Question 3: ...", "Q4) ..."
_NUMBERED = re.compile(r"^\s*(?:问题|question|q)?\s*[(（]?\d{1,2}\s*[)）.、:：]\s*(?P<q>\S.*)$", re.IGNORECASE)


def parse_questions(answer: str, limit: int) -> list[str]:
    """The numbered questions of an LLM answer, in order, at most ``limit``, duplicates removed.

    >>> parse_questions("问题1：什么是RAG？\\n问题2：RAG怎么用？\\n好的", 3)
    ['什么是RAG？', 'RAG怎么用？']
    """
    found: list[str] = []
    for line in answer.splitlines():
        match = _NUMBERED.match(line)
        if match:
            question = match.group("q").strip().strip("*").strip()
            if question and question not in found:
                found.append(question)
    return found[:limit]


def check_docs(name: str, docs: Any) -> list[str]:
    if not isinstance(docs, list) or not 1 <= len(docs) <= MAX_DOCS:
        raise fail(name, docs, f"a list of 1 to {MAX_DOCS} strings")
    for i, doc in enumerate(docs):
        check_str(f"{name}[{i}]", doc, 1, MAX_DOC_LEN)
    return docs


def check_prompt(name: str, prompt: Any, *fields: str) -> str:
    check_str(name, prompt, 1, MAX_PROMPT_LENGTH)
    for placeholder in fields:
        if "{" + placeholder + "}" not in prompt:
            raise ParameterError(f"{name} must contain the placeholder {{{placeholder}}}")
    return str(prompt)


class BaseGenerator:
    """The LLM, the output directory and the optional encryption of what is written there.

    Args:
        llm: a ``Text2TextLLM`` (or any object with ``chat``).
        dataset_path: an existing directory for the generated files (1 to 1024 characters,
            no ``..``; symlinks are resolved).
        encrypt_fn / decrypt_fn: optional ``str -> str`` applied to each text written / read.
    """

    def __init__(self, llm: ChatLLM, dataset_path: str, encrypt_fn: Callable[[str], str] | None = None,
                 decrypt_fn: Callable[[str], str] | None = None) -> None:
        self.llm = chat_llm("llm", llm, stream=False)
        self.dataset_path = check_dir("dataset_path", dataset_path)
        for name, fn in (("encrypt_fn", encrypt_fn), ("decrypt_fn", decrypt_fn)):
            if fn is not None and not callable(fn):
                raise fail(name, fn, "None or a function str -> str")
        self._encrypt_fn = encrypt_fn
        self._decrypt_fn = decrypt_fn

    # -- documents ------------------------------------------------------------------------------

    def generate_origin_document(self, document_path: str, loader_mng: Any,
                                 filter_func: Callable[[list[str]], list[str]] | None = None) -> list[str]:
        """The chunk texts of every file under ``document_path`` that ``loader_mng`` can load.

        Files are read in sorted order (subdirectories included, at most 10000 files); files with
        no registered loader are skipped. ``filter_func`` gets the list of texts and returns the
        ones to keep (data cleaning).
        """
        from mx_rag.document import LoaderMng

        root = check_dir("document_path", document_path)
        if not isinstance(loader_mng, LoaderMng):
            raise fail("loader_mng", loader_mng, "a LoaderMng")
        if filter_func is not None and not callable(filter_func):
            raise fail("filter_func", filter_func, "None or a function list[str] -> list[str]")
        files = sorted(p for p in root.rglob("*") if p.is_file())
        if len(files) > MAX_FILES:
            raise ParameterError(f"document_path {str(root)!r} holds {len(files)} files, more than {MAX_FILES}")
        texts: list[str] = []
        for path in files:
            try:
                loader_mng.get_loader(path.suffix)
                loader_mng.get_splitter(path.suffix)
            except KeyError:
                logger.info("skipping %s: no loader or splitter for %r", path, path.suffix)
                continue
            texts.extend(doc.page_content for doc in loader_mng.load_and_split(str(path)) if doc.page_content.strip())
        if filter_func is not None:
            texts = filter_func(texts)
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise fail("filter_func's result", texts, "a list of str")
        logger.info("%d chunks from %d files under %s", len(texts), len(files), root)
        return texts

    # -- LLM ------------------------------------------------------------------------------------

    def _chat(self, prompt: str) -> str:
        return self.llm.chat(prompt)

    def _map(self, func: Callable[[Any], Any], items: Sequence[Any], batch_size: int) -> Iterator[Any]:
        """``func`` over ``items`` with ``batch_size`` calls in flight, results in order; a failed
        call (an LLM error) yields None and is logged."""
        check_int("batch_size", batch_size, 1, MAX_BATCH)

        def safe(item: Any) -> Any:
            try:
                return func(item)
            except RemoteError as exc:
                logger.warning("LLM call failed, item skipped: %s", exc)
                return None

        with ThreadPoolExecutor(max_workers=batch_size, thread_name_prefix="mx_rag-finetune") as pool:
            yield from pool.map(safe, items)

    def _questions(self, docs: list[str], prompt: str, number: int, batch_size: int) -> list[tuple[str, str]]:
        """``(question, doc)`` pairs: up to ``number`` questions per doc."""
        pairs: list[tuple[str, str]] = []
        answers = self._map(lambda doc: self._chat(prompt.format(question_number=number, doc=doc)), docs, batch_size)
        for doc, answer in zip(docs, answers, strict=True):
            if answer:
                pairs.extend((q, doc) for q in parse_questions(answer, number))
        return pairs

    # -- files ----------------------------------------------------------------------------------

    def _file(self, name: str) -> Path:
        return self.dataset_path / name

    def _write_pairs(self, name: str, pairs: Sequence[tuple[str, str]]) -> Path:
        """Write ``{"query", "corpus"}`` lines (encrypted when ``encrypt_fn`` is set) atomically."""
        path = self._file(name)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for query, doc in pairs:
                record = {"query": self._encrypt(query), "corpus": self._encrypt(doc)}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        return path

    def _read_pairs(self, name: str) -> list[tuple[str, str]]:
        pairs = []
        with open(self._file(name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    pairs.append((self._decrypt(record["query"]), self._decrypt(record["corpus"])))
        return pairs

    def _encrypt(self, text: str) -> str:
        return apply_text_fn("encrypt_fn", self._encrypt_fn, text, MAX_DOC_LEN)

    def _decrypt(self, text: str) -> str:
        return apply_text_fn("decrypt_fn", self._decrypt_fn, text, MAX_DOC_LEN)

