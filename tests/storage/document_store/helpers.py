# SPDX-License-Identifier: Apache-2.0
"""Helpers of the document-store tests."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from mx_rag.storage.document_store.sql_storage import _SqlDocstore

DATA = Path(__file__).resolve().parents[2] / "data" / "storage"

MakeStore = Callable[..., _SqlDocstore]


def encrypt(value: str) -> str:
    """A reversible stand-in for a real cipher."""
    return base64.b64encode(value.encode("utf-8")).decode("ascii")


def decrypt(value: str) -> str:
    return base64.b64decode(value).decode("utf-8")


def indexed_rows(store: _SqlDocstore) -> int:
    """How many chunks the full-text index holds."""
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            return int(conn.execute(text(f"SELECT count(*) FROM {store.table_name}_fts")).scalar_one())
        query = f"SELECT count(*) FROM {store.table_name} WHERE search_vector IS NOT NULL"
        return int(conn.execute(text(query)).scalar_one())


def excerpt() -> list[dict[str, str]]:
    """Paragraphs of the Debian Reference: ``section``, ``lang`` (en, zh), ``title``, ``text``."""
    lines = (DATA / "debian_reference_excerpt.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


class _CountingCursor:
    """A driver cursor that records each statement before running it."""

    def __init__(self, cursor: Any, statements: list[str]) -> None:
        self._cursor, self._statements = cursor, statements

    def execute(self, statement: str, *args: Any) -> Any:
        self._statements.append(statement)
        return self._cursor.execute(statement, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextmanager
def recorded_selects(store: _SqlDocstore, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SELECT the store sends to its database driver while the block runs.

    Counted at the driver's cursor, below SQLAlchemy, so statements the store runs on a raw pooled
    connection (its ``search_many`` hot path) are counted as well as Core ones.
    """
    statements: list[str] = []
    with monkeypatch.context() as patch:
        pooled = store.engine.raw_connection

        def counting_connection() -> Any:
            connection = pooled()
            cursor_of = connection.cursor
            connection.cursor = lambda *args, **kwargs: _CountingCursor(cursor_of(*args, **kwargs), statements)
            return connection

        patch.setattr(store.engine, "raw_connection", counting_connection)
        selects: list[str] = []
        try:
            yield selects
        finally:
            selects.extend(s for s in statements if s.lstrip().upper().startswith("SELECT"))
