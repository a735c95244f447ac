# SPDX-License-Identifier: Apache-2.0
"""The chunk table, and how an ``MxDocument`` becomes a row and back.

=================  ===========================================================================
chunk_id           integer primary key; AUTOINCREMENT on SQLite, so ids are never reused
document_id        integer, indexed
document_name      text (at most 1024 characters)
chunk_content      text, encrypted with ``encrypt_fn`` when one is given
chunk_metadata     JSON
create_time        timestamp, set by the database
search_vector      PostgreSQL only: the tsvector of the full-text index
=================  ===========================================================================

The table lives in its own ``MetaData``, so other components can keep their tables in the same
database file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from sqlalchemy import JSON, BigInteger, Column, DateTime, Index, Integer, MetaData, Row, String, Table, Text, func

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store.base_storage import MAX_CHUNKS_NUM, MAX_PAGE_CONTENT, MxDocument
from mx_rag.utils.checks import apply_text_fn, check_int, check_str, fail

logger = logging.getLogger(__name__)

TextFn = Callable[[str], str]

MAX_ID: Final = 2**63 - 1
MAX_DOCUMENT_NAME = 1024
MAX_ENCRYPTED_CONTENT = 128 * 1024 * 1024
ROW_COLUMNS = ("chunk_id", "document_id", "document_name", "chunk_content", "chunk_metadata")


class ChunkRow(Protocol):
    """What :meth:`ChunkCodec.to_document` reads from a row (a SQLAlchemy ``Row`` or a driver tuple)."""

    @property
    def chunk_id(self) -> int: ...
    @property
    def document_id(self) -> int: ...
    @property
    def document_name(self) -> str: ...
    @property
    def chunk_content(self) -> str: ...
    @property
    def chunk_metadata(self) -> dict[str, Any] | None: ...


def chunk_table(table_name: str, extra: Sequence[Column[Any] | Index]) -> Table:
    """The chunk table in a fresh ``MetaData`` (its index names carry the table name)."""
    return Table(
        table_name,
        MetaData(),
        Column("chunk_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column("document_id", BigInteger, nullable=False),
        Column("document_name", String(MAX_DOCUMENT_NAME), nullable=False),
        Column("chunk_content", Text, nullable=False),
        Column("chunk_metadata", JSON, nullable=False),
        Column("create_time", DateTime, nullable=False, server_default=func.now()),
        Index(f"ix_{table_name}_document_id", "document_id"),
        *extra,
        sqlite_autoincrement=True,
    )


def check_ids(name: str, ids: Any) -> list[int]:
    """A list of at most 1,000,000 ids, each an int in [0, 2**63 - 1]."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise fail(name, ids, "a list of ints")
    if len(ids) > MAX_CHUNKS_NUM:
        raise ParameterError(f"{name} may hold at most {MAX_CHUNKS_NUM} ids, got {len(ids)}")
    for i, value in enumerate(ids):
        check_int(f"{name}[{i}]", value, 0, MAX_ID)
    return list(ids)


def _check_fn(name: str, fn: Any) -> TextFn | None:
    if fn is not None and not callable(fn):
        raise fail(name, fn, "a callable taking and returning a str, or None")
    return fn


class ChunkCodec:
    """Validates chunks and converts them to row parameters and back (encrypting the text).

    Args:
        encrypt_fn: ``str -> str`` applied to chunk text before it is written.
        decrypt_fn: ``str -> str`` applied to chunk text after it is read. Optional with
            ``encrypt_fn`` (as in the original): without it chunks read back as the stored
            ciphertext, and a warning is logged once, here. Refused without ``encrypt_fn``: it
            would be applied to stored plaintext.
        nul_free: the name of a database that cannot store NUL characters in text, or None.
    """

    def __init__(self, encrypt_fn: TextFn | None, decrypt_fn: TextFn | None, nul_free: str | None = None) -> None:
        self._encrypt_fn = _check_fn("encrypt_fn", encrypt_fn)
        self._decrypt_fn = _check_fn("decrypt_fn", decrypt_fn)
        if decrypt_fn is not None and encrypt_fn is None:
            raise ParameterError(
                "decrypt_fn needs encrypt_fn: without it chunks are stored as plaintext, which decrypt_fn "
                "would be applied to on every read"
            )
        if encrypt_fn is not None and decrypt_fn is None:
            logger.warning(
                "encrypt_fn is given without decrypt_fn: chunks are stored encrypted and read back as the "
                "stored ciphertext (page_content is what encrypt_fn returned)"
            )
        self._nul_free = nul_free

    @property
    def encrypts(self) -> bool:
        return self._encrypt_fn is not None

    def check_text(self, name: str, text: str) -> None:
        if self._nul_free and "\x00" in text:
            raise ParameterError(f"{name} contains a NUL character, which {self._nul_free} cannot store")

    def encrypt(self, text: str) -> str:
        return apply_text_fn("encrypt_fn", self._encrypt_fn, text, MAX_ENCRYPTED_CONTENT)

    def decrypt(self, text: str) -> str:
        return apply_text_fn("decrypt_fn", self._decrypt_fn, text, MAX_PAGE_CONTENT)

    def row_params(self, index: int, doc: Any, document_id: int) -> dict[str, Any]:
        """The insert parameters of ``documents[index]`` (validated, text encrypted)."""
        where = f"documents[{index}]"
        if not isinstance(doc, MxDocument):
            raise fail(where, doc, "an MxDocument")
        check_str(f"{where}.document_name", doc.document_name, 0, MAX_DOCUMENT_NAME)
        self.check_text(f"{where}.page_content", doc.page_content)
        self.check_text(f"{where}.document_name", doc.document_name)
        try:
            json.dumps(doc.metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"{where}.metadata must be JSON-serialisable: {exc}") from exc
        return {
            "document_id": document_id,
            "document_name": doc.document_name,
            "chunk_content": self.encrypt(doc.page_content),
            "chunk_metadata": doc.metadata,
        }

    def to_document(self, row: ChunkRow | Row[Any], **extra_metadata: Any) -> MxDocument:
        """The ``MxDocument`` of a row (text decrypted, ``extra_metadata`` added to a copy)."""
        metadata = dict(row.chunk_metadata or {})
        metadata.update(extra_metadata)
        return MxDocument(
            page_content=self.decrypt(row.chunk_content),
            metadata=metadata,
            document_name=row.document_name,
            chunk_id=row.chunk_id,
            document_id=row.document_id,
        )
