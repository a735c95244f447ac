# SPDX-License-Identifier: Apache-2.0
"""``OpenGaussDocstore``: chunks in an openGauss table (or a PostgreSQL one), full-text search with tsvector."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Column, Engine, Index
from sqlalchemy.exc import SQLAlchemyError

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store.base_storage import MxDocument
from mx_rag.storage.document_store.chunk_rows import TextFn
from mx_rag.storage.document_store.full_text import TsvectorIndex
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from mx_rag.storage.validation import check_filter, check_top_k
from mx_rag.utils.checks import check_bool, check_instance, check_pattern, check_str, fail
from mx_rag.utils.common import TEXT_MAX_LEN

__all__ = ["OpenGaussDocstore"]

logger = logging.getLogger(__name__)

TABLE_NAME = "chunks_table"
INDEX_NAME_PATTERN = r"[a-zA-Z0-9_-]{6,64}"
DIALECTS = ("postgresql", "opengauss")


class _NamedTsvectorIndex(TsvectorIndex):
    """The tsvector index under the user's ``index_name``."""

    def __init__(self, table_name: str, index_name: str) -> None:
        super().__init__(table_name)
        self.index_name = index_name

    def schema(self) -> list[Column[Any] | Index]:
        column, _ = super().schema()
        return [column, Index(self.index_name, "search_vector", postgresql_using="gin")]


class OpenGaussDocstore(_SqlDocstore):
    """Chunk store in the table ``chunks_table`` of an openGauss (or PostgreSQL) database.

    The same code and table layout as :class:`PostgresDocstore`; full-text search ranks chunks by
    the words of the query they hold (jieba for Chinese) on a GIN-indexed tsvector named
    ``index_name``.

    Args:
        engine: a SQLAlchemy ``Engine`` on openGauss (``opengauss+psycopg2://``) or PostgreSQL
            (``postgresql+psycopg://``); :meth:`close` leaves it open.
        encrypt_fn: ``str -> str`` applied to chunk text before it is written; needs
            ``enable_bm25=False`` (an index of the text would hold the plaintext).
        decrypt_fn: ``str -> str`` applied to chunk text when it is read; needs ``encrypt_fn``.
        enable_bm25: keep the full-text index. False: ``full_text_search`` returns ``[]``.
        index_name: name of the full-text index, 6 to 64 of ``a-z A-Z 0-9 _ -``.

    Example:
        >>> from sqlalchemy import create_engine
        >>> store = OpenGaussDocstore(engine=create_engine("postgresql+psycopg://user:password@host/db"))
        >>> ids = store.add([MxDocument(page_content="示例文本", document_name="1.docx")], 1)
        >>> [doc.chunk_id for doc in store.full_text_search("文本")] == ids
        True
    """

    _refuses_nul = True

    def __init__(self, engine: Engine, encrypt_fn: TextFn | None = None, decrypt_fn: TextFn | None = None,
                 enable_bm25: bool = True, index_name: str = "chunks_content_bm25") -> None:
        check_instance("engine", engine, Engine)
        if engine.dialect.name not in DIALECTS:
            raise fail("engine", engine, f"an Engine on openGauss or PostgreSQL (dialect in {list(DIALECTS)})")
        self._bm25 = check_bool("enable_bm25", enable_bm25)
        check_pattern("index_name", index_name, INDEX_NAME_PATTERN)
        if self._bm25 and (encrypt_fn is not None or decrypt_fn is not None):
            raise ParameterError(
                "encrypt_fn/decrypt_fn need enable_bm25=False: the full-text index would hold the plaintext of "
                "the encrypted chunks; pass enable_bm25=False to store encrypted chunks"
            )
        # The table has the same layout either way; without BM25 the text is just not indexed.
        super().__init__(engine, _NamedTsvectorIndex(TABLE_NAME, index_name), table_name=TABLE_NAME,
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
