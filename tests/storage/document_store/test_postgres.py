# SPDX-License-Identifier: Apache-2.0
"""What only PostgresDocstore does: URLs and engines, table names, PostgreSQL's text rules."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, make_url, text

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store import MxDocument, PostgresDocstore


def test_a_plain_postgresql_url_means_psycopg(postgres_url: str, postgres_table: str) -> None:
    url = make_url(postgres_url).set(drivername="postgresql")
    store = PostgresDocstore(url.render_as_string(hide_password=False), table_name=postgres_table)
    try:
        assert store.engine.dialect.driver == "psycopg"
        assert store.add([MxDocument("hello")], document_id=1) == [1]
    finally:
        store.close()


def test_a_shared_engine_stays_open(postgres_url: str, postgres_table: str) -> None:
    engine = create_engine(postgres_url)
    try:
        store = PostgresDocstore(engine, table_name=postgres_table)
        store.add([MxDocument("kept")], document_id=1)
        store.close()
        with engine.connect() as conn:
            assert conn.execute(text(f"SELECT count(*) FROM {postgres_table}")).scalar_one() == 1
        indexes = {ix["name"] for ix in inspect(engine).get_indexes(postgres_table)}
        assert {f"ix_{postgres_table}_document_id", f"ix_{postgres_table}_search_vector"} <= indexes
    finally:
        engine.dispose()


def test_two_tables_in_one_database_are_independent(postgres_url: str, postgres_table: str) -> None:
    other = f"{postgres_table}_b"
    first = PostgresDocstore(postgres_url, table_name=postgres_table)
    second = PostgresDocstore(postgres_url, table_name=other)
    try:
        first.add([MxDocument("alpha")], document_id=1)
        assert second.count() == 0 and second.full_text_search("alpha") == []
    finally:
        with second.engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {other}"))
        first.close()
        second.close()


@pytest.mark.parametrize(
    "url_or_engine", ["sqlite:///x.db", "not a url", 42, "mysql+pymysql://u:p@localhost/db"]
)
def test_other_databases_are_refused(url_or_engine: object) -> None:
    with pytest.raises(ParameterError, match="url_or_engine"):
        PostgresDocstore(url_or_engine)  # type: ignore[arg-type]


def test_a_sqlite_engine_is_refused() -> None:
    engine = create_engine("sqlite://")
    with pytest.raises(ParameterError, match="PostgreSQL"):
        PostgresDocstore(engine)


def test_the_password_is_not_echoed() -> None:
    with pytest.raises(ParameterError) as info:
        PostgresDocstore("postgresql+psycopg://user:hunter2@@@host:notaport/db")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("name", ["Chunks", "1abc", "a-b", "x" * 49, "", "a;drop"])
def test_table_names_are_checked(postgres_url: str, name: str) -> None:
    with pytest.raises(ParameterError, match="table_name"):
        PostgresDocstore(postgres_url, table_name=name)


def test_nul_characters_are_refused(postgres_url: str, postgres_table: str) -> None:
    store = PostgresDocstore(postgres_url, table_name=postgres_table)
    try:
        with pytest.raises(ParameterError, match="NUL"):
            store.add([MxDocument("ok"), MxDocument("bad\x00text")], document_id=1)
        with pytest.raises(ParameterError, match="NUL"):
            store.update([1], ["\x00"])
        assert store.count() == 0
    finally:
        store.close()


def test_an_unreachable_server_raises_storage_error(postgres_url: str) -> None:
    url = make_url(postgres_url).set(host="127.0.0.1", port=1)
    with pytest.raises(StorageError, match="creating table"):
        PostgresDocstore(url, table_name="never_created")
