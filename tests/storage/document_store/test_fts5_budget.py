# SPDX-License-Identifier: Apache-2.0
"""SQLite FTS5 keyword search over its row budget: the rarest words pick the candidates."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.document_store import full_text as ft
from mx_rag.storage.validation import DocumentIds

COMMON = 30  # chunks holding "common" (and "usual" in every third)


def corpus() -> list[tuple[str, int]]:
    """(text, document id): many chunks of common words, a few rare ones."""
    texts = [(f"common words fill chunk number {i}" + (" usual" if i % 3 == 0 else ""), 1) for i in range(COMMON)]
    texts.append(("the zephyr word is rare and common here", 2))
    texts.append(("zephyr again with quokka", 3))
    texts.append(("quokka alone", 3))
    return texts


def fill(store: SQLiteDocstore) -> dict[str, int]:
    ids = {}
    for text, document_id in corpus():
        [ids[text]] = store.add([MxDocument(text, {}, f"d{document_id}.txt")], document_id)
    return ids


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SQLiteDocstore, dict[str, int]]]:
    store = SQLiteDocstore(db_path=tmp_path_factory.mktemp("fts5") / "sql.db")
    ids = fill(store)
    yield store, ids
    store.close()


def exact_bm25(path: Path, tokens: list[str], limit: int) -> list[tuple[int, float]]:
    """FTS5's own ranking of the OR of ``tokens``, read with the sqlite3 module."""
    with sqlite3.connect(path) as conn:
        match = " OR ".join(f'"{t}"' for t in tokens)
        sql = ("SELECT rowid, -bm25(chunks_table_fts) AS s FROM chunks_table_fts WHERE chunks_table_fts MATCH ? "
               "ORDER BY s DESC, rowid LIMIT ?")
        return [(row[0], row[1]) for row in conn.execute(sql, (match, limit))]


def hits(store: SQLiteDocstore, query: str, top_k: int = 10, **kwargs: object) -> list[tuple[int, float]]:
    return [(d.chunk_id, d.metadata["score"]) for d in store.full_text_search(query, top_k=top_k, **kwargs)]  # type: ignore[arg-type]


def test_below_the_budget_the_search_is_exact(db: tuple[SQLiteDocstore, dict[str, int]]) -> None:
    store, _ = db
    found = hits(store, "common zephyr usual", top_k=12)
    exact = exact_bm25(store.db_path, ["common", "zephyr", "usual"], 12)
    assert len(found) == 12
    assert [c for c, _ in found] == [c for c, _ in exact]
    assert [s for _, s in found] == pytest.approx([s for _, s in exact])


