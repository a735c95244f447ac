# SPDX-License-Identifier: Apache-2.0
"""The Docstore conformance suite: every test runs on SQLiteDocstore and PostgresDocstore."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from sqlalchemy import event, text

from mx_rag.errors import ParameterError, StorageError
from mx_rag.storage.document_store import Docstore, MxDocument
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from tests.storage.document_store.helpers import MakeStore, decrypt, encrypt, indexed_rows, recorded_selects

TRICKY = [
    MxDocument("plain ASCII text", {"source": "/docs/a.txt", "page": 1}, "a.txt"),
    MxDocument("中文内容：数据库的全文检索。", {"标题": "第一章", "nested": {"list": [1, 2.5, None, True]}}, "中文.md"),
    MxDocument("emoji 😀🚀 and combining é", {"tags": ["😀", "ü"], "deep": {"a": {"b": {"c": "d"}}}}, "e.md"),
    MxDocument("", {}, ""),
    MxDocument("quotes ' \" \\ and\nnewlines\ttabs", {"empty": {}, "zero": 0, "neg": -1.5e-9}, "q'\".md"),
]


def chunks(n: int, tag: str = "chunk") -> list[MxDocument]:
    return [MxDocument(f"{tag} {i} text", {"i": i, "tag": tag}, f"{tag}.txt") for i in range(n)]


def with_ids(doc: MxDocument, chunk_id: int, document_id: int) -> MxDocument:
    return MxDocument(doc.page_content, doc.metadata, doc.document_name, chunk_id, document_id)


def test_is_a_docstore(store: _SqlDocstore) -> None:
    assert isinstance(store, Docstore)
    assert store.count() == 0 and store.get_all_chunk_id() == [] and store.get_all_document_id() == []


def test_add_returns_unique_ids_in_input_order(store: _SqlDocstore) -> None:
    first = store.add(chunks(5, "first"), document_id=1)
    second = store.add(chunks(3, "second"), document_id=2)
    assert len(set(first + second)) == 8
    assert first == sorted(first) and second == sorted(second) and min(second) > max(first)
    found = store.search_many(first)
    assert [found[i].metadata["i"] for i in first] == [0, 1, 2, 3, 4]


def test_ids_are_not_reused_after_delete(store: _SqlDocstore) -> None:
    old = store.add(chunks(3), document_id=1)
    store.delete(1)
    assert store.add(chunks(1), document_id=1)[0] > max(old)


def test_round_trip_is_exact(store: _SqlDocstore) -> None:
    ids = store.add(TRICKY, document_id=7)
    expected = [with_ids(doc, i, 7) for doc, i in zip(TRICKY, ids, strict=True)]
    assert [store.search(i) for i in ids] == expected
    assert store.search_many(ids) == dict(zip(ids, expected, strict=True))
    assert store.search_by_document_id(7) == expected


def test_reads_of_missing_ids(store: _SqlDocstore) -> None:
    ids = store.add(chunks(2), document_id=1)
    assert store.search(max(ids) + 100) is None
    assert set(store.search_many([*ids, 10**9])) == set(ids)
    assert store.search_many([]) == {}
    assert store.search_by_document_id(99) == []


def test_delete_returns_ids_and_removes_rows_and_index(store: _SqlDocstore) -> None:
    kept = store.add(chunks(2, "kept"), document_id=1)
    gone = store.add(chunks(3, "gone"), document_id=2)
    assert indexed_rows(store) == 5
    assert store.delete(2) == gone
    assert store.count() == 2 and indexed_rows(store) == 2
    assert store.search_many(gone) == {} and set(store.search_many(kept)) == set(kept)
    assert store.full_text_search("gone") == []
    assert store.delete(2) == []


def test_listing_and_count(store: _SqlDocstore) -> None:
    ids = store.add(chunks(2), document_id=30) + store.add(chunks(3), document_id=4) + store.add(chunks(1), 30)
    assert store.get_all_chunk_id() == sorted(ids)
    assert store.get_all_document_id() == [4, 30]
    assert store.count() == 6


def test_update_replaces_text_and_index(store: _SqlDocstore) -> None:
    ids = store.add(chunks(3), document_id=1)
    store.update([ids[2], ids[0]], ["zebra crossing", "新的中文内容"])
    assert store.search(ids[2]).page_content == "zebra crossing"  # type: ignore[union-attr]
    assert store.search(ids[0]).metadata == {"i": 0, "tag": "chunk"}  # type: ignore[union-attr]
    assert [d.chunk_id for d in store.full_text_search("zebra")] == [ids[2]]
    assert [d.chunk_id for d in store.full_text_search("中文")] == [ids[0]]
    assert {d.chunk_id for d in store.full_text_search("chunk", top_k=10)} == {ids[1]}
    assert indexed_rows(store) == 3


def test_update_refuses_bad_input_and_changes_nothing(store: _SqlDocstore) -> None:
    ids = store.add(chunks(2), document_id=1)
    with pytest.raises(ParameterError, match="texts"):
        store.update(ids, ["only one"])
    with pytest.raises(ParameterError, match="repeat"):
        store.update([ids[0], ids[0]], ["a", "b"])
    with pytest.raises(ParameterError, match="do not exist"):
        store.update([ids[0], 10**9], ["changed", "missing"])
    assert store.search(ids[0]).page_content == "chunk 0 text"  # type: ignore[union-attr]
    store.update([], [])


def test_failed_add_writes_nothing(store: _SqlDocstore) -> None:
    store.add(chunks(2), document_id=1)
    bad = [*chunks(50, "more"), MxDocument("last", {"not json": object()}, "bad.txt")]
    with pytest.raises(ParameterError, match=r"documents\[50\]\.metadata"):
        store.add(bad, document_id=2)
    assert store.count() == 2 and indexed_rows(store) == 2 and store.get_all_document_id() == [1]


@pytest.mark.parametrize("fail_on", ["third chunk batch", "full-text rows"])
def test_database_failure_mid_add_rolls_back(store: _SqlDocstore, fail_on: str) -> None:
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


def test_search_many_is_one_query(store: _SqlDocstore, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = store.add(chunks(60), document_id=1)
    with recorded_selects(store, monkeypatch) as one_list:
        found = store.search_many(ids[::-1])
    with recorded_selects(store, monkeypatch) as selects:
        store.search_many(list(range(1, 10_002)))  # more than one IN list
    one = len(one_list)
    assert len(found) == 60 and one == 1 and len(selects) == 2


def test_concurrent_adds_get_disjoint_ids(store: _SqlDocstore) -> None:
    results: dict[tuple[int, int], list[int]] = {}
    errors: list[BaseException] = []

    def writer(thread: int) -> None:
        try:
            for round_ in range(10):
                docs = chunks(20, f"t{thread}r{round_}")
                results[thread, round_] = store.add(docs, document_id=thread)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    all_ids = [i for ids in results.values() for i in ids]
    assert len(all_ids) == len(set(all_ids)) == 1600 == store.count()
    found = store.search_many(all_ids)
    for (thread, round_), ids in results.items():
        assert [found[i].metadata for i in ids] == [{"i": i, "tag": f"t{thread}r{round_}"} for i in range(20)]
        assert all(found[i].document_id == thread for i in ids)


def test_encryption_round_trip_without_plaintext_index(make_store: MakeStore) -> None:
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


def test_encrypt_fn_alone_stores_and_reads_back_ciphertext(make_store: MakeStore,
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


def test_encryption_functions_are_checked(make_store: MakeStore) -> None:
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


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.add(chunks(1), document_id=-1), "document_id"),
        (lambda s: s.add(chunks(1), document_id="1"), "document_id"),
        (lambda s: s.add(chunks(1), document_id=True), "document_id"),
        (lambda s: s.add([], document_id=1), "documents"),
        (lambda s: s.add("text", document_id=1), "documents"),
        (lambda s: s.add([{"page_content": "x"}], document_id=1), r"documents\[0\]"),
        (lambda s: s.add([MxDocument("x", {}, "n" * 1025)], document_id=1), "document_name"),
        (lambda s: s.add([MxDocument("x", {"f": float("nan")})], document_id=1), "metadata"),
        (lambda s: s.search(-1), "chunk_id"),
        (lambda s: s.search_many([1, "2"]), r"chunk_ids\[1\]"),
        (lambda s: s.delete(None), "document_id"),
        (lambda s: s.search_by_document_id(1.5), "document_id"),
        (lambda s: s.update([1], "x"), "texts"),
        (lambda s: s.full_text_search(123), "query"),
    ],
)
def test_bad_arguments(store: _SqlDocstore, call: Any, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        call(store)
    assert store.count() == 0


def test_unencodable_text_is_refused(store: _SqlDocstore) -> None:
    with pytest.raises(ParameterError, match="UTF-8"):
        store.add([MxDocument("bad \udcff surrogate")], document_id=1)
    assert store.count() == 0


def test_a_lost_database_raises_storage_error(store: _SqlDocstore) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(f"DROP TABLE {store.table_name}"))
    with pytest.raises(StorageError, match=store.table_name):
        store.count()
