# SPDX-License-Identifier: Apache-2.0
"""Full-text search conformance (SQLite FTS5 and PostgreSQL tsvector) on Debian Reference paragraphs."""

from __future__ import annotations

import pytest

from mx_rag.errors import ParameterError
from mx_rag.storage.document_store import MxDocument
from mx_rag.storage.document_store.sql_storage import _SqlDocstore
from tests.storage.document_store.helpers import excerpt

SECTIONS = sorted({rec["section"] for rec in excerpt()})

ENGLISH_QUERIES = [
    ("How do I switch between virtual consoles with the Alt and F1 keys?", "1.1.6"),
    ("Why does the system need a proper shutdown before the power is turned off?", "1.1.8"),
    ("Which boot manager reads variables stored in NVRAM and the EFI system partition?", "3.1.1"),
    ("superuser privileged user", "1.1.3"),
    ("NetworkManager documentation for the desktop", "5.2.1"),
]
CHINESE_QUERIES = [
    ("怎样在虚拟控制台之间切换？", "1.1.6"),
    ("关机之前为什么要把内存中的数据写入硬盘", "1.1.8"),
    ("启动管理器和操作系统引导加载程序", "3.1.1"),
    ("超级用户", "1.1.3"),
    ("文件系统权限", "1.2.3"),
]


@pytest.fixture
def loaded(store: _SqlDocstore) -> dict[str, list[int]]:
    """The excerpt, one chunk per paragraph set; document id = section index * 10 + (0 en, 1 zh)."""
    ids: dict[str, list[int]] = {}
    for rec in excerpt():
        document_id = SECTIONS.index(rec["section"]) * 10 + (rec["lang"] == "zh")
        doc = MxDocument(rec["text"], {"section": rec["section"], "lang": rec["lang"]}, rec["title"])
        ids.setdefault(rec["section"], []).extend(store.add([doc], document_id))
    return ids


def top(store: _SqlDocstore, query: str, **kwargs: object) -> list[MxDocument]:
    return store.full_text_search(query, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("query", "section"), ENGLISH_QUERIES + CHINESE_QUERIES)
def test_the_right_paragraph_ranks_first(store: _SqlDocstore, loaded: dict[str, list[int]], query: str,
                                         section: str) -> None:
    results = top(store, query, top_k=5)
    assert results, query
    best = results[0]
    assert best.metadata["section"] == section, [(d.metadata["section"], d.metadata["score"]) for d in results]
    assert best.chunk_id in loaded[section] and best.document_id is not None
    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in query) else "en"
    assert best.metadata["lang"] == lang


def test_results_are_ranked_and_labelled(store: _SqlDocstore, loaded: dict[str, list[int]]) -> None:
    results = top(store, "system console boot power 系统 控制台", top_k=4)
    assert len(results) == 4
    scores = [d.metadata["score"] for d in results]
    assert all(isinstance(s, float) and s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    assert {d.metadata["retrieval_type"] for d in results} == {"sparse"}
    assert len(top(store, "system", top_k=1)) == 1
    with pytest.raises(ParameterError, match="top_k"):
        top(store, "system", top_k=0)


def test_results_carry_the_stored_metadata_unchanged(store: _SqlDocstore) -> None:
    [chunk_id] = store.add([MxDocument("kernel modules", {"score": "kept?", "page": 3}, "k.md")], 5)
    [hit] = top(store, "kernel")
    assert hit.chunk_id == chunk_id and hit.document_id == 5 and hit.document_name == "k.md"
    assert hit.metadata["page"] == 3 and isinstance(hit.metadata["score"], float)
    assert store.search(chunk_id).metadata == {"score": "kept?", "page": 3}  # type: ignore[union-attr]


def test_filter_by_document_id(store: _SqlDocstore, loaded: dict[str, list[int]]) -> None:
    shutdown_zh = SECTIONS.index("1.1.8") * 10 + 1
    consoles_en = SECTIONS.index("1.1.6") * 10
    results = top(store, "power 电源 console", top_k=10, filter_dict={"document_id": [shutdown_zh, consoles_en]})
    assert {d.document_id for d in results} == {shutdown_zh, consoles_en}
    assert top(store, "power", filter_dict={"document_id": []}) == []
    assert top(store, "power", filter_dict={"document_id": [987654]}) == []
    big_filter = [*range(100_000, 125_000), consoles_en]  # more than one IN list
    assert [d.document_id for d in top(store, "console", filter_dict={"document_id": big_filter})] == [consoles_en]
    with pytest.raises(ParameterError, match="filter_dict"):
        top(store, "power", filter_dict={"document_name": ["x"]})
    with pytest.raises(ParameterError, match="filter_dict"):
        top(store, "power", filter_dict={"document_id": "1"})


@pytest.mark.parametrize(
    "query",
    [
        "'); DROP TABLE chunks_table; --",
        "\"; DROP TABLE chunks_table_fts; --",
        "NEAR(console power, 2)",
        'console"',
        '"',
        "*",
        "console*",
        "AND OR NOT",
        "console AND",
        "^console + -power : {x} [y] (z",
        "col:console",
        "a' | 'b & !c <-> d:*",
        "\\",
        "",
        "   ",
        "😀😀",
        "\x00",
    ],
)
def test_query_syntax_is_harmless(store: _SqlDocstore, loaded: dict[str, list[int]], query: str) -> None:
    before = store.count()
    results = top(store, query, top_k=3)
    assert isinstance(results, list) and len(results) <= 3
    assert store.count() == before
    assert top(store, "console")[0].metadata["section"] == "1.1.6"


def test_only_stopwords_still_search(store: _SqlDocstore) -> None:
    [chunk_id] = store.add([MxDocument("to be or not to be", {}, "hamlet.txt")], 1)
    store.add([MxDocument("a different line", {}, "other.txt")], 2)
    assert [d.chunk_id for d in top(store, "to be")] == [chunk_id]


def test_chinese_and_english_in_one_chunk(store: _SqlDocstore) -> None:
    [mixed] = store.add([MxDocument("使用apt-get安装软件包，然后运行systemctl", {}, "mixed.md")], 1)
    store.add([MxDocument("完全无关的一段话", {}, "other.md")], 2)
    for query in ("apt", "安装", "systemctl 命令", "软件包"):
        assert [d.chunk_id for d in top(store, query)] == [mixed], query
