# SPDX-License-Identifier: Apache-2.0
"""``Answerer`` keeps a knowledge base's retrievers and chains until the registry changes, and
embeds the questions of concurrent requests together (``QueryBatcher``). A real
``KnowledgeService`` over SQLite + FAISS with the packaged MiniLM; the chains are built, and
retrieve, but no LLM is asked."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mx_rag.app.answers import Answerer, Question
from mx_rag.app.query_batch import QueryBatcher
from mx_rag.app.service import KnowledgeService
from mx_rag.app.settings import load_settings
from mx_rag.app.users import Principal
from mx_rag.errors import ParameterError
from mx_rag.llm.text2text import Text2TextLLM
from mx_rag.utils import ClientParam

OWNER = Principal("owner_1", admin=True)
QUESTION = Question("Where was Charles Babbage born?", [])


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeService]:
    made = KnowledgeService(load_settings(data_dir=tmp_path_factory.mktemp("kept"),
                                          embedding={"model": "all-MiniLM-L6-v2"}))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def answerer(service: KnowledgeService) -> Answerer:
    llm = Text2TextLLM(base_url="http://127.0.0.1:9/v1/chat/completions", model_name="never-asked",
                       client_param=ClientParam(use_http=True, retries=0))
    return Answerer(service, llm)


def _ingest(service: KnowledgeService, kb: str, name: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    report = service.ingest(OWNER, kb, [path], white_paths=[tmp_path])
    assert not report.failed, report.reasons


def test_chains_are_kept_until_an_ingest_and_the_new_document_is_found_at_once(
        service: KnowledgeService, answerer: Answerer, tmp_path: Path) -> None:
    service.create(OWNER, "people")
    _ingest(service, "people", "lovelace.txt", "Ada Lovelace was born in London in 1815.\n", tmp_path)
    first = answerer.chain(OWNER, "people", "hybrid", QUESTION, None)
    assert answerer.chain(OWNER, "people", "hybrid", QUESTION, None) is first
    talk = Question(QUESTION.text, [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}])
    with_history = answerer.chain(OWNER, "people", "hybrid", talk, None)
    assert with_history is not first and with_history._retriever is first._retriever  # history: own chain
    assert answerer.chain(OWNER, "people", "hybrid", QUESTION, 2) is not first  # another k
    assert "Babbage" not in " ".join(d.page_content for d in first._retriever.invoke(QUESTION.text))

    _ingest(service, "people", "babbage.txt", "Charles Babbage was born in Walworth, Surrey, in 1791.\n", tmp_path)
    after = answerer.chain(OWNER, "people", "hybrid", QUESTION, None)
    assert after is not first
    assert "Walworth" in after._retriever.invoke(QUESTION.text)[0].page_content


def test_a_knowledge_base_made_again_gets_new_chains(
        service: KnowledgeService, answerer: Answerer, tmp_path: Path) -> None:
    service.create(OWNER, "again")
    _ingest(service, "again", "old.txt", "The old harbour received wool ships.\n", tmp_path)
    old = answerer.chain(OWNER, "again", "single", QUESTION, None)
    service.delete(OWNER, "again")
    service.create(OWNER, "again")
    _ingest(service, "again", "new.txt", "The new harbour receives container ships.\n", tmp_path)
    new = answerer.chain(OWNER, "again", "single", QUESTION, None)
    assert new is not old
    assert [d.page_content for d in new._retriever.invoke("harbour")] == ["The new harbour receives container ships."]


class _Counting:
    """The service's real embedding, with the size of each batched question call recorded."""

    def __init__(self, embedding: Any) -> None:
        self.embedding, self.batches = embedding, []  # type: list[int]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedding.embed_documents(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return self.embedding.embed_queries(texts)


def test_concurrent_questions_are_embedded_together_with_the_vectors_of_one_alone(
        service: KnowledgeService) -> None:
    counting = _Counting(service.embedding)
    batcher = QueryBatcher(counting)
    texts = [f"question {i}: where did the ships of harbour {i} come from?" for i in range(12)]
    out: dict[int, list[float]] = {}
    start = threading.Barrier(len(texts))

    def ask(i: int) -> None:
        start.wait()
        out[i] = batcher.embed_query(texts[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counting.batches) == len(texts) and len(counting.batches) < len(texts)
    for i, text in enumerate(texts):
        np.testing.assert_allclose(out[i], service.embedding.embed_query(text), atol=1e-5)
    with pytest.raises(ParameterError, match="text"):
        batcher.embed_query("")


def test_a_failed_batch_fails_each_of_its_questions_and_the_next_one_runs(service: KnowledgeService) -> None:
    class Failing(_Counting):
        def embed_queries(self, texts: list[str]) -> list[list[float]]:
            if any("fail" in t for t in texts):
                raise RuntimeError("model gone")
            return super().embed_queries(texts)

    batcher = QueryBatcher(Failing(service.embedding))
    with pytest.raises(RuntimeError, match="model gone"):
        batcher.embed_query("please fail")
    assert len(batcher.embed_query("and now succeed")) == service.embedding.dimension
