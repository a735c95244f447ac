"""MarkdownTextSplitter: header sections, merging, headers carried, code and tables kept whole;
the reference example and the original's ``parse_document`` program (MarkdownLoader + splitter)."""

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mx_rag.document.splitter import MarkdownTextSplitter
from mx_rag.errors import ParameterError

GUIDE = """# 昇腾 RAG 指南
本文介绍安装和使用。

## 安装
### 依赖
需要 Python 3.10 或更新的版本。{long}

```bash
# 这一行不是标题
pip install mxrag
```

| 组件 | 版本 |
|---|---|
| CANN | 8.0 |

### 验证
运行 mxrag --help 查看帮助。

## 使用
### 建库
调用 mxrag ingest 导入文档。
### 问答
调用 mxrag ask 提问。
"""


def guide(long_sentences: int = 20) -> str:
    return GUIDE.format(long="这是一段较长的说明文字，用来测试切分。" * long_sentences)


def test_short_text_is_kept_whole() -> None:
    assert MarkdownTextSplitter().split_text("# A\nshort") == ["# A\nshort"]
    assert MarkdownTextSplitter().split_text(" \n ") == []


def test_sections_carry_their_headers_and_code_stays_whole() -> None:
    chunks = MarkdownTextSplitter(chunk_size=120, chunk_overlap=10, header_level=3).split_text(guide())
    assert all(chunk.startswith("# 昇腾 RAG 指南") for chunk in chunks)
    code = [c for c in chunks if "```bash" in c]
    assert len(code) == 1 and "# 这一行不是标题\npip install mxrag\n```" in code[0]
    assert "## 安装\n### 依赖" in code[0]
    table = [c for c in chunks if "| CANN | 8.0 |" in c]
    assert len(table) == 1 and "|---|---|" in table[0]
    # the short sections at the end merge under the headers they share; the others stay in the text
    assert chunks[-1] == ("# 昇腾 RAG 指南\n## 安装\n### 验证\n运行 mxrag --help 查看帮助。\n"
                          "## 使用\n### 建库\n调用 mxrag ingest 导入文档。\n### 问答\n调用 mxrag ask 提问。")
    # every sentence of the text is in some chunk
    body = "".join(chunks)
    for sentence in re.findall(r"[^\n。]+。", guide()):
        assert sentence.strip() in body


def test_long_prose_is_cut_near_chunk_size_at_sentence_ends() -> None:
    chunks = MarkdownTextSplitter(chunk_size=100, chunk_overlap=0).split_text(guide(40))
    long = [c for c in chunks if "较长的说明文字" in c and "```" not in c]
    assert len(long) >= 3
    headers = "# 昇腾 RAG 指南\n## 安装\n### 依赖\n"
    for chunk in long:
        assert chunk.startswith(headers)
        assert len(chunk) - len(headers) <= 100
        assert chunk.endswith(("。", "，"))


def test_header_level_limits_the_sections() -> None:
    chunks = MarkdownTextSplitter(chunk_size=200, chunk_overlap=0, header_level=1).split_text(guide(3))
    assert all(chunk.startswith("# 昇腾 RAG 指南\n") for chunk in chunks)
    assert not any(chunk.startswith("# 昇腾 RAG 指南\n## ") for chunk in chunks)  # ## is text, not a section
    assert MarkdownTextSplitter(chunk_size=50, chunk_overlap=0, header_level=0).split_text("# A\n" + "x. " * 40)


def test_differing_headers_are_dropped_when_merged() -> None:
    text = "# A\n## B\nb text.\n## C\nc text.\n" + "# D\n" + "d. " * 30
    chunks = MarkdownTextSplitter(chunk_size=60, chunk_overlap=0).split_text(text)
    assert chunks[0] == "# A\n## B\nb text.\n## C\nc text."


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.text("abc 。\n", min_size=1, max_size=80)), max_size=12),
       st.integers(20, 120))
def test_no_text_is_lost(sections: list[tuple[int, str]], size: int) -> None:
    text = "\n".join("#" * level + f" h{i}\n" + body for i, (level, body) in enumerate(sections))
    chunks = MarkdownTextSplitter(chunk_size=size, chunk_overlap=0).split_text(text)
    words = set(re.findall(r"[abc]+", text))
    assert words <= set(re.findall(r"[abc]+", "\n".join(chunks)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"chunk_size": 0}, "chunk_size"), ({"chunk_overlap": -1}, "chunk_overlap"),
     ({"chunk_size": 50, "chunk_overlap": 50}, "chunk_overlap must be smaller than chunk_size"),
     ({"header_level": 7}, r"header_level must be in \[0, 6\]"), ({"header_level": "3"}, "header_level")],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        MarkdownTextSplitter(**kwargs)


def test_text_must_be_a_string() -> None:
    with pytest.raises(ParameterError, match="text"):
        MarkdownTextSplitter().split_text(None)  # type: ignore[arg-type]


def test_reference_example_with_markdown_loader(tmp_path: Path) -> None:
    from mx_rag.document.loader import MarkdownLoader

    path = tmp_path / "document.md"
    path.write_text(guide(), encoding="utf-8")
    loader = MarkdownLoader(str(path), vlm=None, process_images_separately=False)
    splitter = MarkdownTextSplitter(chunk_size=1000, chunk_overlap=50, header_level=3)
    for doc in loader.lazy_load():
        chunks = splitter.split_text(doc.page_content)
        assert chunks and all(isinstance(c, str) for c in chunks)


def test_parse_document_program(tmp_path: Path) -> None:
    """The original's example/parse_document: MarkdownLoader(path).load_and_split(MarkdownTextSplitter(200, 30))."""
    from mx_rag.document.loader import MarkdownLoader

    path = tmp_path / "manual.md"
    path.write_text(guide(), encoding="utf-8")
    docs = MarkdownLoader(str(path)).load_and_split(MarkdownTextSplitter(chunk_size=200, chunk_overlap=30))
    assert len(docs) > 3
    assert all(doc.metadata["source"] == str(path) for doc in docs)
    assert any("pip install mxrag" in doc.page_content for doc in docs)