def test_above_the_budget_only_chunks_with_the_rarest_words_are_ranked(
    db: tuple[SQLiteDocstore, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = db
    exact = hits(store, "common zephyr usual", top_k=12)
    monkeypatch.setattr(ft, "ROW_BUDGET", 3)  # zephyr (2 chunks) fits, usual (10) and common (31) do not
    monkeypatch.setattr(ft, "PAIR_BUDGET", 3)  # pairs of zephyr and usual: none
    pruned = hits(store, "common zephyr usual", top_k=12)
    rare = {ids["the zephyr word is rare and common here"], ids["zephyr again with quokka"]}
    expected = [pair for pair in exact if pair[0] in rare]
    assert len(expected) == 2
    assert [c for c, _ in pruned] == [c for c, _ in expected]
    # the candidates keep their full BM25 score over all the query's words, as FTS5 computes it
    assert [s for _, s in pruned] == pytest.approx([s for _, s in expected])
    # a filter still applies, on both the filtered and the post-filtered path
    only_3 = hits(store, "common zephyr usual", filter_dict={"document_id": [3]})
    assert [c for c, _ in only_3] == [ids["zephyr again with quokka"]]
    assert hits(store, "common zephyr usual", filter_dict={"document_id": [1, 2, 3]}) == pruned
    scope = DocumentIds([1, 2, 3], share=1.0)  # searched unfiltered first, then filtered
    assert hits(store, "common zephyr usual", filter_dict={"document_id": scope}) == pruned


def test_the_rarest_word_is_matched_even_alone_over_the_budget(
    db: tuple[SQLiteDocstore, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = db
    monkeypatch.setattr(ft, "ROW_BUDGET", 1)
    monkeypatch.setattr(ft, "PAIR_BUDGET", 1)
    assert {c for c, _ in hits(store, "usual common")} == {ids[t] for t, _ in corpus()[:COMMON:3]}
    assert len(hits(store, "common absentword")) == 10  # a word in no chunk is left out of the match
    assert hits(store, "absentword nowhere") == []


def test_chunks_holding_two_of_the_rarest_words_are_candidates(
    db: tuple[SQLiteDocstore, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = db
    monkeypatch.setattr(ft, "ROW_BUDGET", 3)  # the rarest word alone: quokka (2 chunks)
    monkeypatch.setattr(ft, "PAIR_BUDGET", 4)  # pairs of quokka and zephyr (2 chunks each)
    found = {c for c, _ in hits(store, "quokka zephyr common")}
    assert found == {ids["zephyr again with quokka"], ids["quokka alone"]}  # not the chunk of zephyr and common
    monkeypatch.setattr(ft, "PAIR_BUDGET", 40)  # now also common: every chunk holding two of the words
    found = {c for c, _ in hits(store, "quokka zephyr common")}
    assert ids["the zephyr word is rare and common here"] in found


@pytest.mark.parametrize("query", ['zephyr" OR common', "common* NEAR(zephyr usual)", "usual:zephyr ^common",
                                   "'); DROP TABLE chunks_table; -- zephyr common"])
def test_hostile_queries_stay_inert_when_pruned(
    db: tuple[SQLiteDocstore, dict[str, int]], monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    store, ids = db
    monkeypatch.setattr(ft, "ROW_BUDGET", 3)
    monkeypatch.setattr(ft, "PAIR_BUDGET", 3)
    before = store.count()
    assert ids["the zephyr word is rare and common here"] in [c for c, _ in hits(store, query)]
    assert store.count() == before


def test_the_vocabulary_table_is_added_to_an_existing_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sql.db"
    store = SQLiteDocstore(db_path=path)
    ids = fill(store)
    store.close()
    with sqlite3.connect(path) as conn:  # as a database written before the vocabulary table existed
        conn.execute("DROP TABLE chunks_table_fts_vocab")
    store = SQLiteDocstore(db_path=path)
    try:
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT doc FROM chunks_table_fts_vocab WHERE term = 'zephyr'").fetchone() == (2,)
            plan = conn.execute("EXPLAIN QUERY PLAN SELECT doc FROM chunks_table_fts_vocab WHERE term = 'x'").fetchall()
        assert "VIRTUAL TABLE INDEX 1" in str(plan)  # the term constraint goes to fts5vocab: a seek, not a scan
        monkeypatch.setattr(ft, "ROW_BUDGET", 3)
        monkeypatch.setattr(ft, "PAIR_BUDGET", 3)
        assert [c for c, _ in hits(store, "quokka common")] == [ids["quokka alone"], ids["zephyr again with quokka"]]
        # the word counts follow writes: quokka becomes common, zephyr is now the rarer word
        for i in range(5):
            store.add([MxDocument(f"quokka number {i}", {}, "q.txt")], 4)
        found = [c for c, _ in hits(store, "quokka zephyr")]
        assert found[:2] == [ids["zephyr again with quokka"], ids["the zephyr word is rare and common here"]]
        assert len(found) == 2
    finally:
        store.close()


def counts(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(the word counts the writes keep, with '' the chunk count; fts5vocab's, with the index's rows)."""
    with sqlite3.connect(path) as conn:
        kept = dict(conn.execute("SELECT term, doc FROM chunks_table_fts_df"))
        vocab = dict(conn.execute("SELECT term, doc FROM chunks_table_fts_vocab"))
        vocab[""] = conn.execute("SELECT count(*) FROM chunks_table_fts").fetchone()[0]
    return kept, vocab


def test_the_word_counts_follow_adds_updates_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "sql.db"
    store = SQLiteDocstore(db_path=path)
    try:
        ids = fill(store)
        store.add([MxDocument("Café crème with the café's quokka", {}, "c.txt")], 5)
        kept, vocab = counts(path)
        assert kept == vocab and kept["common"] == COMMON + 1 and kept["cafe"] == 1
        store.update([ids["quokka alone"]], ["zephyr alone now"])
        store.delete(1)  # the COMMON chunks: "usual" and "fill" are in no chunk any more
        store.add([MxDocument("!!! ---", {}, "p.txt")], 6)  # a chunk without a word
        store.delete(6)
        kept, vocab = counts(path)
        assert kept == vocab and kept["quokka"] == 2 and kept["zephyr"] == 3 and "usual" not in kept
        assert kept[""] == 4
    finally:
        store.close()


def test_counts_written_past_are_read_from_the_vocabulary_then_counted_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sql.db"
    store = SQLiteDocstore(db_path=path)
    ids = fill(store)
    monkeypatch.setattr(ft, "ROW_BUDGET", 3)
    monkeypatch.setattr(ft, "PAIR_BUDGET", 3)
    with sqlite3.connect(path) as conn:  # a writer that does not keep the counts (an older mx_rag)
        for i in range(5):
            conn.execute("INSERT INTO chunks_table (document_id, document_name, chunk_content, chunk_metadata) "
                         "VALUES (4, 'q.txt', ?, '{}')", (f"quokka number {i}",))  # fmt: skip
            conn.execute("INSERT INTO chunks_table_fts (rowid, tokens) VALUES (last_insert_rowid(), ?)",
                         (f"quokka number {i}",))  # fmt: skip
    try:  # quokka is in 7 chunks now, zephyr in 2: the rarer word is zephyr, as the vocabulary says
        found = [c for c, _ in hits(store, "quokka zephyr")]
        assert found[:2] == [ids["zephyr again with quokka"], ids["the zephyr word is rare and common here"]]
        kept, vocab = counts(path)
        assert kept["quokka"] == 2 and vocab["quokka"] == 7
    finally:
        store.close()
    SQLiteDocstore(db_path=path).close()  # the next open counts afresh
    kept, vocab = counts(path)
    assert kept == vocab


def test_a_database_written_before_the_word_counts_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "sql.db"
    store = SQLiteDocstore(db_path=path)
    fill(store)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE chunks_table_fts_df")
    SQLiteDocstore(db_path=path).close()
    kept, vocab = counts(path)
    assert kept == vocab and kept["zephyr"] == 2
