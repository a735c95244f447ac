# SPDX-License-Identifier: Apache-2.0
"""The document-store conformance suite: one behaviour contract for every ``Docstore``.

A backend proves itself by subclassing ``DocstoreConformance`` and providing a ``make_store``
fixture: a callable ``make_store(**kwargs) -> Docstore`` that opens the backend's store private
to the running test (every call opens the same one; ``kwargs`` are the backend's constructor
options, unused by this suite). Override ``full_text_rows`` to let the suite check that the
full-text index follows adds, updates, deletes and failed adds. Needs pytest (a test
dependency, not one of mx_rag's)::

    import pytest
    from mx_rag.testing.document_store import DocstoreConformance

    class TestMyDocstore(DocstoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            return lambda **kwargs: MyDocstore(tmp_path / "chunks.db", **kwargs)

mx_rag runs it on SQLiteDocstore and PostgresDocstore, with the SQL-only checks (rollback
mid-batch, one query per ``search_many``, encryption) added in
tests/storage/document_store/test_conformance.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store.base_storage import Docstore, MxDocument

__all__ = ["TRICKY", "DocstoreConformance", "MakeStore", "chunks", "with_ids"]

MakeStore = Callable[..., Docstore]

TRICKY = [
    MxDocument("plain ASCII text", {"source": "/docs/a.txt", "page": 1}, "a.txt"),
    MxDocument("中文内容：数据库的全文检索。", {"标题": "第一章", "nested": {"list": [1, 2.5, None, True]}}, "中文.md"),
    MxDocument("emoji 😀🚀 and combining é", {"tags": ["😀", "ü"], "deep": {"a": {"b": {"c": "d"}}}}, "e.md"),
    MxDocument("", {}, ""),
    MxDocument("quotes ' \" \\ and\nnewlines\ttabs", {"empty": {}, "zero": 0, "neg": -1.5e-9}, "q'\".md"),
]
"""Texts, metadata and names that break naive escaping, encodings or JSON handling."""


def chunks(n: int, tag: str = "chunk") -> list[MxDocument]:
    """``n`` distinct chunks: text ``"<tag> <i> text"``, metadata ``{"i": i, "tag": tag}``."""
    return [MxDocument(f"{tag} {i} text", {"i": i, "tag": tag}, f"{tag}.txt") for i in range(n)]


def with_ids(doc: MxDocument, chunk_id: int, document_id: int) -> MxDocument:
    """``doc`` as the store returns it once stored under ``chunk_id`` of ``document_id``."""
    return MxDocument(doc.page_content, doc.metadata, doc.document_name, chunk_id, document_id)


class DocstoreConformance:
    """Subclass this and provide the ``make_store`` fixture (see the module docstring)."""

    @pytest.fixture
    def store(self, make_store: MakeStore) -> Docstore:
        return make_store()

    def full_text_rows(self, store: Docstore) -> int | None:
        """How many chunks ``store``'s full-text index holds; None (the default) skips those checks."""
        return None

    def _check_indexed(self, store: Docstore, expected: int) -> None:
        rows = self.full_text_rows(store)
        assert rows is None or rows == expected, f"the full-text index holds {rows} chunks, expected {expected}"

    # -- writing and reading -------------------------------------------------------------------

    def test_is_a_docstore(self, store: Docstore) -> None:
        assert isinstance(store, Docstore)
        assert store.count() == 0 and store.get_all_chunk_id() == [] and store.get_all_document_id() == []

    def test_add_returns_unique_ids_in_input_order(self, store: Docstore) -> None:
        first = store.add(chunks(5, "first"), document_id=1)
        second = store.add(chunks(3, "second"), document_id=2)
        assert len(set(first + second)) == 8
        assert first == sorted(first) and second == sorted(second) and min(second) > max(first)
        found = store.search_many(first)
        assert [found[i].metadata["i"] for i in first] == [0, 1, 2, 3, 4]

    def test_ids_are_not_reused_after_delete(self, store: Docstore) -> None:
        old = store.add(chunks(3), document_id=1)
        store.delete(1)
        assert store.add(chunks(1), document_id=1)[0] > max(old)

    def test_round_trip_is_exact(self, store: Docstore) -> None:
        ids = store.add(TRICKY, document_id=7)
        expected = [with_ids(doc, i, 7) for doc, i in zip(TRICKY, ids, strict=True)]
        assert [store.search(i) for i in ids] == expected
        assert store.search_many(ids) == dict(zip(ids, expected, strict=True))
        assert store.search_by_document_id(7) == expected

    def test_reads_of_missing_ids(self, store: Docstore) -> None:
        ids = store.add(chunks(2), document_id=1)
        assert store.search(max(ids) + 100) is None
        assert set(store.search_many([*ids, 10**9])) == set(ids)
        assert store.search_many([]) == {}
        assert store.search_by_document_id(99) == []

    def test_delete_returns_ids_and_removes_rows_and_index(self, store: Docstore) -> None:
        kept = store.add(chunks(2, "kept"), document_id=1)
        gone = store.add(chunks(3, "gone"), document_id=2)
        self._check_indexed(store, 5)
        assert store.delete(2) == gone
        assert store.count() == 2
        self._check_indexed(store, 2)
        assert store.search_many(gone) == {} and set(store.search_many(kept)) == set(kept)
        assert store.full_text_search("gone") == []
        assert store.delete(2) == []

    def test_listing_and_count(self, store: Docstore) -> None:
        ids = store.add(chunks(2), document_id=30) + store.add(chunks(3), document_id=4) + store.add(chunks(1), 30)
        assert store.get_all_chunk_id() == sorted(ids)
        assert store.get_all_document_id() == [4, 30]
        assert store.count() == 6

    def test_update_replaces_text_and_index(self, store: Docstore) -> None:
        ids = store.add(chunks(3), document_id=1)
        store.update([ids[2], ids[0]], ["zebra crossing", "新的中文内容"])
        assert store.search(ids[2]).page_content == "zebra crossing"  # type: ignore[union-attr]
        assert store.search(ids[0]).metadata == {"i": 0, "tag": "chunk"}  # type: ignore[union-attr]
        assert [d.chunk_id for d in store.full_text_search("zebra")] == [ids[2]]
        assert [d.chunk_id for d in store.full_text_search("中文")] == [ids[0]]
        assert {d.chunk_id for d in store.full_text_search("chunk", top_k=10)} == {ids[1]}
        self._check_indexed(store, 3)

    def test_update_refuses_bad_input_and_changes_nothing(self, store: Docstore) -> None:
        ids = store.add(chunks(2), document_id=1)
        with pytest.raises(ParameterError, match="texts"):
            store.update(ids, ["only one"])
        with pytest.raises(ParameterError, match="repeat"):
            store.update([ids[0], ids[0]], ["a", "b"])
        with pytest.raises(ParameterError, match="do not exist"):
            store.update([ids[0], 10**9], ["changed", "missing"])
        assert store.search(ids[0]).page_content == "chunk 0 text"  # type: ignore[union-attr]
        store.update([], [])

    def test_failed_add_writes_nothing(self, store: Docstore) -> None:
        store.add(chunks(2), document_id=1)
        bad = [*chunks(50, "more"), MxDocument("last", {"not json": object()}, "bad.txt")]
        with pytest.raises(ParameterError, match=r"documents\[50\]\.metadata"):
            store.add(bad, document_id=2)
        assert store.count() == 2 and store.get_all_document_id() == [1]
        self._check_indexed(store, 2)

    # -- threads -------------------------------------------------------------------------------

    def test_concurrent_adds_get_disjoint_ids(self, store: Docstore) -> None:
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

    # -- bad input -----------------------------------------------------------------------------

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
    def test_bad_arguments(self, store: Docstore, call: Callable[[Any], Any], match: str) -> None:
        with pytest.raises(ParameterError, match=match):
            call(store)
        assert store.count() == 0

    def test_unencodable_text_is_refused(self, store: Docstore) -> None:
        with pytest.raises(ParameterError, match="UTF-8"):
            store.add([MxDocument("bad \udcff surrogate")], document_id=1)
        assert store.count() == 0
