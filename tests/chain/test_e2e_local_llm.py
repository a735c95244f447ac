"""End-to-end RAG: real documents, real MiniLM, real FAISS and SQLite, real llama.cpp (SmolLM2)."""

import shutil
from pathlib import Path

import pytest

from mx_rag.chain import ParallelText2TextChain, SingleText2TextChain
from mx_rag.knowledge.local import LocalKnowledge
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.utils import ClientParam

pytestmark = pytest.mark.llm

DATA = Path(__file__).resolve().parents[1] / "data" / "docs"
GREEDY = LLMParameterConfig(max_tokens=48, temperature=0.0, seed=1)
QUESTION = "Which football club is based in Norwich?"


@pytest.fixture(scope="module")
def knowledge(tmp_path_factory: pytest.TempPathFactory) -> LocalKnowledge:
    root = tmp_path_factory.mktemp("e2e")
    docs = root / "docs"
    docs.mkdir()
    for name in ("norwich-city.txt", "layout-parser-paper-fast.pdf", "fake-power-point.pptx"):
        shutil.copyfile(DATA / name, docs / name)
    kb = LocalKnowledge.open(root / "kb", white_paths=[docs], chunk_size=500, chunk_overlap=50)
    report = kb.sync(sorted(docs.iterdir()))
    assert report.failed == [] and len(report.added) == 3
    return kb


@pytest.fixture(scope="module")
def llm(local_llm) -> Text2TextLLM:  # type: ignore[no-untyped-def]
    return Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,
                        client_param=ClientParam(use_http=True, timeout=600))


def test_single_chain_answers_from_the_right_document(knowledge: LocalKnowledge, llm: Text2TextLLM) -> None:
    chain = SingleText2TextChain(llm=llm, retriever=knowledge.retriever(k=2), prompt="Answer using the text above.")
    result = chain.query(QUESTION, GREEDY)
    assert result["result"].strip()
    assert result["source_documents"][0]["metadata"]["source"].endswith("norwich-city.txt")


def test_streamed_answer_equals_the_plain_one(knowledge: LocalKnowledge, llm: Text2TextLLM) -> None:
    chain = SingleText2TextChain(llm=llm, retriever=knowledge.retriever(k=2), prompt="Answer using the text above.")
    plain = chain.query(QUESTION, GREEDY)
    items = list(chain.query(QUESTION, GREEDY.replace(stream=True)))
    assert items[-1]["result"] == plain["result"]
    assert items[-1]["source_documents"] == plain["source_documents"]


def test_parallel_chain_uses_the_same_documents(knowledge: LocalKnowledge, llm: Text2TextLLM) -> None:
    retriever = knowledge.retriever(k=2)
    single = SingleText2TextChain(llm=llm, retriever=retriever).query(QUESTION, GREEDY)
    parallel = ParallelText2TextChain(llm=llm, retriever=retriever).query(QUESTION, GREEDY)
    assert parallel["source_documents"] == single["source_documents"]
    assert parallel["result"].strip()


def test_resync_skips_unchanged_files(knowledge: LocalKnowledge) -> None:
    files = sorted(p for p in knowledge.knowledge.white_paths[0].iterdir())
    report = knowledge.sync(files)
    assert report.added == [] and report.replaced == [] and len(report.unchanged) == 3
