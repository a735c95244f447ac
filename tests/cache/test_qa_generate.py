"""MarkDownParser and QAGenerate: Markdown files to titled texts, an LLM's numbered pairs to a cache.

The LLM is the scripted OpenAI-compatible server (the reply format is what is under test); the
tokenizer is the packaged MiniLM model's real one.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mx_rag.cache import CacheConfig, MarkDownParser, MxRAGCache, QAGenerate, QAGenerationConfig
from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

CLUB = ("# Norwich City\n\nNorwich City Football Club is a professional football club based in Norwich.\n"
        "It plays its home matches at Carrow Road, its ground since 1935.\n"
        "Its fans call the team the Canaries.\n")
ZH = "# 铁路查询\n\n查询方式：铁路12306网页首页。四川将洪水灾害防御四级响应提升至三级。\n"


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from mx_rag.embedding.local.model_info import minilm_dir

    return AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def llm(server: ScriptedServer) -> Text2TextLLM:
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="scripted",
                        client_param=ClientParam(use_http=True, retries=0))


def test_markdown_parser_reads_titles_and_texts(tmp_path: Path) -> None:
    (tmp_path / "b_club.md").write_text(CLUB, encoding="utf-8")
    (tmp_path / "a_rail.md").write_text(ZH + "![x](data:image/png;base64,iVBORw0KGgo=)\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("no heading here\n", encoding="utf-8")
    (tmp_path / "empty.md").write_text("  \n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.md").write_text("# Deep\n", encoding="utf-8")
    (tmp_path / "readme.txt").write_text("# Not markdown\n", encoding="utf-8")
    titles, contents = MarkDownParser(str(tmp_path)).parse()
    assert titles == ["铁路查询", "Norwich City", "notes"]
    assert "data:image" not in contents[0] and contents[1] == CLUB


def test_markdown_parser_limits(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / f"{name}.md").write_text("# T\ntext\n", encoding="utf-8")
    with pytest.raises(ParameterError, match=r"holds 3 \.md files, more than max_file_num 2"):
        MarkDownParser(str(tmp_path), max_file_num=2).parse()
    with pytest.raises(ParameterError, match=r"max_file_num must be in \[1, 10000\], got 0"):
        MarkDownParser(str(tmp_path), max_file_num=0)
    with pytest.raises(ParameterError, match="file_path must be an existing directory"):
        MarkDownParser(str(tmp_path / "missing")).parse()
    (tmp_path / "bad.md").write_bytes(b"# T\n\xff\xfe not utf-8")
    with pytest.raises(ParameterError, match=r"bad\.md' is not UTF-8"):
        MarkDownParser(str(tmp_path)).parse()


def test_pairs_from_the_llm_fill_a_cache(tmp_path: Path, llm: Text2TextLLM, server: ScriptedServer,
                                         tokenizer: Any) -> None:
    (tmp_path / "club.md").write_text(CLUB, encoding="utf-8")
    titles, contents = MarkDownParser(str(tmp_path)).parse()
    server.enqueue(Reply.chat(
        "Q1: Where does Norwich City play its home matches?\n"
        "Reference: 'It plays its home matches at Carrow Road, its ground since 1935.'\n"
        "Q2: Who owns the club?\nReference: A consortium of bankers from Tokyo bought it last year.\n"
        "Q3: What do the fans call the team?\n**Reference:** Its fans call the team the Canaries.\n"
        "Q4: A question without a passage\n"))
    qas = QAGenerate(QAGenerationConfig(titles, contents, tokenizer, llm, qas_num=3)).generate_qa()
    assert qas == {"Where does Norwich City play its home matches?":
                   "It plays its home matches at Carrow Road, its ground since 1935.",
                   "What do the fans call the team?": "Its fans call the team the Canaries."}
    body = server.requests[0].json
    assert body["temperature"] == 0.5 and body["top_p"] == 0.95
    assert body["messages"][0]["role"] == "system" and "3 distinct" in body["messages"][0]["content"]
    assert "Title: Norwich City" in body["messages"][1]["content"]
    cache = MxRAGCache("faq", CacheConfig(cache_size=10, data_save_folder=str(tmp_path / "cache")))
    for question, answer in qas.items():
        cache.update(question, answer)
    assert cache.search("What do the fans call the team?") == "Its fans call the team the Canaries."


def test_chinese_text_gets_the_chinese_prompt_and_at_most_qas_num(llm: Text2TextLLM, server: ScriptedServer,
                                                                 tokenizer: Any) -> None:
    server.enqueue(Reply.chat("Q1：如何查询？\n参考段落：查询方式：铁路12306网页首页。\n"
                              "Q2：响应提升至哪个级别？\n参考段落：四川将洪水灾害防御四级响应提升至三级。"))
    config = QAGenerationConfig(["铁路查询"], [ZH], tokenizer, llm, qas_num=1)
    qas = QAGenerate(config).generate_qa(LLMParameterConfig(temperature=0.1))
    assert qas == {"如何查询？": "查询方式：铁路12306网页首页。"}
    assert "1个" in server.requests[0].json["messages"][0]["content"]
    assert server.requests[0].json["temperature"] == 0.1


def test_long_texts_are_cut_to_max_tokens(llm: Text2TextLLM, server: ScriptedServer, tokenizer: Any) -> None:
    line = "Carrow Road has been the home ground of Norwich City since the club moved there in 1935."
    text = "\n".join(f"{line} ({i})" for i in range(200))
    server.enqueue(Reply.chat("nothing usable"), Reply.chat("nothing usable"))
    config = QAGenerationConfig(["Long", "One line"], [text, line * 100], tokenizer, llm, max_tokens=500)
    assert QAGenerate(config).generate_qa() == {}
    for request in server.requests:
        sent = request.json["messages"][1]["content"].split("\n", 2)[2]
        assert 400 < len(tokenizer.encode(sent)) <= 500
    assert server.requests[0].json["messages"][1]["content"].endswith(")")  # whole lines


def test_config_limits(llm: Text2TextLLM, tokenizer: Any) -> None:
    with pytest.raises(ParameterError, match=r"qas_num must be in \[1, 10\], got 11"):
        QAGenerationConfig(["t"], ["c"], tokenizer, llm, qas_num=11)
    with pytest.raises(ParameterError, match=r"max_tokens must be in \[500, 100000\], got 499"):
        QAGenerationConfig(["t"], ["c"], tokenizer, llm, max_tokens=499)
    with pytest.raises(ParameterError, match=r"titles\[0\] must have length in \[1, 100\], got length 101"):
        QAGenerationConfig(["t" * 101], ["c"], tokenizer, llm)
    with pytest.raises(ParameterError, match=r"contents must be one text per title \(2 titles\)"):
        QAGenerationConfig(["a", "b"], ["c"], tokenizer, llm)
    with pytest.raises(ParameterError, match="tokenizer must be a tokenizer with encode"):
        QAGenerationConfig(["t"], ["c"], object(), llm)
    with pytest.raises(ParameterError, match="config must be a QAGenerationConfig"):
        QAGenerate("config")  # type: ignore[arg-type]
