# SPDX-License-Identifier: Apache-2.0
"""The full-text index of a chunk table, one class per database.

Both index the output of :func:`text_tokens.index_tokens` (jieba for Chinese, lower-cased words
otherwise) and search with an OR of the query's tokens, so the same chunk ranks first on either
database:

* SQLite: an FTS5 table ``<table>_fts(tokens)`` whose rowid is the chunk id, ranked by BM25
  (score = ``-bm25()``, higher is better). FTS5 rows are written next to the chunk rows, in the
  same transaction.
* PostgreSQL: a ``search_vector tsvector`` column (``to_tsvector('simple', tokens)``) on the
  chunk table with a GIN index, ranked by the number of distinct query words matched, then by
  ``ts_rank`` (word frequency, normalised by length).

Query text only ever reaches the database as a bound parameter; FTS5 and tsquery syntax in it is
neutralised by quoting each token.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Sequence
from typing import Any

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
_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")


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


class Fts5Index(FullTextIndex):
    """SQLite FTS5 table ``<table>_fts(tokens)``, rowid = chunk id, BM25 ranking."""

    def __init__(self, table_name: str) -> None:
        super().__init__(table_name)
        self.name = f"{table_name}_fts"
        self.fts = sa_table(self.name, sa_column("rowid", Integer), sa_column("tokens", Text))

    def setup(self, conn: Connection, table: Table, backfill: bool) -> None:
        found = conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = ?", (self.name,)).first()
        if found:
            return
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
        if backfill:
            self._backfill(conn, table)

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

    def on_delete(self, conn: Connection, ids: Sequence[int]) -> None:
        if self.available:
            for batch in id_batches(ids):
                conn.execute(self.fts.delete().where(self.fts.c.rowid.in_(batch)))

    def on_update(self, conn: Connection, ids: Sequence[int], tokens: Sequence[str] | None) -> None:
        self.on_delete(conn, ids)
        if tokens is not None:
            self.on_insert(conn, ids, tokens)

    def ranked(
        self, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> Select[Any]:
        match = fts5_match(tokens)
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
