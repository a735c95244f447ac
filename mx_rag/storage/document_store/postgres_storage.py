# SPDX-License-Identifier: Apache-2.0
"""``PostgresDocstore``: chunks in a PostgreSQL table (psycopg 3), full-text search with tsvector."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import URL, Engine
from sqlalchemy.dialects.postgresql import insert

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store.base_storage import MAX_CHUNKS_NUM, MxDocument
from mx_rag.storage.document_store.chunk_rows import TextFn, check_ids
from mx_rag.storage.document_store.full_text import TsvectorIndex
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from mx_rag.storage.engines import postgres_engine
from mx_rag.storage.validation import check_id

__all__ = ["PostgresDocstore"]

logger = logging.getLogger(__name__)


class PostgresDocstore(_SqlDocstore):
    """Chunk store in a PostgreSQL table, with full-text search on a GIN-indexed tsvector.

    The same code and table layout as :class:`SQLiteDocstore`, for a database shared by several
    machines. Text is tokenised by mx_rag (jieba for Chinese) and indexed with the ``simple``
    configuration, so Chinese and English rank as they do on SQLite.

    Args:
        url_or_engine: ``postgresql+psycopg://user:password@host:5432/db`` (``postgresql://`` is
            taken to mean psycopg 3), or an existing Engine, which :meth:`close` leaves open.
        table_name: the chunk table (lower-case letters, digits and ``_``, at most 48).
        encrypt_fn: ``str -> str`` applied to chunk text before it is written. With it, no
            full-text index is kept (it would hold the plaintext).
        decrypt_fn: ``str -> str`` applied to chunk text when it is read; needs ``encrypt_fn``.
            ``encrypt_fn`` alone is allowed (with a warning): chunks then read back encrypted.

    Example:
        >>> from mx_rag.storage.document_store import MxDocument, PostgresDocstore
        >>> store = PostgresDocstore("postgresql+psycopg://mxrag:mxrag@127.0.0.1:5432/mxrag")
        >>> ids = store.add([MxDocument(page_content="PostgreSQL 全文检索", document_name="pg.md")], 7)
        >>> [doc.chunk_id for doc in store.full_text_search("全文检索")] == ids
        True
    """

    _refuses_nul = True

    def __init__(self, url_or_engine: str | URL | Engine, table_name: str = "chunks_table",
                 encrypt_fn: TextFn | None = None, decrypt_fn: TextFn | None = None) -> None:
        engine, owns_engine = postgres_engine(url_or_engine)
        super().__init__(engine, TsvectorIndex(table_name), table_name=table_name, encrypt_fn=encrypt_fn,
                         decrypt_fn=decrypt_fn, owns_engine=owns_engine)

    def upsert(self, documents: Sequence[MxDocument], document_id: int, chunk_ids: Sequence[int]) -> None:
        """Write chunks of one document under ids the caller chose, in one transaction: a chunk
        whose id is already there is overwritten (``INSERT ... ON CONFLICT``), so writing the same
        chunks twice leaves them once (scale-out ingestion's retries rely on it).

        Raises:
            ParameterError: a bad argument, or not one id per chunk; nothing is written.
            StorageError: the database failed; nothing is written.
        """
        document_id = check_id("document_id", document_id)
        if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
            raise ParameterError(f"documents must be a list of MxDocument, got {type(documents).__name__}")
        ids = check_ids("chunk_ids", chunk_ids)
        if not 1 <= len(documents) <= MAX_CHUNKS_NUM or len(ids) != len(documents) or len(set(ids)) != len(ids):
            raise ParameterError(f"upsert needs 1 to {MAX_CHUNKS_NUM} chunks with as many distinct chunk_ids, got "
                                 f"{len(documents)} chunks and {len(ids)} ids ({len(set(ids))} distinct)")
        rows = [self._row_params(i, doc, document_id) | {"chunk_id": ids[i]} for i, doc in enumerate(documents)]
        statement = insert(self._table).values(self._full_text.column_values())
        changed = ("document_id", "document_name", "chunk_content", "chunk_metadata", "search_vector")
        statement = statement.on_conflict_do_update(
            index_elements=[self._table.c.chunk_id], set_={name: statement.excluded[name] for name in changed}
        )
        self._before_write(len(rows))
        with self._errors("upserting chunks"), self._write() as conn:
            conn.execute(statement, rows)
        logger.debug("upserted %d chunks of document %d into %s", len(rows), document_id, self._table.name)
