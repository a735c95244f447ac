# SPDX-License-Identifier: Apache-2.0
"""Tokenisation for the full-text index: jieba for Chinese, lower-cased words for the rest.

The database's own tokenisers cannot segment Chinese (a run of Chinese characters has no spaces),
so chunk text is tokenised here and the database indexes the space-joined tokens. Queries go
through the same function, so both sides agree.

>>> index_tokens("SQLite FTS5 supports bm25()")
'sqlite fts5 supports bm25'
>>> query_tokens("How does the BM25 ranking work?")
['bm25', 'ranking', 'work']

jieba (a dependency of mxrag) is imported only when the first Chinese text arrives, once per
process, and its dictionary is not loaded whole at first: the word frequencies its segmenter looks
up are read one by one from an on-disk SQLite copy of its dictionary (built once, about 2 s, in the
user's cache directory next to jieba's own cache), so a corpus or a question with a few Chinese
words costs milliseconds instead of loading the whole dictionary (about 0.8 s and 75 MB, almost all
of it one ``marshal.load`` of jieba's 9 MB cache that holds the GIL throughout). Once
``LAZY_LOOKUPS`` distinct words have been looked up, Chinese text is plentiful and the whole
dictionary is loaded as jieba loads it. Both read the same frequencies, so the tokens are the same.
An application that knows Chinese is coming can call :func:`warm_up` at start-up, off its request
path. A private ``jieba.Tokenizer`` is used, so the global ``jieba``
settings of the application are left alone, its model cache lives in the user's cache directory
rather than a shared ``/tmp`` file, and the loading messages jieba logs are kept quiet.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
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

LAZY_LOOKUPS = 20_000  # distinct words read from the on-disk table before the whole dictionary is loaded
LOOKUPS_PER_CHAR = 4  # jieba's lookups per Han character segmented, a generous estimate
_FREQ_SCHEMA = 1  # part of the table's file name: bump it when the table changes

_jieba_lock = threading.Lock()
_jieba: Any = None  # the private jieba.Tokenizer
_disk: _DiskFreq | None = None  # its frequencies while they are read from disk
_load_seconds: float | None = None  # time spent loading jieba in this process (None: not loaded)


class _DiskFreq:
    """jieba's ``Tokenizer.FREQ`` (word -> count, 0 for a prefix of a word only) read word by word
    from its SQLite copy; each answer is remembered. Only the lookups jieba's segmenter makes
    (``in``, ``[]``, ``get``) are supported."""

    def __init__(self, path: Path) -> None:
        self._uri = f"{path.resolve().as_uri()}?mode=ro"
        self._lock = threading.Lock()
        self._known: dict[str, int | None] = {}
        self._connect()
        self.total = int(self._conn.execute("SELECT total FROM meta").fetchone()[0])

    def _connect(self) -> None:
        self._pid = os.getpid()  # a forked child opens its own connection (SQLite's rule)
        self._conn = sqlite3.connect(self._uri, uri=True, check_same_thread=False)

    @property
    def looked_up(self) -> int:
        return len(self._known)

    def _count(self, word: str) -> int | None:
        try:
            return self._known[word]
        except KeyError:
            pass
        with self._lock:
            if self._pid != os.getpid():
                self._connect()
            row = self._conn.execute("SELECT n FROM freq WHERE word = ?", (word,)).fetchone()
        self._known[word] = found = None if row is None else int(row[0])
        return found

    def get(self, word: str, default: Any = None) -> Any:
        found = self._count(word)
        return default if found is None else found

    def __contains__(self, word: str) -> bool:
        return self._count(word) is not None

    def __getitem__(self, word: str) -> int:
        found = self._count(word)
        if found is None:
            raise KeyError(word)
        return found


def _cache_dir() -> tuple[str, bool]:
    """A private directory for jieba's caches, and whether it lasts (the user's cache dir, else a
    fresh temp dir)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mxrag" / "jieba"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return str(base), True
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="mxrag-jieba-"), False


