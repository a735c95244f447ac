# SPDX-License-Identifier: Apache-2.0
"""The full-text tokeniser, and what importing the package loads."""

from __future__ import annotations

import subprocess
import sys

from mx_rag.storage.document_store.text_tokens import MAX_INDEXED_CHARS, index_tokens, query_tokens, tokenize


def test_words_are_lower_cased_and_punctuation_splits() -> None:
    assert tokenize("Hello, World! apt-get install foo_bar v1.2 ÉCOLE") == [
        "hello", "world", "apt", "get", "install", "foo", "bar", "v1", "2", "école",
    ]


def test_chinese_is_segmented_for_search() -> None:
    tokens = tokenize("中华人民共和国的数据库系统")
    assert {"中华", "人民", "共和国", "中华人民共和国", "数据库", "系统"} <= set(tokens)


def test_mixed_runs() -> None:
    assert tokenize("用apt-get安装Python3软件包") == ["用", "apt", "get", "安装", "python3", "软件", "软件包"]


def test_emoji_and_symbols_are_separators() -> None:
    assert tokenize("😀ok🚀 ★ go") == ["ok", "go"]
    assert tokenize("") == [] and tokenize("!!! ... ###") == []


def test_overlong_words_are_dropped() -> None:
    assert tokenize("a" * 65 + " short") == ["short"]


def test_index_tokens_are_capped() -> None:
    indexed = index_tokens("word " * 100_000)
    assert len(indexed) <= MAX_INDEXED_CHARS and indexed.endswith("word")


def test_query_tokens_are_distinct_and_skip_stopwords() -> None:
    assert query_tokens("How does the APT tool install the APT packages?") == ["apt", "tool", "install", "packages"]
    assert query_tokens("怎么安装软件包") == ["安装", "软件", "软件包"]
    assert query_tokens("the of and") == ["the", "of", "and"]
    assert query_tokens("'); --") == []


def test_jieba_loads_quietly_and_only_when_needed() -> None:
    code = (
        "import sys\n"
        "from mx_rag.storage.document_store import SQLiteDocstore, PostgresDocstore, MxDocument, Docstore\n"
        "from mx_rag.storage.document_store.text_tokens import tokenize\n"
        "assert 'jieba' not in sys.modules and 'psycopg' not in sys.modules, 'loaded at import'\n"
        "tokenize('english only')\n"
        "assert 'jieba' not in sys.modules, 'loaded for English'\n"
        "assert tokenize('数据库') == ['数据', '据库', '数据库']\n"
        "assert 'psycopg' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
