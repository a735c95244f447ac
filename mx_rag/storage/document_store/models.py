# SPDX-License-Identifier: Apache-2.0
"""``ChunkModel``: the chunk table of the SQL chunk stores as a SQLAlchemy ORM class.

The stores themselves work on the table (``chunk_rows.chunk_table``); this class maps the same
layout (``chunks_table``: ``chunk_id``, ``document_id``, ``document_name``, ``chunk_content``,
``chunk_metadata``, ``create_time``) for programs that query it with an ORM session.

Example:
    >>> from sqlalchemy import select
    >>> from sqlalchemy.orm import Session
    >>> with Session(store.engine) as session:
    ...     names = session.scalars(select(ChunkModel.document_name).distinct()).all()
"""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from mx_rag.storage.document_store.chunk_rows import chunk_table

__all__ = ["ChunkModel"]


class _Base(DeclarativeBase):
    pass


class ChunkModel(_Base):
    """One row of ``chunks_table`` (the table of ``SQLiteDocstore``, and of ``PostgresDocstore`` and
    ``OpenGaussDocstore`` under their default table name)."""

    __table__ = chunk_table("chunks_table", [])