def _freq_path(jieba: Any, cache: str) -> Path | None:
    """The table's file for the installed jieba dictionary (None: no dictionary file to key it on)."""
    try:
        stat = (Path(jieba.__file__).parent / "dict.txt").stat()
    except OSError:
        return None
    key = f"{_FREQ_SCHEMA} {jieba.__version__} {stat.st_size} {stat.st_mtime_ns}"
    return Path(cache) / f"freq-{hashlib.sha256(key.encode()).hexdigest()[:16]}.sqlite3"


def _write_freq(path: Path, freq: dict[str, int], total: int) -> None:
    """Write jieba's frequencies to ``path`` atomically (concurrent writers write the same table)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".freq-", suffix=".tmp")
    os.close(fd)
    try:
        with contextlib.closing(sqlite3.connect(tmp)) as conn:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("CREATE TABLE freq (word TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
            conn.execute("CREATE TABLE meta (total INTEGER NOT NULL)")
            conn.executemany("INSERT INTO freq VALUES (?, ?)", sorted(freq.items()))
            conn.execute("INSERT INTO meta VALUES (?)", (total,))
            conn.commit()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _load_whole(segmenter: Any) -> None:
    """jieba's own loading of the whole dictionary (from its cache), without its console messages."""
    jieba_logger = logging.getLogger("jieba")
    level = jieba_logger.level
    jieba_logger.setLevel(logging.CRITICAL)  # "Building prefix dict ..." etc.
    try:
        segmenter.initialize()
    finally:
        jieba_logger.setLevel(level)


def _start(lazy: bool) -> None:
    """Set up ``_jieba``: reading the on-disk table when ``lazy`` and it can be had, else whole
    (the first lazy start on a machine loads it whole and writes the table for the next ones)."""
    global _jieba, _disk, _load_seconds
    start = time.perf_counter()
    with extra_import("all", "jieba"):
        import jieba
    segmenter = jieba.Tokenizer()
    segmenter.tmp_dir, lasting = _cache_dir()
    path = _freq_path(jieba, segmenter.tmp_dir) if lazy and lasting else None
    disk = None
    if path is not None and path.exists():
        try:
            disk = _DiskFreq(path)
        except (OSError, sqlite3.Error, TypeError, ValueError) as exc:  # damaged: load whole, rewrite
            logger.debug("cannot read %s (%s): loading jieba's dictionary whole", path, exc)
            path.unlink(missing_ok=True)
    if disk is not None:
        segmenter.FREQ, segmenter.total, segmenter.initialized = disk, disk.total, True
    else:
        _load_whole(segmenter)
        if path is not None and not path.exists():
            try:
                _write_freq(path, segmenter.FREQ, segmenter.total)
            except (OSError, sqlite3.Error) as exc:
                logger.debug("cannot write %s: %s", path, exc)
    seconds = time.perf_counter() - start
    _load_seconds = (_load_seconds or 0.0) + seconds
    logger.debug("jieba ready in %.2f s (%s; cache in %s)", seconds,
                 "dictionary read word by word" if disk else "whole dictionary", segmenter.tmp_dir)
    _jieba, _disk = segmenter, disk


def _segmenter(chars: int = 0) -> Any:
    """The shared private jieba tokenizer, about to segment ``chars`` Han characters: reading its
    dictionary from disk, until ``LAZY_LOOKUPS`` distinct words have been (or would be) looked up."""
    expected = LOOKUPS_PER_CHAR * chars
    if _jieba is not None and (_disk is None or _disk.looked_up + expected < LAZY_LOOKUPS):
        return _jieba
    with _jieba_lock:
        if _jieba is None:
            _start(lazy=expected < LAZY_LOOKUPS)
        elif _disk is not None and _disk.looked_up + expected >= LAZY_LOOKUPS:
            _start(lazy=False)  # plenty of Chinese: the whole dictionary (threads on the old one finish there)
    return _jieba


def warm_up() -> None:
    """Set jieba up now (once per process) rather than when the first Chinese text is indexed."""
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
                tokens.extend(t for t in _segmenter(len(part)).lcut_for_search(part) if t.strip())
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
