# SPDX-License-Identifier: Apache-2.0
"""``OpenGaussDocstore``: chunks in an openGauss table (or a PostgreSQL one).

Full-text search on openGauss uses its own BM25: an index ``USING bm25`` on ``chunk_content``
named ``index_name`` and the ``<&>`` operator (the chunk's BM25 score for the query). PostgreSQL
has neither, so there the index is a GIN-indexed tsvector (as in ``PostgresDocstore``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, Connection, Engine, Float, Index, Select, Table, bindparam, cast, select, text
from sqlalchemy.exc import SQLAlchemyError

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store.base_storage import MxDocument
from mx_rag.storage.document_store.chunk_rows import TextFn
from mx_rag.storage.document_store.full_text import FullTextIndex, TsvectorIndex
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from mx_rag.storage.validation import check_filter, check_top_k
from mx_rag.utils.checks import check_bool, check_choice, check_instance, check_pattern, check_str, fail
from mx_rag.utils.common import TEXT_MAX_LEN

__all__ = ["OpenGaussDocstore"]

logger = logging.getLogger(__name__)

TABLE_NAME = "chunks_table"
INDEX_NAME_PATTERN = r"[a-zA-Z0-9_-]{6,64}"
DIALECTS = ("postgresql", "opengauss")
FULL_TEXT = ("auto", "bm25", "tsvector")


class _NamedTsvectorIndex(TsvectorIndex):
    """The tsvector index under the user's ``index_name``."""

    def __init__(self, table_name: str, index_name: str) -> None:
        super().__init__(table_name)
        self.index_name = index_name

    def schema(self) -> list[Column[Any] | Index]:
        column, _ = super().schema()
        return [column, Index(self.index_name, "search_vector", postgresql_using="gin")]


class _OpenGaussBm25Index(FullTextIndex):
    """openGauss's BM25 index ``index_name`` on ``chunk_content``, ranked with ``<&>``.

    openGauss keeps the index up to date itself, so nothing is written beside the chunks. The
    query sent is the query's tokens (``query_tokens``: jieba for Chinese) joined by spaces.
    Searches run with index scans on and sequential scans off for their transaction, as the
    ``<&>`` score comes from the index; chunks scoring 0 are left out.
    """

    takes_tokens = False

    def __init__(self, table_name: str, index_name: str, create: bool) -> None:
        super().__init__(table_name)
        self.index_name = index_name
        self.create = create

    def setup(self, conn: Connection, table: Table, backfill: bool) -> None:
        if not self.create:
            return
        found = conn.execute(text("SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND "
                                  "tablename = :table AND indexname = :index"),
                             {"table": table.name, "index": self.index_name}).first()  # fmt: skip
        if found is None:
            conn.exec_driver_sql(f'CREATE INDEX "{self.index_name}" ON {table.name} USING bm25 (chunk_content)')

    def ranked(
        self, table: Table, tokens: Sequence[str], top_k: int, document_ids: Sequence[int] | None
    ) -> Select[Any]:
        query_text = cast(bindparam("bm25_query", " ".join(tokens)), table.c.chunk_content.type)
        score = table.c.chunk_content.op("<&>", return_type=Float)(query_text).label("score")
        query = select(table.c.chunk_id.label("id"), score).order_by(score.desc()).limit(top_k)
        if document_ids is not None:
            query = query.where(table.c.document_id.in_(document_ids))
        return query

    def search(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[Column[Any]],
        tokens: Sequence[str],
        top_k: int,
        document_ids: Sequence[int] | None,
    ) -> Sequence[Any]:
        conn.exec_driver_sql("SET LOCAL enable_indexscan = on")
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        return [row for row in super().search(conn, table, columns, tokens, top_k, document_ids) if row.score > 0]


def _is_opengauss(engine: Engine) -> bool:
    """Whether ``engine`` reaches openGauss (its dialect, or ``version()`` of the server)."""
    if engine.dialect.name == "opengauss":
        return True
    try:
        with engine.connect() as conn:
            version = str(conn.exec_driver_sql("SELECT version()").scalar())
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot reach the database of engine {engine.url!r}: {exc}") from exc
    return "opengauss" in version.casefold()


