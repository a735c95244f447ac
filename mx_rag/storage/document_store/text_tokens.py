# SPDX-License-Identifier: Apache-2.0
"""Tokenisation for the full-text index: jieba for Chinese, lower-cased words for the rest.

The database's own tokenisers cannot segment Chinese (a run of Chinese characters has no spaces),
so chunk text is tokenised here and the database indexes the space-joined tokens. Queries go
through the same function, so both sides agree.

>>> index_tokens("SQLite FTS5 supports bm25()")
'sqlite fts5 supports bm25'
>>> query_tokens("How does the BM25 ranking work?")
['bm25', 'ranking', 'work']

jieba (a dependency of mxrag) is imported and its dictionary loaded only when the
first Chinese text arrives, once per process: English-only work never pays for it (about 0.8 s
and 75 MB on an idle CPU, almost all of it one ``marshal.load`` of jieba's 9 MB cache that holds
the GIL throughout, so loading it in a background thread would stall the other threads just the
same). An application that knows Chinese is coming can call :func:`warm_up` at start-up, off its
request path. A private ``jieba.Tokenizer`` is used, so the global ``jieba``
settings of the application are left alone, its model cache lives in the user's cache directory
rather than a shared ``/tmp`` file, and the loading messages jieba logs are kept quiet.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mx_rag.utils.lazy import extra_import
from mx_rag.utils.text import HAN as _HAN
from mx_rag.utils.text import has_han

__all__ = ["FTS5_TOKENIZER", "fts5_match", "has_han", "index_tokens", "query_tokens", "warm_up"]

logger = logging.getLogger(__name__)

MAX_INDEXED_CHARS = 128 * 1024  # tokens text kept per chunk (PostgreSQL caps a tsvector at 1 MiB)
MAX_TOKEN_CHARS = 64            # longer "words" (base64, hashes) are not indexed
MAX_QUERY_TOKENS = 256

_WORD = re.compile(r"[^\W_]+")
_HAN_RUN = re.compile(f"[{_HAN}]+")
_HAN_SPLIT = re.compile(f"([{_HAN}]+)")

# Dropped from queries only (the index keeps every word), unless the query has nothing else.
ENGLISH_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in",
    "is", "it", "its", "me", "my", "of", "on", "or", "our", "that", "the", "their", "them", "then", "there",
    "these", "this", "those", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why",
    "will", "with", "you", "your",
})
CHINESE_STOPWORDS = frozenset({
    "的", "了", "是", "在", "和", "与", "及", "或", "也", "就", "都", "而", "把", "被", "对", "从",
    "之", "以", "为", "我", "你", "他", "她", "它", "们", "这", "那", "有", "中", "吗", "呢", "吧",
    "啊", "什么", "怎么", "怎样", "如何", "哪些", "哪个", "一个", "我们", "你们", "他们", "这个", "那个", "可以",
})
STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS

_jieba_lock = threading.Lock()
_jieba: Any = None
_load_seconds: float | None = None  # how long loading jieba took in this process (None: not loaded)


def _cache_dir() -> str:
    """A private directory for jieba's model cache (the user's cache dir, else a fresh temp dir)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mxrag" / "jieba"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return str(base)
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="mxrag-jieba-")


def _segmenter() -> Any:
    """The shared private jieba tokenizer, loaded on first use without console output."""
    global _jieba, _load_seconds
    if _jieba is not None:
        return _jieba
    with _jieba_lock:
        if _jieba is None:
            start = time.perf_counter()
            with extra_import("all", "jieba"):
                import jieba
            segmenter = jieba.Tokenizer()
            segmenter.tmp_dir = _cache_dir()
            jieba_logger = logging.getLogger("jieba")
            level = jieba_logger.level
            jieba_logger.setLevel(logging.CRITICAL)  # "Building prefix dict ..." etc.
            try:
                segmenter.initialize()
            finally:
                jieba_logger.setLevel(level)
            _load_seconds = time.perf_counter() - start
            logger.debug("jieba dictionary loaded in %.2f s (cache in %s)", _load_seconds, segmenter.tmp_dir)
            _jieba = segmenter
    return _jieba


def warm_up() -> None:
    """Load jieba now (once per process) rather than when the first Chinese text is indexed."""
    _segmenter()


def tokenize(text: str) -> list[str]:
    """Every token of ``text`` in order: jieba search-mode words for Chinese, words elsewhere.

    A word is a run of letters and digits (punctuation, ``_`` and emoji separate words),
    lower-cased; words longer than 64 characters are dropped.

    >>> tokenize("Debian 12 的软件包管理")
    ['debian', '12', '的', '软件', '软件包', '管理']
    """
    tokens: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group()
        if not _HAN_RUN.search(word):
            if len(word) <= MAX_TOKEN_CHARS:
                tokens.append(word.lower())
            continue
        for part in _HAN_SPLIT.split(word):
            if not part:
                continue
            if _HAN_RUN.fullmatch(part):
                tokens.extend(t for t in _segmenter().lcut_for_search(part) if t.strip())
            elif len(part) <= MAX_TOKEN_CHARS:
                tokens.append(part.lower())
    return tokens


def index_tokens(text: str) -> str:
    """The space-joined tokens of a chunk, as indexed (at most 128 Ki characters)."""
    joined = " ".join(tokenize(text))
    if len(joined) > MAX_INDEXED_CHARS:
        cut = joined.rfind(" ", 0, MAX_INDEXED_CHARS + 1)
        joined = joined[: cut if cut > 0 else MAX_INDEXED_CHARS]
    return joined


def query_tokens(query: str) -> list[str]:
    """The distinct tokens of a query, in order, without stop words (kept if nothing else is left).

    At most 256 tokens. An empty list means the query has no searchable word.
    """
    seen = dict.fromkeys(tokenize(query))
    kept = [t for t in seen if t not in STOPWORDS] or list(seen)
    return kept[:MAX_QUERY_TOKENS]


FTS5_TOKENIZER = "unicode61 remove_diacritics 2"  # over index_tokens' output: words already split


def fts5_match(tokens: Sequence[str]) -> str:
    """An FTS5 MATCH expression: any of ``tokens``, each quoted so that query syntax in it is inert."""
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)
