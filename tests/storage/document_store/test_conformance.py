# SPDX-License-Identifier: Apache-2.0
"""The document-store conformance suite (``mx_rag.testing.document_store``) on SQLiteDocstore and
PostgresDocstore, plus what only the SQL stores promise: a database failure mid-batch rolls back,
``search_many`` is one query, encryption keeps no plaintext, a lost table is a ``StorageError``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import event, text

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store import Docstore
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from mx_rag.testing.document_store import TRICKY, DocstoreConformance, chunks, with_ids
from tests.storage.document_store.helpers import MakeStore, decrypt, encrypt, indexed_rows, recorded_selects


class TestSqlDocstores(DocstoreConformance):
    def full_text_rows(self, store: Docstore) -> int | None:
        assert isinstance(store, _SqlDocstore)
        return indexed_rows(store)

    @pytest.mark.parametrize("fail_on", ["third chunk batch", "full-text rows"])
    def test_database_failure_mid_add_rolls_back(self, store: _SqlDocstore, fail_on: str) -> None:
        """insertmanyvalues sends 1,000 rows per INSERT: fail after two batches are in the database."""
        store.add(chunks(2), document_id=1)
        inserts: list[str] = []

        def explode(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if not statement.startswith("INSERT"):
                return
            inserts.append(statement)
            third_batch = fail_on == "third chunk batch" and len(inserts) == 3
            if third_batch or (fail_on == "full-text rows" and "_fts" in statement):
                raise RuntimeError("simulated database failure")

        if fail_on == "full-text rows" and store.engine.dialect.name != "sqlite":
            pytest.skip("PostgreSQL writes the full-text vector in the chunk INSERT itself")
        event.listen(store.engine, "before_cursor_execute", explode)
        try:
            with pytest.raises(RuntimeError, match="simulated"):
                store.add(chunks(2500, "big"), document_id=2)
        finally:
            event.remove(store.engine, "before_cursor_execute", explode)
        assert len(inserts) >= 3
        assert store.count() == 2 and indexed_rows(store) == 2 and store.get_all_document_id() == [1]

    def test_search_many_is_one_query(self, store: _SqlDocstore, monkeypatch: pytest.MonkeyPatch) -> None:
        ids = store.add(chunks(60), document_id=1)
        with recorded_selects(store, monkeypatch) as one_list:
            found = store.search_many(ids[::-1])
        with recorded_selects(store, monkeypatch) as selects:
            store.search_many(list(range(1, 10_002)))  # more than one IN list
        one = len(one_list)
        assert len(found) == 60 and one == 1 and len(selects) == 2

    def test_encryption_round_trip_without_plaintext_index(self, make_store: MakeStore) -> None:
        store = make_store(encrypt_fn=encrypt, decrypt_fn=decrypt)
        ids = store.add(TRICKY, document_id=3)
        assert store.search_many(ids) == {i: with_ids(d, i, 3) for d, i in zip(TRICKY, ids, strict=True)}
        with store.engine.connect() as conn:
            stored = conn.execute(text(f"SELECT chunk_content FROM {store.table_name} ORDER BY chunk_id")).scalars()
            assert list(stored) == [encrypt(d.page_content) for d in TRICKY]
        assert indexed_rows(store) == 0
        with pytest.raises(ParameterError, match="encrypt_fn"):
            store.full_text_search("plain")
        store.update([ids[0]], ["secret words"])
        assert store.search(ids[0]).page_content == "secret words" and indexed_rows(store) == 0  # type: ignore[union-attr]


    def test_encrypt_fn_alone_stores_and_reads_back_ciphertext(self, make_store: MakeStore,
                                                                caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level(logging.WARNING, logger="mx_rag.storage.document_store"):
            store = make_store(encrypt_fn=encrypt)
            warnings_at_construction = [r.getMessage() for r in caplog.records]
            ids = store.add(TRICKY, document_id=3)
            store.update([ids[0]], ["secret words"])
            found = store.search_many(ids)
        assert len(warnings_at_construction) == 1 and "without decrypt_fn" in warnings_at_construction[0]
        assert len(caplog.records) == 1, "only the construction warns"
        expected = [encrypt("secret words")] + [encrypt(d.page_content) for d in TRICKY[1:]]
        assert [found[i].page_content for i in ids] == expected
        assert [found[i].metadata for i in ids] == [d.metadata for d in TRICKY]
        with store.engine.connect() as conn:
            stored = conn.execute(text(f"SELECT chunk_content FROM {store.table_name} ORDER BY chunk_id")).scalars()
            assert list(stored) == expected
        assert indexed_rows(store) == 0
        with pytest.raises(ParameterError, match="encrypt_fn"):
            store.full_text_search("secret")
        reader = make_store(encrypt_fn=encrypt, decrypt_fn=decrypt)  # the same database, read with the key
        assert reader.search(ids[0]).page_content == "secret words"  # type: ignore[union-attr]


    def test_encryption_functions_are_checked(self, make_store: MakeStore) -> None:
        with pytest.raises(ParameterError, match="decrypt_fn needs encrypt_fn"):
            make_store(decrypt_fn=decrypt)
        with pytest.raises(ParameterError, match="encrypt_fn"):
            make_store(encrypt_fn="rot13", decrypt_fn=decrypt)
        to_bytes = make_store(encrypt_fn=lambda s: s.encode(), decrypt_fn=decrypt)
        with pytest.raises(ParameterError, match="result of encrypt_fn"):
            to_bytes.add(chunks(1), document_id=1)
        plain = make_store()
        plain.add(chunks(1), document_id=1)
        bad_decrypt = make_store(encrypt_fn=encrypt, decrypt_fn=lambda s: None)
        with pytest.raises(ParameterError, match="result of decrypt_fn"):
            bad_decrypt.search_by_document_id(1)

    def test_a_lost_database_raises_storage_error(self, store: _SqlDocstore) -> None:
        with store.engine.begin() as conn:
            conn.execute(text(f"DROP TABLE {store.table_name}"))
        with pytest.raises(StorageError, match=store.table_name):
            store.count()