class OpenGaussDocstore(_SqlDocstore):
    """Chunk store in the table ``chunks_table`` of an openGauss (or PostgreSQL) database.

    The same code and table layout as :class:`PostgresDocstore`. Full-text search on openGauss
    ranks with its BM25 index named ``index_name`` (``USING bm25``, the ``<&>`` operator); on
    PostgreSQL, which has no BM25 index, by the words of the query the chunks hold (jieba for
    Chinese) on a GIN-indexed tsvector named ``index_name``.

    Args:
        engine: a SQLAlchemy ``Engine`` on openGauss (``opengauss+psycopg2://``) or PostgreSQL
            (``postgresql+psycopg://``); :meth:`close` leaves it open.
        encrypt_fn: ``str -> str`` applied to chunk text before it is written; needs
            ``enable_bm25=False`` (an index of the text would hold the plaintext).
        decrypt_fn: ``str -> str`` applied to chunk text when it is read; needs ``encrypt_fn``.
        enable_bm25: keep the full-text index. False: ``full_text_search`` returns ``[]``.
        index_name: name of the full-text index, 6 to 64 of ``a-z A-Z 0-9 _ -``.
        full_text: ``"auto"`` (default: ``"bm25"`` on openGauss, found by the engine's dialect or
            the server's ``version()``, else ``"tsvector"``), ``"bm25"`` (openGauss's BM25 index;
            needs an openGauss that has it) or ``"tsvector"`` (any openGauss or PostgreSQL).

    Example:
        >>> from sqlalchemy import create_engine
        >>> store = OpenGaussDocstore(engine=create_engine("postgresql+psycopg://user:password@host/db"))
        >>> ids = store.add([MxDocument(page_content="示例文本", document_name="1.docx")], 1)
        >>> [doc.chunk_id for doc in store.full_text_search("文本")] == ids
        True
    """

    _refuses_nul = True

    def __init__(self, engine: Engine, encrypt_fn: TextFn | None = None, decrypt_fn: TextFn | None = None,
                 enable_bm25: bool = True, index_name: str = "chunks_content_bm25", *,
                 full_text: str = "auto") -> None:
        check_instance("engine", engine, Engine)
        if engine.dialect.name not in DIALECTS:
            raise fail("engine", engine, f"an Engine on openGauss or PostgreSQL (dialect in {list(DIALECTS)})")
        self._bm25 = check_bool("enable_bm25", enable_bm25)
        check_pattern("index_name", index_name, INDEX_NAME_PATTERN)
        full_text = check_choice("full_text", full_text, FULL_TEXT)
        if self._bm25 and (encrypt_fn is not None or decrypt_fn is not None):
            raise ParameterError(
                "encrypt_fn/decrypt_fn need enable_bm25=False: the full-text index would hold the plaintext of "
                "the encrypted chunks; pass enable_bm25=False to store encrypted chunks"
            )
        # The table has the same layout either way; without BM25 the text is just not indexed.
        if full_text == "auto":
            full_text = "bm25" if _is_opengauss(engine) else "tsvector"
        create = self._bm25 and encrypt_fn is None
        index: FullTextIndex = (_OpenGaussBm25Index(TABLE_NAME, index_name, create) if full_text == "bm25"
                                else _NamedTsvectorIndex(TABLE_NAME, index_name))  # fmt: skip
        super().__init__(engine, index, table_name=TABLE_NAME,
                         encrypt_fn=encrypt_fn, decrypt_fn=decrypt_fn, owns_engine=False)

    @property
    def _indexing(self) -> bool:
        return self._bm25 and super()._indexing

    def full_text_search(
        self, query: str, top_k: int = 3, filter_dict: dict[str, Any] | None = None
    ) -> list[MxDocument]:
        """Keyword search over chunk text, best first (see ``PostgresDocstore``); ``[]`` without BM25."""
        if self._bm25:
            return super().full_text_search(query, top_k, filter_dict)
        check_str("query", query, 0, TEXT_MAX_LEN)
        check_top_k(top_k)
        check_filter(filter_dict)
        return []

    def drop(self) -> None:
        """Drop the chunk table with its indexes (every chunk of this store)."""
        try:
            with self._write() as conn:
                self._table.drop(conn, checkfirst=True)
        except SQLAlchemyError as exc:
            raise StorageError(f"dropping table {self._table.name!r} failed: {exc}") from exc
