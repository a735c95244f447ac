# SPDX-License-Identifier: Apache-2.0
"""``KeywordIndex``: BM25 keyword search over the graph's chunk texts (the keyword ranking that
``mode="mix"`` fuses with the graph and dense ones).

An in-memory SQLite FTS5 table with one row per chunk (rowid ``chunk_number(chunk id)``) holding
the chunk's tokens as the document stores index them (``mx_rag.storage.document_store.text_tokens``:
lower-cased words, jieba words for Chinese), ranked by BM25 as ``SQLiteDocstore.full_text_search``
ranks. ``GraphRAGPipeline`` fills it from the chunk registry when a retriever first needs it and
keeps it in step with every build and deletion after that (``sync``); nothing is written to disk,
so an encrypted registry's texts stay in memory. Where Python's SQLite lacks FTS5, ``search``
finds nothing (``available`` is False) and ``mix`` fuses the graph and dense rankings only.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.storage.document_store.text_tokens import FTS5_TOKENIZER, fts5_match, index_tokens, query_tokens

__all__ = ["KeywordIndex"]

logger = logging.getLogger(__name__)


class KeywordIndex:
    """Chunk tokens in an in-memory FTS5 table. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._numbers: set[int] = set()
        try:
            self._db.execute(f"CREATE VIRTUAL TABLE chunks USING fts5(tokens, tokenize = '{FTS5_TOKENIZER}')")
            self.available = True
        except sqlite3.OperationalError as exc:
            logger.warning("graph keyword search is unavailable (%s): mode 'mix' fuses graph and dense only", exc)
            self.available = False

    def sync(self, registry: ChunkRegistry) -> None:
        """Index the registry's chunks that are not indexed yet; drop the rows of removed ones."""
        numbers = registry.chunk_numbers()
        with self._lock:
            if not self.available:
                return
            stale = sorted(self._numbers - numbers.keys())
            missing = sorted(numbers.keys() - self._numbers)
            records = registry.chunks(numbers[n] for n in missing)
            rows = [(n, index_tokens(records[numbers[n]].text)) for n in missing if numbers[n] in records]
            with self._db:
                self._db.executemany("DELETE FROM chunks WHERE rowid = ?", [(n,) for n in stale])
                self._db.executemany("INSERT INTO chunks (rowid, tokens) VALUES (?, ?)", rows)
            self._numbers.difference_update(stale)
            self._numbers.update(n for n, _ in rows)

    def search(self, query: str, top_k: int) -> list[int]:
        """The ``chunk_number``s of the ``top_k`` chunks that best match ``query``'s words (any
        of them, stop words left out), best first."""
        tokens = query_tokens(query)
        if not tokens or not self.available or top_k < 1:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid FROM chunks WHERE chunks MATCH ? ORDER BY bm25(chunks), rowid LIMIT ?",
                (fts5_match(tokens), top_k),
            ).fetchall()
        return [int(row[0]) for row in rows]
