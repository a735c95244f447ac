# SPDX-License-Identifier: Apache-2.0
"""The full-text index of a chunk table, one class per database.

Both index the output of :func:`text_tokens.index_tokens` (jieba for Chinese, lower-cased words
otherwise) and search with an OR of the query's tokens, so the same chunk ranks first on either
database:

* SQLite: an FTS5 table ``<table>_fts(tokens)`` whose rowid is the chunk id, ranked by BM25
  (score = ``-bm25()``, higher is better). FTS5 rows are written next to the chunk rows, in the
  same transaction. ``bm25()`` runs once for every chunk that holds a query word (about 2 µs a
  row), so a query whose words are in more than ``ROW_BUDGET`` chunks is pruned: see
  :meth:`Fts5Index.search`.
* PostgreSQL: a ``search_vector tsvector`` column (``to_tsvector('simple', tokens)``) on the
  chunk table with a GIN index, ranked by the number of distinct query words matched, then by
  ``ts_rank`` (word frequency, normalised by length).

Query text only ever reaches the database as a bound parameter; FTS5 and tsquery syntax in it is
neutralised by quoting each token.
"""

from __future__ import annotations

import functools
import logging
import math
import operator
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    Select,
    Table,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    select,
)
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.elements import ColumnElement

from mx_rag.storage.document_store.text_tokens import FTS5_TOKENIZER, fts5_match, index_tokens

logger = logging.getLogger(__name__)

IN_LIST_LIMIT = 10_000  # ids per IN (...) list
BACKFILL_BATCH = 1_000
ROW_BUDGET = 5_000  # a query whose words are in at most this many chunks in all is ranked exactly
PAIR_BUDGET = 300_000  # above it, chunks holding two of the rarest words (in this many chunks in all) ...
PAIRED_WORDS = 8  # ... at most this many words
RESCORED = 200  # candidates of a pruned query given their full BM25 score (at least top_k)
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's bm25() defaults
_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")


class ScoredRow(NamedTuple):
    """A chunk row with its full-text score (what ``FullTextIndex.search`` returns)."""

    chunk_id: int
    document_id: int
    document_name: str
    chunk_content: str
    chunk_metadata: Any
    score: float


def scored_rows(
    conn: Connection, table: Table, columns: Sequence[Column[Any]], scores: dict[int, float]
) -> list[ScoredRow]:
    """The rows (``columns``: ``ROW_COLUMNS``) of the chunks in ``scores`` with their scores, best first."""
    rows = [
        ScoredRow(*row, score=scores[row.chunk_id])  # type: ignore[misc]  # columns: ROW_COLUMNS
        for batch in id_batches(list(scores))
        for row in conn.execute(select(*columns).where(table.c.chunk_id.in_(batch)))
    ]
    rows.sort(key=lambda row: (-row.score, row.chunk_id))
    return rows


def id_batches(ids: Sequence[int]) -> list[Sequence[int]]:
    """``ids`` cut into IN lists of at most 10,000 (SQLite binds at most 32,766 parameters)."""
    return [ids[i : i + IN_LIST_LIMIT] for i in range(0, len(ids), IN_LIST_LIMIT)]


