# SPDX-License-Identifier: Apache-2.0
"""The SQLAlchemy chunk store behind ``SQLiteDocstore`` and ``PostgresDocstore``.

One table per store (``chunks_table`` by default; its layout is in ``chunk_rows``). Every write
is one transaction (all rows or none, the full-text rows included); every method opens its own
connection from the engine's pool, so one store can be shared by threads.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, NamedTuple

from sqlalchemy import Connection, Engine, Row, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError, ProgrammingError, SQLAlchemyError

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store.base_storage import (
    MAX_CHUNKS_NUM,
    MAX_PAGE_CONTENT,
    Docstore,
    MxDocument,
)
from mx_rag.storage.document_store.chunk_rows import (
    ROW_COLUMNS,
    ChunkCodec,
    TextFn,
    chunk_table,
)
from mx_rag.storage.document_store.full_text import FullTextIndex, id_batches, scored_rows
from mx_rag.storage.document_store.text_tokens import index_tokens, query_tokens
from mx_rag.storage.engines import WRITE
from mx_rag.storage.validation import (
    check_filter,
    check_id,
    check_ids,
    check_top_k,
    post_filter_fetch,
    post_filter_first,
    post_filter_keep,
)
from mx_rag.utils.checks import check_pattern, check_str, fail
from mx_rag.utils.common import TEXT_MAX_LEN
from mx_rag.utils.lifecycle import Closable

logger = logging.getLogger(__name__)

TABLE_NAME_PATTERN = r"[a-z_][a-z0-9_]{0,47}"
_FAST_MAX_IDS: Final = 256  # search_many of up to this many ids runs a cached driver-level statement
_POSITIONAL_MARKERS: Final = {"qmark": "?", "format": "%s", "pyformat": "%s"}


class _RawRow(NamedTuple):
    """A row of ``ROW_COLUMNS`` read through the driver (metadata may still be JSON text)."""

    chunk_id: int
    document_id: int
    document_name: str
    chunk_content: str
    raw_metadata: Any

    @property
    def chunk_metadata(self) -> dict[str, Any]:
        value = self.raw_metadata
        return json.loads(value) if isinstance(value, str | bytes) else value


class _SqlDocstore(Docstore, Closable):
    """A :class:`Docstore` on any SQLAlchemy engine; subclasses pick the engine and the index.

    Args:
        engine: the engine (its pool gives each call its own connection).
        full_text: the database's full-text index.
        table_name: name of the chunk table.
        encrypt_fn: applied to chunk text before it is written (``str -> str``).
        decrypt_fn: applied to chunk text after it is read (``str -> str``).
        owns_engine: dispose of the engine in :meth:`close`, and here when the store cannot be set up.
    """

    _refuses_nul = False  # PostgreSQL text cannot hold NUL characters

    def __init__(
        self,
        engine: Engine,
        full_text: FullTextIndex,
        *,
        table_name: str,
        encrypt_fn: TextFn | None = None,
        decrypt_fn: TextFn | None = None,
        owns_engine: bool = True,
    ) -> None:
        self._engine = engine
        self._owns_engine = owns_engine
        try:
            check_pattern("table_name", table_name, TABLE_NAME_PATTERN)
            nul_free = engine.dialect.name if self._refuses_nul else None
            self._codec = ChunkCodec(encrypt_fn, decrypt_fn, nul_free)
            self._full_text = full_text
            self._table = chunk_table(table_name, full_text.schema())
            self._row_columns = [self._table.c[name] for name in ROW_COLUMNS]
            self._ids_sql: dict[int, str] = {}  # search_many's SQL per id count (see _select_ids_sql)
            self._create_schema()
        except BaseException:
            if owns_engine:
                engine.dispose()
            raise

    # --------------------------------------------------------------------------------------------
    # plumbing

    def _create_schema(self) -> None:
        """Create the table, its indexes and the full-text index if missing.

        Two processes creating the same PostgreSQL table at once can make one of them fail
        (a duplicate type name); the second attempt then finds the table.
        """
        for attempt in (1, 2):
            try:
                with self._write() as conn:
                    self._table.metadata.create_all(conn)
                    self._full_text.setup(conn, self._table, backfill=self._indexing)
                return
            except SQLAlchemyError as exc:
                if attempt == 2 or not isinstance(exc, IntegrityError | ProgrammingError):
                    raise StorageError(f"creating table {self._table.name!r} failed: {exc}") from exc
                logger.debug("creating %s raced with another process; retrying", self._table.name)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (share it with components that keep tables in the same database)."""
        return self._engine

    @property
    def table_name(self) -> str:
        """Name of the chunk table."""
        return self._table.name

    @property
    def _indexing(self) -> bool:
        """Whether chunk text goes into the full-text index (never when it is encrypted)."""
        return self._full_text.available and not self._codec.encrypts

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StorageError(f"{action} failed on table {self._table.name!r}: {exc}") from exc
        except UnicodeEncodeError as exc:  # a lone surrogate (text decoded with errors="surrogateescape")
            raise ParameterError(f"{action}: the text holds characters UTF-8 cannot encode ({exc.reason})") from exc

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A connection inside one write transaction (committed on success, rolled back on error)."""
        with self._engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def _before_write(self, count: int) -> None:
        """Hook for capacity checks before ``count`` chunks are written."""

    def close(self) -> None:
        """Close the pooled connections (the engine is disposed only if the store created it)."""
        if self._owns_engine:
            self._engine.dispose()


    def _row_params(self, index: int, doc: Any, document_id: int) -> dict[str, Any]:
        """Insert parameters of one chunk, with its tokens where the index is a column."""
        params = self._codec.row_params(index, doc, document_id)
        if self._full_text.binds_tokens:
            params["tokens"] = index_tokens(doc.page_content) if self._indexing else None
        return params

    # --------------------------------------------------------------------------------------------
    # writes

    def add(self, documents: Sequence[MxDocument], document_id: int) -> list[int]:
        """Insert chunks of one document in one transaction; return their new ids in input order.

        Args:
            documents: 1 to 1,000,000 chunks.
            document_id: the document they belong to (an int >= 0).

        Raises:
            ParameterError: a bad argument; nothing is written.
            StorageError: the database failed; nothing is written.
        """
        document_id = check_id("document_id", document_id)
        if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
            raise fail("documents", documents, "a list of MxDocument")
        if not 1 <= len(documents) <= MAX_CHUNKS_NUM:
            raise ParameterError(f"documents must hold 1 to {MAX_CHUNKS_NUM} chunks, got {len(documents)}")
        rows = [self._row_params(i, doc, document_id) for i, doc in enumerate(documents)]
        separate_index = self._indexing and self._full_text.takes_tokens and not self._full_text.binds_tokens
        tokens = [index_tokens(doc.page_content) for doc in documents] if separate_index else []
        self._before_write(len(rows))
        with self._errors("adding chunks"), self._write() as conn:
            ids = self._insert(conn, rows)
            if separate_index:
                self._full_text.on_insert(conn, ids, tokens)
        logger.debug("added %d chunks of document %d to %s", len(ids), document_id, self._table.name)
        return ids

    def _insert(self, conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
        """INSERT ... RETURNING in batches (insertmanyvalues); ids in the order of ``rows``."""
        values = self._full_text.column_values()
        if conn.dialect.name == "sqlite":
            # SQLite returns RETURNING rows in no promised order, but one INSERT assigns increasing
            # AUTOINCREMENT ids in VALUES order, and the write lock keeps other writers out.
            statement = insert(self._table).values(values).returning(self._table.c.chunk_id)
            return sorted(conn.execute(statement, rows).scalars())
        statement = insert(self._table).values(values).returning(self._table.c.chunk_id, sort_by_parameter_order=True)
        return list(conn.execute(statement, rows).scalars())

    def delete(self, document_id: int) -> list[int]:
        """Delete every chunk of ``document_id`` (and its full-text rows); return their ids, ascending."""
        document_id = check_id("document_id", document_id)
        table = self._table
        with self._errors("deleting chunks"), self._write() as conn:
            statement = table.delete().where(table.c.document_id == document_id).returning(table.c.chunk_id)
            ids = sorted(conn.execute(statement).scalars())
            self._full_text.on_delete(conn, ids)
        logger.debug("deleted %d chunks of document %d from %s", len(ids), document_id, table.name)
        return ids

    def update(self, chunk_ids: Sequence[int], texts: Sequence[str]) -> None:
        """Replace the text of existing chunks, in one transaction (the full-text index follows).

        Raises:
            ParameterError: lengths differ, an id repeats or does not exist, a text is too long.
        """
        ids = check_ids("chunk_ids", chunk_ids, allow_empty=True).tolist()
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence) or len(texts) != len(ids):
            raise fail("texts", texts, f"a list of str as long as chunk_ids ({len(ids)})")
        for i, text in enumerate(texts):
            check_str(f"texts[{i}]", text, 0, MAX_PAGE_CONTENT)
            self._codec.check_text(f"texts[{i}]", text)
        if not ids:
            return
        table = self._table
        params: list[dict[str, Any]] = [
            {"b_id": i, "b_content": self._codec.encrypt(t)} for i, t in zip(ids, texts, strict=True)
        ]
        tokens = [index_tokens(t) for t in texts] if self._indexing and self._full_text.takes_tokens else None
        if self._full_text.binds_tokens:
            for n, param in enumerate(params):
                param["tokens"] = tokens[n] if tokens is not None else None
        self._before_write(0)
        statement = (
            update(table)
            .where(table.c.chunk_id == bindparam("b_id"))
            .values(chunk_content=bindparam("b_content"), **self._full_text.column_values())
        )
        with self._errors("updating chunks"), self._write() as conn:
            found: set[int] = set()
            for batch in id_batches(ids):
                found.update(conn.execute(select(table.c.chunk_id).where(table.c.chunk_id.in_(batch))).scalars())
            missing = [i for i in ids if i not in found]
            if missing:
                raise ParameterError(f"chunk_ids holds ids that do not exist: {missing[:20]}")
            conn.execute(statement, params)
            self._full_text.on_update(conn, ids, tokens)

    # --------------------------------------------------------------------------------------------
    # reads

    def search(self, chunk_id: int) -> MxDocument | None:
        """The chunk with id ``chunk_id``, or None."""
        chunk_id = check_id("chunk_id", chunk_id)
        return self.search_many([chunk_id]).get(chunk_id)

    def search_many(self, chunk_ids: Sequence[int]) -> dict[int, MxDocument]:
        """Chunks by id, in one query per 10,000 ids; ids not found are absent from the result."""
        ids = sorted(set(check_ids("chunk_ids", chunk_ids, allow_empty=True, unique=False).tolist()))
        if not ids:
            return {}
        if len(ids) <= _FAST_MAX_IDS and (sql := self._select_ids_sql(len(ids))) is not None:
            # The retriever's hot path: one cached SQL string per id count, run on a pooled driver
            # connection without an explicit transaction (one SELECT reads one consistent snapshot).
            return {row[0]: self._codec.to_document(_RawRow(*row)) for row in self._fetch_raw(sql, ids)}
        rows: list[Row[Any]] = []
        with self._errors("reading chunks"), self._read() as conn:
            for batch in id_batches(ids):
                query = select(*self._row_columns).where(self._table.c.chunk_id.in_(batch))
                rows.extend(conn.execute(query).all())
        return {row.chunk_id: self._codec.to_document(row) for row in rows}

    def _fetch_raw(self, sql: str, params: Sequence[Any]) -> list[Any]:
        driver_error = self._engine.dialect.loaded_dbapi.Error
        try:
            connection = self._engine.raw_connection()
            try:
                cursor = connection.cursor()
                try:
                    cursor.execute(sql, tuple(params))
                    return list(cursor.fetchall())
                finally:
                    cursor.close()
            finally:
                connection.close()  # back to the pool, which rolls back whatever the driver began
        except (driver_error, SQLAlchemyError) as exc:
            raise StorageError(f"reading chunks failed on table {self._table.name!r}: {exc}") from exc

    def _select_ids_sql(self, count: int) -> str | None:
        """``SELECT <row columns> ... WHERE chunk_id IN (<count> placeholders)`` for this driver.

        None where the driver's parameter style is not a positional one we know (the caller then
        builds a SQLAlchemy Core query instead). Values are always bound, never written into the SQL.
        """
        sql = self._ids_sql.get(count)
        if sql is None:
            marker = _POSITIONAL_MARKERS.get(self._engine.dialect.paramstyle)
            if marker is None:
                return None
            quote = self._engine.dialect.identifier_preparer.quote
            columns = ", ".join(quote(name) for name in ROW_COLUMNS)
            placeholders = ", ".join([marker] * count)
            sql = f"SELECT {columns} FROM {quote(self._table.name)} WHERE {quote('chunk_id')} IN ({placeholders})"
            self._ids_sql[count] = sql
        return sql

    def search_by_document_id(self, document_id: int) -> list[MxDocument]:
        """The chunks of ``document_id`` in insertion order."""
        document_id = check_id("document_id", document_id)
        table = self._table
        query = select(*self._row_columns).where(table.c.document_id == document_id).order_by(table.c.chunk_id)
        with self._errors("reading chunks"), self._read() as conn:
            rows = conn.execute(query).all()
        return [self._codec.to_document(row) for row in rows]

    def get_all_chunk_id(self) -> list[int]:
        """Every chunk id, ascending."""
        with self._errors("listing chunk ids"), self._read() as conn:
            return list(conn.execute(select(self._table.c.chunk_id).order_by(self._table.c.chunk_id)).scalars())

    def get_all_document_id(self) -> list[int]:
        """Every document id that has chunks, ascending (SELECT DISTINCT)."""
        column = self._table.c.document_id
        with self._errors("listing document ids"), self._read() as conn:
            return list(conn.execute(select(column).distinct().order_by(column)).scalars())

    def count(self) -> int:
        """Number of chunks (SELECT COUNT)."""
        with self._errors("counting chunks"), self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(self._table)).scalar_one())

    def max_chunk_id(self) -> int | None:
        """The highest chunk id (SELECT MAX over the primary key), ``None`` when empty."""
        with self._errors("reading the highest chunk id"), self._read() as conn:
            top = conn.execute(select(func.max(self._table.c.chunk_id))).scalar_one()
        return None if top is None else int(top)

    def _post_filtered(
        self, conn: Connection, tokens: list[str], top_k: int, document_ids: list[int]
    ) -> list[Any]:
        """The best ``top_k`` chunks of ``document_ids`` taken from an unfiltered search for
        ``post_filter_fetch(document_ids, top_k)``; [] when those hold fewer than ``top_k`` of them while more
        chunks match (the caller then searches with the filter, batch by batch).

        The ranking reads ids and scores from the full-text index alone (no join, whose plan may
        scan the chunk table); the candidates' rows are read by id afterwards."""
        fetch = post_filter_fetch(document_ids, top_k)
        scores = dict(self._full_text.ranked_ids(conn, self._table, tokens, fetch, None))
        rows = scored_rows(conn, self._table, self._row_columns, scores)
        return post_filter_keep(rows, document_ids, top_k, fetch, lambda row: row.document_id) or []

    def full_text_search(
        self, query: str, top_k: int = 3, filter_dict: dict[str, Any] | None = None
    ) -> list[MxDocument]:
        """Keyword search over chunk text, best first.

        Each result carries ``metadata["score"]`` (higher is better) and
        ``metadata["retrieval_type"] = "sparse"``. A query without any word returns ``[]``.

        Args:
            query: the search text (at most 1,000,000 characters).
            top_k: number of results, 1 to 10,000.
            filter_dict: ``{"document_id": [ids]}`` restricts the search to those documents.

        Raises:
            ParameterError: a bad argument, or the store encrypts chunks (an index of the
                plaintext would defeat the encryption, so none is kept).
            StorageError: the database cannot do full-text search (SQLite without FTS5).
        """
        check_str("query", query, 0, TEXT_MAX_LEN)
        top_k = check_top_k(top_k)
        document_ids = check_filter(filter_dict)
        if self._codec.encrypts:
            raise ParameterError(
                "full_text_search is unavailable on a docstore with encrypt_fn: a full-text index would hold "
                "the plaintext of the encrypted chunks, so none is kept; use vector retrieval instead"
            )
        if not self._full_text.available:
            raise StorageError(f"full-text search is unavailable: this {self._engine.dialect.name} lacks FTS5")
        tokens = query_tokens(query)
        if not tokens or document_ids == []:
            return []
        rows: list[Any] = []
        with self._errors("full-text search"), self._read() as conn:
            if document_ids is not None and post_filter_first(document_ids):
                rows = self._post_filtered(conn, tokens, top_k, document_ids)
            if not rows:
                batches: list[Sequence[int] | None] = [None] if document_ids is None else list(id_batches(document_ids))
                for batch in batches:
                    rows.extend(self._full_text.search(conn, self._table, self._row_columns, tokens, top_k, batch))
        rows.sort(key=lambda row: (-row.score, row.chunk_id))
        return [self._codec.to_document(row, score=float(row.score), retrieval_type="sparse") for row in rows[:top_k]]
