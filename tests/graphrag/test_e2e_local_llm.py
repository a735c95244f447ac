# SPDX-License-Identifier: Apache-2.0
"""Graph RAG end to end: real llama.cpp (SmolLM2) extracts and answers, real MiniLM embeds.

The 135M model's extractions are poor; what is checked is the path: the build calls the model
per chunk and survives whatever JSON comes back, the graph persists, and the chain answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mx_rag.chain import GraphRagText2TextChain
from mx_rag.document import LoaderMng
from mx_rag.graphrag import GraphRAGPipeline
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.utils import ClientParam

from .conftest import PARAGRAPHS, QUESTION

pytestmark = [pytest.mark.llm, pytest.mark.slow]

GREEDY = LLMParameterConfig(max_tokens=48, temperature=0.0, seed=1)


@pytest.fixture(scope="module")
def llm(local_llm) -> Text2TextLLM:  # type: ignore[no-untyped-def]
    return Text2TextLLM(base_url=local_llm.chat_url, model_name=local_llm.model_name,
                        client_param=ClientParam(use_http=True, timeout=600))


def test_build_and_answer_with_the_local_llm(tmp_path: Path, llm: Text2TextLLM) -> None:
    from mx_rag.embedding.local import TextEmbedding

    embedding = TextEmbedding("all-MiniLM-L6-v2")
    files = []
    for stem in ("krilanovich", "two_dollar_radio"):
        files.append(tmp_path / f"{stem}.txt")
        files[-1].write_text(PARAGRAPHS[stem])
    work = tmp_path / "work"
    work.mkdir()
    pipeline = GraphRAGPipeline(work, llm, embedding, 384)
    pipeline.upload_files(files, LoaderMng.with_defaults(chunk_size=2000, chunk_overlap=0))
    assert pipeline.estimate_build().llm_calls == 2
    pipeline.build_graph(max_workers=2, llm_config=LLMParameterConfig(temperature=0.0, max_tokens=384, seed=1))
    assert pipeline.estimate_build().llm_calls == 0
    assert pipeline.documents() == sorted(str(f.resolve()) for f in files)

    retriever = pipeline.as_retriever(max_context_chars=3000)
    contexts = [d.page_content for d in retriever.invoke(QUESTION)]
    assert set(contexts) <= set(PARAGRAPHS.values())
    reopened = GraphRAGPipeline(work, llm, embedding, 384)
    assert [d.page_content for d in reopened.as_retriever(max_context_chars=3000).invoke(QUESTION)] == contexts

    result = GraphRagText2TextChain(llm=llm, retriever=retriever).query(QUESTION, GREEDY)
    assert set(result) == {"query", "result"} and result["result"].strip()