class FullTextIndex:
    """What a chunk store needs from a full-text index; the defaults do nothing."""

    #: False when the database lacks the feature (SQLite built without FTS5).
    available = True
    #: True when insert/update statements take a ``tokens`` bound parameter.
    binds_tokens = False
    #: False when the database tokenises the chunk text itself (openGauss's BM25 index).
    takes_tokens = True

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name

    def schema(self) -> list[Column[Any] | Index]:
        """Extra columns and indexes of the chunk table."""
        return []

    def setup(self, conn: Connection, table: Table, backfill: bool) -> None:
        """Create what the index needs beside the chunk table (in the creating transaction)."""

    def column_values(self) -> dict[str, ColumnElement[Any]]:
        """Extra SET values for INSERT/UPDATE statements of the chunk table."""
        return {}

    def on_insert(self, conn: Connection, ids: Sequence[int], tokens: Sequence[str]) -> None:
        """Index new chunks (only called when the store indexes)."""

    def on_delete(self, conn: Connection, ids: Sequence[int]) -> None:
        """Forget deleted chunks."""

    def on_update(self, conn: Connection, ids: Sequence[int], tokens: Sequence[str] | None) -> None:
        """Re-index changed chunks; ``tokens`` None means remove them from the index."""

    def ranked(
        self, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> Select[Any]:
        """A query of the best ``top_k`` chunks: columns ``id`` (chunk id) and ``score``."""
        raise NotImplementedError

    def ranked_ids(
        self, conn: Connection, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        """``(chunk id, score)`` of the best ``top_k`` chunks, best first."""
        return [(row.id, row.score) for row in conn.execute(self.ranked(table, tokens, top_k, document_ids))]

    def search(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[Column[Any]],
        tokens: Sequence[str],
        top_k: int,
        document_ids: Sequence[int] | None,
    ) -> Sequence[Any]:
        """``columns`` of the best ``top_k`` chunks plus ``score``, best first.

        The ranking query picks ids and scores first, so only the winners' text is read and
        sorted, not that of every chunk that matches a word.
        """
        top = self.ranked(table, tokens, top_k, document_ids).subquery("top")
        query = (
            select(*columns, top.c.score)
            .join_from(table, top, table.c.chunk_id == top.c.id)
            .order_by(top.c.score.desc(), table.c.chunk_id)
        )
        return conn.execute(query).all()


class _Pruned(NamedTuple):
    """How a pruned query is searched (see :class:`Fts5Index`)."""

    paired: list[str]  # the rarest words, candidates hold two of them
    single: list[str]  # the rarest words within ROW_BUDGET (at least one), candidates if too few pairs
    counts: dict[str, int]  # chunks holding each query word
    rows: int  # chunks in the index
    average_length: float  # tokens per chunk


class Fts5Index(FullTextIndex):
    """SQLite FTS5 table ``<table>_fts(tokens)``, rowid = chunk id, BM25 ranking.

    Beside it, the table ``<table>_fts_df(term, doc)`` holds the number of chunks holding each word
    (``_folded``), kept by every write in the write's transaction, and under the term ``''`` the
    number of chunks indexed: a lookup by primary key. When that number is not the index's own
    (a writer that does not keep the counts wrote since), the counts are read from the ``fts5vocab``
    table ``<table>_fts_vocab`` instead, which walks each word's whole list of chunks, and the next
    open counts them afresh from it.

    A query whose words are in at most ``ROW_BUDGET`` chunks in all, or that has one word, is
    ranked exactly: BM25 over the OR of its words. Above that it is pruned (approximate): the
    candidates are the chunks holding two of its rarest words (those in at most ``PAIR_BUDGET``
    chunks in all, at least two, at most ``PAIRED_WORDS``), or, when fewer than asked, also those
    holding its rarest words within ``ROW_BUDGET`` (at least the rarest); FTS5 ranks them by those
    words and the best ``RESCORED`` get their full BM25 score over all the query's words, computed
    here as ``bm25()`` computes it from the word counts. A chunk holding at most one rare
    word and only common ones is missed, but the cost no longer grows with the chunks that hold
    the common words.
    """

    def __init__(self, table_name: str) -> None:
        super().__init__(table_name)
        self.name = f"{table_name}_fts"
        self.vocab = f"{self.name}_vocab"
        self.df = f"{self.name}_df"
        self.fts = sa_table(self.name, sa_column("rowid", Integer), sa_column("tokens", Text))

    def setup(self, conn: Connection, table: Table, backfill: bool) -> None:
        found = conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = ?", (self.name,)).first()
        if not found:
            try:
                conn.exec_driver_sql(
                    f"CREATE VIRTUAL TABLE {self.name} USING fts5(tokens, tokenize = '{FTS5_TOKENIZER}')"
                )
            except OperationalError as exc:
                if "fts5" not in str(exc):
                    raise
                self.available = False
                logger.warning("this SQLite library has no FTS5 module: full-text search is unavailable")
                return
        conn.exec_driver_sql(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.vocab} USING fts5vocab({self.name}, 'row')")
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {self.df} (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) "
                             "WITHOUT ROWID")  # fmt: skip
        rows = (self._averages(conn) or [0])[0]
        if conn.exec_driver_sql(f"SELECT doc FROM {self.df} WHERE term = ''").scalar() != rows:
            self._recount(conn, rows)
        if not found and backfill:
            self._backfill(conn, table)

    def _averages(self, conn: Connection) -> list[int]:
        """FTS5's averages record: chunks in the index, then tokens per column (empty while it has none)."""
        averages = conn.exec_driver_sql(f"SELECT block FROM {self.name}_data WHERE id = 1").scalar()
        return _varints(bytes(averages)) if averages else []

    def _recount(self, conn: Connection, rows: int) -> None:
        """Fill the word counts from the ``fts5vocab`` table (2 s for a million chunks)."""
        started = time.perf_counter()
        conn.exec_driver_sql(f"DELETE FROM {self.df}")
        conn.exec_driver_sql(f"INSERT INTO {self.df} (term, doc) SELECT term, doc FROM {self.vocab}")
        conn.exec_driver_sql(f"INSERT INTO {self.df} (term, doc) VALUES ('', ?)", (rows,))
        logger.info("counted the words of %d chunks of %s in %.1f s", rows, self.name, time.perf_counter() - started)

    def _count(self, conn: Connection, texts: Sequence[str], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) the words of ``texts``, chunks of the index, from the counts."""
        counts = Counter(word for text in texts for word in {_folded(token) for token in text.split()})
        counts[""] = len(texts)
        upsert = f"INSERT INTO {self.df} (term, doc) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET doc = doc + ?"
        conn.exec_driver_sql(upsert, [(term, sign * n, sign * n) for term, n in counts.items()])
        gone = [(term,) for term in counts if term] if sign < 0 else []
        if gone:  # none when the deleted chunks hold no word
            conn.exec_driver_sql(f"DELETE FROM {self.df} WHERE term = ? AND doc <= 0", gone)

    def _backfill(self, conn: Connection, table: Table) -> None:
        """Index chunks that exist without FTS rows (a database written by another program)."""
        last = -1
        while True:
            query = (
                select(table.c.chunk_id, table.c.chunk_content)
                .where(table.c.chunk_id > last)
                .order_by(table.c.chunk_id)
                .limit(BACKFILL_BATCH)
            )
            rows = conn.execute(query).all()
            if not rows:
                return
            self.on_insert(conn, [r[0] for r in rows], [index_tokens(r[1]) for r in rows])
            last = rows[-1][0]
            logger.info("indexed %d existing chunks of %s for full-text search", len(rows), table.name)

    def on_insert(self, conn: Connection, ids: Sequence[int], tokens: Sequence[str]) -> None:
        if self.available:
            rows = list(zip(ids, tokens, strict=True))
            conn.exec_driver_sql(f"INSERT INTO {self.name} (rowid, tokens) VALUES (?, ?)", rows)
            self._count(conn, tokens, 1)

    def on_delete(self, conn: Connection, ids: Sequence[int]) -> None:
        if self.available:
            for batch in id_batches(ids):
                texts = conn.execute(select(self.fts.c.tokens).where(self.fts.c.rowid.in_(batch))).scalars().all()
                conn.execute(self.fts.delete().where(self.fts.c.rowid.in_(batch)))
                if texts:
                    self._count(conn, texts, -1)

    def on_update(self, conn: Connection, ids: Sequence[int], tokens: Sequence[str] | None) -> None:
        self.on_delete(conn, ids)
        if tokens is not None:
            self.on_insert(conn, ids, tokens)

    def ranked(
        self, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> Select[Any]:
        return self._ranked_match(table, fts5_match(tokens), top_k, document_ids)

    def _ranked_match(self, table: Table, match: str, top_k: int, document_ids: Sequence[int] | None) -> Select[Any]:
        """The best ``top_k`` chunks matching the FTS5 expression ``match``, by BM25."""
        chunk_id = self.fts.c.rowid.label("id")
        score = (-func.bm25(literal_column(self.name))).label("score")
        query = (
            select(chunk_id, score)
            .where(literal_column(self.name).op("MATCH")(bindparam("match", match)))
            .order_by(score.desc(), chunk_id)
            .limit(top_k)
        )
        if document_ids is not None:
            query = query.join_from(self.fts, table, table.c.chunk_id == self.fts.c.rowid).where(
                table.c.document_id.in_(document_ids)
            )
        return query

    def ranked_ids(
        self, conn: Connection, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        pruned = self._prune(conn, tokens)
        if pruned is None:
            return super().ranked_ids(conn, table, tokens, top_k, document_ids)
        return self._pruned_ids(conn, table, tokens, pruned, top_k, document_ids)

    def search(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[Column[Any]],
        tokens: Sequence[str],
        top_k: int,
        document_ids: Sequence[int] | None,
    ) -> Sequence[Any]:
        """As :meth:`FullTextIndex.search`; a query over ``ROW_BUDGET`` matching chunks is pruned."""
        pruned = self._prune(conn, tokens)
        if pruned is None:
            return super().search(conn, table, columns, tokens, top_k, document_ids)
        scores = dict(self._pruned_ids(conn, table, tokens, pruned, top_k, document_ids))
        return scored_rows(conn, table, columns, scores)

    def _prune(self, conn: Connection, tokens: Sequence[str]) -> _Pruned | None:
        """How to prune the query, or None to search exactly."""
        if len(tokens) < 2:
            return None
        averages = self._averages(conn)
        if not averages:
            return None
        rows, *lengths = averages
        counts = self._word_counts(conn, tokens, rows)
        rarest = sorted((token for token in tokens if counts[token]), key=lambda token: counts[token])
        if sum(counts.values()) <= ROW_BUDGET or len(rarest) < 2:
            return None
        return _Pruned(_within(rarest, counts, PAIR_BUDGET, 2)[:PAIRED_WORDS], _within(rarest, counts, ROW_BUDGET, 1),
                       counts, rows, lengths[0] / rows if rows and lengths else 1.0)  # fmt: skip

    def _word_counts(self, conn: Connection, tokens: Sequence[str], rows: int) -> dict[str, int]:
        """Chunks holding each token (0 when no chunk does), from the counts the writes keep, or,
        when they do not cover the index's ``rows`` chunks, from the ``fts5vocab`` table."""
        terms = {token: _folded(token) for token in tokens}
        found = self._lookup(conn, self.df, ("", *set(terms.values())))
        if found.get("") != rows:
            found = self._lookup(conn, self.vocab, tuple({*terms, *terms.values()}))
            return {token: found.get(token, found.get(term, 0)) for token, term in terms.items()}
        return {token: found.get(term, 0) for token, term in terms.items()}

    @staticmethod
    def _lookup(conn: Connection, counts: str, terms: tuple[str, ...]) -> dict[str, int]:
        """``terms``' rows of the table ``counts`` (term, doc): a seek each."""
        marks = ", ".join("?" * len(terms))
        rows = conn.exec_driver_sql(f"SELECT term, doc FROM {counts} WHERE term IN ({marks})", terms)
        return {term: int(doc) for term, doc in rows}

    def _pruned_ids(
        self,
        conn: Connection,
        table: Table,
        tokens: Sequence[str],
        pruned: _Pruned,
        top_k: int,
        document_ids: Sequence[int] | None,
    ) -> list[tuple[int, float]]:
        """The best ``top_k`` candidates by their BM25 score over all of ``tokens``."""
        fetch = max(top_k, RESCORED)
        quoted = [fts5_match([token]) for token in pruned.paired]
        # chunks holding two of them: each word AND any rarer one. FTS5 reads a word's chunk list once
        # for each time it appears: the commonest word's once, where the n(n - 1) / 2 pairs read each n - 1 times
        pairs = " OR ".join(f"({word} AND ({' OR '.join(quoted[:i])}))" for i, word in enumerate(quoted) if i)
        candidates = [row.id for row in conn.execute(self._ranked_match(table, pairs, fetch, document_ids))]
        if len(candidates) < fetch:
            single = self._ranked_match(table, fts5_match(pruned.single), fetch, document_ids)
            candidates = list(dict.fromkeys(candidates + [row.id for row in conn.execute(single)]))[:fetch]
        weights = {token: _idf(pruned.rows, pruned.counts[token]) for token in tokens}
        scored = []
        for batch in id_batches(candidates):
            query = select(self.fts.c.rowid, self.fts.c.tokens).where(self.fts.c.rowid.in_(batch))
            for chunk_id, text in conn.execute(query):
                words = text.split()
                found = Counter(word for word in words if word in weights)
                norm = BM25_K1 * (1 - BM25_B + BM25_B * len(words) / pruned.average_length)
                score = sum(weights[w] * n * (BM25_K1 + 1) / (n + norm) for w, n in found.items())
                scored.append((chunk_id, score))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return scored[:top_k]


def _within(rarest: list[str], counts: dict[str, int], budget: int, least: int) -> list[str]:
    """The first of ``rarest`` whose counts add up to at most ``budget``, at least ``least`` of them."""
    total = 0
    for taken, token in enumerate(rarest):
        total += counts[token]
        if total > budget and taken >= least:
            return rarest[:taken]
    return list(rarest)


def _folded(token: str) -> str:
    """``token`` as the vocabulary holds it: ``remove_diacritics`` folds accented Latin letters
    (an approximation of FTS5's table, used only when ``token`` itself is not found)."""
    if token.isascii():
        return token
    return "".join(ch for ch in unicodedata.normalize("NFD", token) if not unicodedata.combining(ch))


def _idf(rows: int, count: int) -> float:
    """BM25's inverse document frequency as FTS5's bm25() computes it (never below 1e-6)."""
    value = math.log((rows - count + 0.5) / (count + 0.5))
    return value if value > 0 else 1e-6


def _varints(blob: bytes) -> list[int]:
    """The SQLite varints of an FTS5 record (the averages record: rows, then tokens per column)."""
    values, i = [], 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


class TsvectorIndex(FullTextIndex):
    """PostgreSQL ``search_vector tsvector`` column with a GIN index.

    PostgreSQL's ranking functions know nothing of how rare a word is, so an OR query lets a long
    chunk full of the commonest query word win. The score is therefore the number of distinct
    query words a chunk contains plus its ``ts_rank`` (length-normalised, scaled into [0, 1)):
    more matched words always rank higher, and word frequency orders chunks that match as many.
    ``ts_rank`` rather than ``ts_rank_cd``: with an OR query every cover is a single word, so
    cover density comes down to counting occurrences, at two to three times the cost.
    """

    binds_tokens = True
    RANK_NORMALIZATION = 1 | 32  # divide by 1 + log(document length), then rank / (rank + 1)

    def schema(self) -> list[Column[Any] | Index]:
        return [
            Column("search_vector", TSVECTOR, nullable=True),
            Index(f"ix_{self.table_name}_search_vector", "search_vector", postgresql_using="gin"),
        ]

    def column_values(self) -> dict[str, ColumnElement[Any]]:
        # to_tsvector is strict: tokens None (encrypted chunk) stores NULL, which matches nothing.
        return {"search_vector": func.to_tsvector(_SIMPLE, bindparam("tokens"))}

    def ranked(
        self, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> Select[Any]:
        vector = table.c.search_vector
        quoted = ["'" + token.replace("\\", "\\\\").replace("'", "''") + "'" for token in tokens]
        tsquery = func.to_tsquery(_SIMPLE, bindparam("tsquery", " | ".join(quoted)))
        matched = [
            cast(vector.bool_op("@@")(func.to_tsquery(_SIMPLE, bindparam(f"token_{i}", text))), Integer)
            for i, text in enumerate(quoted)
        ]
        rank = func.ts_rank(vector, tsquery, self.RANK_NORMALIZATION)
        score = cast(functools.reduce(operator.add, matched) + rank, Float).label("score")
        query = (
            select(table.c.chunk_id.label("id"), score)
            .where(vector.bool_op("@@")(tsquery))
            .order_by(score.desc(), table.c.chunk_id)
            .limit(top_k)
        )
        if document_ids is not None:
            query = query.where(table.c.document_id.in_(document_ids))
        return query
