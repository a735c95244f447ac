# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the document-store conformance suite: ``make_store`` and ``store`` per backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mx_rag.storage.document_store import PostgresDocstore, SQLiteDocstore
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from tests.storage.document_store.helpers import MakeStore


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """``make_store(**kwargs)``: a store of the backend; every call opens the same database."""
    stores: list[_SqlDocstore] = []
    if backend == "sqlite":

        def make(**kwargs: Any) -> _SqlDocstore:
            stores.append(SQLiteDocstore(db_path=tmp_path / "sql.db", **kwargs))
            return stores[-1]

    else:
        url = request.getfixturevalue("postgres_url")
        table = request.getfixturevalue("postgres_table")

        def make(**kwargs: Any) -> _SqlDocstore:
            stores.append(PostgresDocstore(url, table_name=table, **kwargs))
            return stores[-1]

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store: MakeStore) -> _SqlDocstore:
    return make_store()
