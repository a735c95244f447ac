# SPDX-License-Identifier: Apache-2.0
"""jieba's dictionary read word by word from its on-disk table: the same tokens and keyword hits
as the whole dictionary, the whole dictionary loaded once Chinese is plentiful."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.storage.document_store import MxDocument, SQLiteDocstore, text_tokens
from mx_rag.storage.document_store.text_tokens import query_tokens, tokenize
from tests.storage.document_store.helpers import excerpt

CHAPTER = Path(__file__).resolve().parents[2] / "data" / "docs" / "ch03.zh-cn.html"  # Debian Reference, zh-CN


def chinese_paragraphs() -> list[str]:
    """The chapter's text in sentences, the Chinese ones."""
    text = " ".join(re.sub(r"<[^>]+>", " ", CHAPTER.read_text(encoding="utf-8")).split())
    return [s for s in text.split("。") if text_tokens.has_han(s)]


@pytest.fixture(scope="module")
def jieba_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, jieba_cache: Path) -> Iterator[None]:
    """This process's jieba state forgotten (restored afterwards), caches under ``jieba_cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(jieba_cache))
    for name in ("_jieba", "_disk", "_load_seconds"):
        monkeypatch.setattr(text_tokens, name, None)
    yield


def restart() -> None:
    text_tokens._jieba = text_tokens._disk = None


@pytest.fixture(scope="module")
def whole_tokens(jieba_cache: Path) -> list[list[str]]:
    """Each paragraph's tokens with the whole dictionary (the first start writes the table)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(jieba_cache))
        for name in ("_jieba", "_disk", "_load_seconds"):
            patch.setattr(text_tokens, name, None)
        tokens = [tokenize(p) for p in chinese_paragraphs()]
        assert text_tokens._disk is None, "the first start on a machine loads the whole dictionary"
        assert list((jieba_cache / "mxrag" / "jieba").glob("freq-*.sqlite3")), "and writes the table"
    return tokens


def test_read_word_by_word_gives_the_whole_dictionarys_tokens(fresh: None, whole_tokens: list[list[str]]) -> None:
    paragraphs = chinese_paragraphs()
    assert len(paragraphs) > 20
    first = tokenize(paragraphs[0])
    assert text_tokens._disk is not None, "a later start reads the table"
    assert text_tokens._disk.looked_up < 1000
    assert [first, *(tokenize(p) for p in paragraphs[1:8])] == whole_tokens[:8]
    assert query_tokens("怎么安装软件包") == ["安装", "软件", "软件包"]


def test_plenty_of_chinese_loads_the_whole_dictionary(
    fresh: None, whole_tokens: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_tokens, "LAZY_LOOKUPS", 2000)
    tokens = []
    for paragraph in chinese_paragraphs():
        tokens.append(tokenize(paragraph))
        if len(tokens) == 1:
            assert text_tokens._disk is not None
    assert text_tokens._disk is None, "past LAZY_LOOKUPS the whole dictionary is loaded"
    assert tokens == whole_tokens


def test_a_damaged_table_is_rewritten(fresh: None, whole_tokens: list[list[str]], jieba_cache: Path) -> None:
    (table,) = (jieba_cache / "mxrag" / "jieba").glob("freq-*.sqlite3")
    table.write_bytes(b"not a database")
    assert tokenize(chinese_paragraphs()[0]) == whole_tokens[0]
    assert text_tokens._disk is None
    restart()
    assert tokenize(chinese_paragraphs()[1]) == whole_tokens[1]
    assert text_tokens._disk is not None


def test_keyword_hits_are_the_same(fresh: None, whole_tokens: list[list[str]], tmp_path: Path) -> None:
    """An English corpus with a few Chinese words, and Chinese paragraphs: the same hits both ways."""
    english = [p["text"] for p in excerpt() if p["lang"] == "en"]
    chinese = [p["text"] for p in excerpt() if p["lang"] != "en"]
    docs = [*english, "Names such as 景太郎 or 软件包管理 appear in English text.", *chinese]
    queries = ["软件包", "景太郎", "系统管理员", "root account", "虚拟终端 console"]

    def hits() -> list[list[int]]:
        store = SQLiteDocstore(db_path=tmp_path / f"{len(list(tmp_path.iterdir()))}.db")
        ids = store.add([MxDocument(text, {}, document_name="d") for text in docs], 1)
        found = [[ids.index(d.chunk_id) for d in store.full_text_search(q, top_k=5)] for q in queries]
        store.close()
        return found

    lazy = hits()
    assert text_tokens._disk is not None
    restart()
    text_tokens._start(lazy=False)
    assert hits() == lazy
    assert all(lazy), lazy
