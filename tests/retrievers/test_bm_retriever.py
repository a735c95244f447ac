"""BMRetriever: keywords from a real HTTP LLM (the scripted server), BM25 over documents loaded
from a real .docx; the reference page's example (DocxLoader -> BMRetriever -> SingleText2TextChain)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.prompts import PromptTemplate
from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.errors import ParameterError, RemoteResponseError
from mx_rag.llm import Text2TextLLM
from mx_rag.retrievers import BMRetriever
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

PARAGRAPHS = [
    "MindIE 安装步骤：先安装 CANN 工具包，再用 pip 安装 MindIE 的 whl 包，最后设置环境变量。",
    "昇腾 NPU 的驱动和固件需要按照版本配套表安装，安装后用 npu-smi info 查看设备状态。",
    "Docker 镜像可以用 docker build 命令制作，镜像里预装 Python 和依赖包。",
    "北京是中国的首都，有故宫、长城和颐和园等景点。",
]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def llm(server: ScriptedServer) -> Text2TextLLM:
    server.reset()
    return Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="qianwen-7b",
                        client_param=ClientParam(use_http=True))


@pytest.fixture(scope="module")
def docx_docs(tmp_path_factory: pytest.TempPathFactory) -> list[Document]:
    import docx

    from mx_rag.document.loader import DocxLoader

    path = tmp_path_factory.mktemp("bm") / "MindIE.docx"
    document = docx.Document()
    for text in PARAGRAPHS:
        document.add_paragraph(text)
    document.save(str(path))
    return DocxLoader(str(path)).load_and_split(RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0))


def test_reference_example_chain(server: ScriptedServer, llm: Text2TextLLM, docx_docs: list[Document]) -> None:
    from mx_rag.chain import SingleText2TextChain

    assert len(docx_docs) >= 4
    server.enqueue(Reply.chat("MindIE, 安装, install"), Reply.chat("先安装 CANN，再安装 MindIE。"))
    bm_retriever = BMRetriever(docs=docx_docs, llm=llm, k=10)
    chain = SingleText2TextChain(llm=llm, retriever=bm_retriever)
    res = chain.query("怎么安装MindIE?")
    assert res["result"] == "先安装 CANN，再安装 MindIE。"
    server.enqueue(Reply.chat("MindIE, 安装"))
    sources = [doc.page_content for doc in bm_retriever.invoke("怎么安装MindIE?")]
    assert sources[0].startswith("MindIE 安装步骤")
    assert all("北京" not in text for text in sources)  # no keyword in common: left out
    keyword_prompt = server.requests[0].json["messages"][-1]["content"]
    assert keyword_prompt.endswith("Question: 怎么安装MindIE?\nKeywords:\n")
    assert server.requests[0].json["temperature"] == 0.5 and server.requests[0].json["top_p"] == 0.95
    assert "MindIE 安装步骤" in server.requests[1].json["messages"][-1]["content"]  # the context sent to the LLM


def test_ranks_by_bm25_with_scores(server: ScriptedServer, llm: Text2TextLLM) -> None:
    docs = [Document(page_content=t, metadata={"i": i}) for i, t in enumerate(PARAGRAPHS)]
    server.enqueue(Reply.chat("{Docker build, 镜像}"))
    found = BMRetriever(docs=docs, llm=llm, k=2).invoke("容器镜像怎么制作")
    assert [d.metadata["i"] for d in found] == [2]
    assert found[0].metadata["score"] > 0


def test_custom_prompt_and_preprocess(server: ScriptedServer, llm: Text2TextLLM) -> None:
    docs = [Document(page_content=t) for t in PARAGRAPHS]
    prompt = PromptTemplate(input_variables=["question"], template="Keywords of {question}, separated by |")
    server.enqueue(Reply.chat("故宫|长城"))
    retriever = BMRetriever(docs=docs, llm=llm, k=3, prompt=prompt, preprocess_func=lambda s: s.split("|"))
    found = retriever.invoke("北京有什么?")
    assert [d.page_content for d in found] == [PARAGRAPHS[3]]
    assert server.requests[0].json["messages"][-1]["content"] == "Keywords of 北京有什么?, separated by |"


def test_empty_docs_and_empty_answer(server: ScriptedServer, llm: Text2TextLLM) -> None:
    server.enqueue(Reply.chat("a, b"), Reply.chat("  "))
    assert BMRetriever(docs=[], llm=llm).invoke("q") == []
    with pytest.raises(RemoteResponseError, match="no keywords"):
        BMRetriever(docs=[Document(page_content="x")], llm=llm).invoke("q")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k"),
        ({"k": 10_001}, "k"),
        ({"docs": [Document(page_content="x")] * 1001}, "docs must be a list of 0 to 1000"),
        ({"docs": ["text"]}, r"docs\[0\] must be a langchain_core Document"),
        ({"prompt": PromptTemplate(input_variables=["q"], template="{q}")}, "prompt must be a PromptTemplate"),
        ({"preprocess_func": "split"}, "preprocess_func must be"),
        ({"llm": "gpt"}, "llm must be"),
    ],
)
def test_bad_arguments(llm: Text2TextLLM, kwargs: dict, message: str) -> None:
    args = {"docs": [], "llm": llm, **kwargs}
    with pytest.raises((ParameterError, ValueError), match=message):
        BMRetriever(**args)


def test_query_length_checked(llm: Text2TextLLM) -> None:
    with pytest.raises(ParameterError, match="query"):
        BMRetriever(docs=[], llm=llm).invoke("")


def test_positional_arguments_refused(llm: Text2TextLLM) -> None:
    with pytest.raises(TypeError):
        BMRetriever([], llm)  # type: ignore[misc]


def test_import_path_of_the_reference() -> None:
    from mx_rag.retrievers.bm_retriever import BMRetriever as same

    assert same is BMRetriever and Path(__file__).exists()
