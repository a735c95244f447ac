# SPDX-License-Identifier: Apache-2.0
"""``PostgresDocstore``: chunks in a PostgreSQL table (psycopg 3), full-text search with tsvector."""

from __future__ import annotations

import logging

from sqlalchemy import URL, Engine

from mx_rag.storage.document_store.chunk_rows import TextFn
from mx_rag.storage.document_store.full_text import TsvectorIndex
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from mx_rag.storage.engines import postgres_engine

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
        try:
            super().__init__(engine, TsvectorIndex(table_name), table_name=table_name, encrypt_fn=encrypt_fn,
                             decrypt_fn=decrypt_fn, owns_engine=owns_engine)
        except BaseException:
            if owns_engine:
                engine.dispose()
            raise
