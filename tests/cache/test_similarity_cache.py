"""The semantic cache on real FAISS and SQLite with the packaged MiniLM, a scripted TEI reranker, milvus-lite."""

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mx_rag.cache import CacheChainChat, CacheConfig, EvictPolicy, MxRAGCache, SimilarityCacheConfig
from mx_rag.cache._similarity import question_signature
from mx_rag.chain import SingleText2TextChain
from mx_rag.embedding.local import TextEmbedding
from mx_rag.errors import ParameterError
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.utils import ClientParam

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def minilm() -> TextEmbedding:
    return TextEmbedding("all-MiniLM-L6-v2")


def similar(folder: Path, minilm: TextEmbedding, name: str = "sim", **kwargs: object) -> MxRAGCache:
    options: dict[str, object] = {
        "vector_config": {"vector_type": "npu_faiss_db", "x_dim": 384},
        "cache_config": "sqlite",
        "emb_config": {"embedding": minilm},
        "similarity_config": {},
        "cache_size": 100,
        "data_save_folder": str(folder),
        **kwargs,
    }
    return MxRAGCache(name, SimilarityCacheConfig(**options))  # type: ignore[arg-type]


def test_a_paraphrase_hits_and_an_unrelated_question_misses(tmp_path: Path, minilm: TextEmbedding) -> None:
    cache = similar(tmp_path, minilm)
    cache.update("Who wrote the play Hamlet?", "William Shakespeare")
    cache.update("What is the capital of France?", "Paris")
    assert cache.search("Who is the author of the play Hamlet?") == "William Shakespeare"
    assert cache.search("What is the capital city of France?") == "Paris"
    assert cache.search("How do I bake sourdough bread?") is None


def test_a_question_of_another_kind_or_number_never_hits(tmp_path: Path, minilm: TextEmbedding) -> None:
    cache = similar(tmp_path, minilm, similarity_threshold=0.5)
    cache.update("When was Iwan Roberts born?", "26 June 1968")
    cache.update("Which club did Iwan Roberts join in 1990?", "Huddersfield Town")
    assert cache.search("Where was Iwan Roberts born?") is None  # cosine 0.97: closer than most paraphrases
    assert cache.search("Which club did Iwan Roberts join in 1993?") is None
    assert cache.search("In 1990, which club did Iwan Roberts move to?") == "Huddersfield Town"
    assert question_signature("小明的爸爸是谁?") == question_signature("小明的爸爸叫什么名字")
    assert question_signature("How many caps?")[0] == "how-many" and question_signature("In what year?")[0] == "when"


def test_a_new_instance_finds_the_answers_and_a_lost_index_is_rebuilt(tmp_path: Path, minilm: TextEmbedding) -> None:
    cache = similar(tmp_path, minilm)
    cache.update("Who wrote the play Hamlet?", "William Shakespeare")
    cache.flush()
    assert similar(tmp_path, minilm).search("Who wrote the play Hamlet?") == "William Shakespeare"
    (tmp_path / "sim.index").unlink()  # a crash after the row, before the vector
    reopened = similar(tmp_path, minilm)
    assert reopened.search("Who wrote Hamlet?") == "William Shakespeare"
    assert (tmp_path / "sim.index").exists()


def test_an_instance_opened_earlier_finds_what_another_wrote(tmp_path: Path, minilm: TextEmbedding) -> None:
    reader = similar(tmp_path, minilm)  # its own SQLite connection and FAISS index, as another process has
    writer = similar(tmp_path, minilm)
    assert reader.search("Who wrote the play Hamlet?") is None
    writer.update("Who wrote the play Hamlet?", "William Shakespeare")
    assert reader.search("Who is the author of the play Hamlet?") == "William Shakespeare"
    reader.update("What is the capital of France?", "Paris")
    assert writer.search("What is the capital city of France?") == "Paris" and len(writer) == 2


def test_vectors_without_a_row_are_dropped_on_open(tmp_path: Path, minilm: TextEmbedding) -> None:
    cache = similar(tmp_path, minilm)
    cache.update("Who wrote the play Hamlet?", "William Shakespeare")
    with sqlite3.connect(tmp_path / "sim.db") as db:  # a crash after the vector, before the row's commit
        db.execute("DELETE FROM entries")
    reopened = similar(tmp_path, minilm)
    assert reopened.search("Who wrote the play Hamlet?") is None
    assert reopened._store._vectors.count() == 0  # type: ignore[union-attr]


def test_eviction_removes_rows_and_vectors(tmp_path: Path, minilm: TextEmbedding) -> None:
    cache = similar(tmp_path, minilm, cache_size=3, clean_size=2, eviction_policy=EvictPolicy.FIFO)
    questions = ["Who wrote Hamlet?", "What is the capital of France?", "How tall is Everest?", "What is FAISS?"]
    for i, question in enumerate(questions):
        cache.update(question, f"answer {i}")
    assert len(cache) == 2  # the fourth went over 3: the two oldest went
    assert cache.search("Who wrote Hamlet?") is None and cache.search("What is FAISS?") == "answer 3"
    assert cache._store._vectors.count() == 2  # type: ignore[union-attr]
    cache.clear()
    assert len(cache) == 0 and cache.search("What is FAISS?") is None


@pytest.fixture
def tei() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def test_a_reranker_decides_with_its_score_range(tmp_path: Path, minilm: TextEmbedding, tei: ScriptedServer) -> None:
    cache = similar(tmp_path, minilm, retrieval_top_k=2, similarity_threshold=0.7, similarity_config={
        "similarity_type": "tei_reranker", "url": tei.url("/rerank"),
        "client_param": ClientParam(use_http=True, retries=0), "score_min": 0.0, "score_max": 10.0})
    cache.update("Who wrote Hamlet?", "Shakespeare")
    cache.update("What is the capital of France?", "Paris")
    tei.enqueue(Reply.json([{"index": 0, "score": 9.0}]))  # France's question is of another kind
    assert cache.search("Who is Hamlet's author?") == "Shakespeare"
    assert tei.requests[0].json["query"] == "Who is Hamlet's author?"
    assert tei.requests[0].json["texts"] == ["Who wrote Hamlet?"]
    tei.enqueue(Reply.json([{"index": 0, "score": 6.0}]))  # 0.6 < 0.7
    assert cache.search("Who is Hamlet's author?") is None


def test_memory_in_front_of_similarity(tmp_path: Path, minilm: TextEmbedding) -> None:
    l1 = MxRAGCache("memory_cache", CacheConfig(cache_size=10, data_save_folder=str(tmp_path)))
    l2 = similar(tmp_path, minilm)
    l1.join(l2)
    l1.update("小明的爸爸是谁?", "小明的爸爸名字是大明")
    assert l1.search("小明的爸爸是谁?") == "小明的爸爸名字是大明"
    assert len(l1) == 1 and len(l2) == 1


def test_config_rules() -> None:
    with pytest.raises(ParameterError, match="vector_config must be None together with cache_config"):
        SimilarityCacheConfig(vector_config=None, cache_config="sqlite", emb_config={}, cache_size=1)
    with pytest.raises(ParameterError, match="cache_config must be 'sqlite'"):
        SimilarityCacheConfig(vector_config={}, cache_config="redis", emb_config={}, cache_size=1)
    with pytest.raises(ParameterError, match=r"clean_size must be in \[1, 5\]"):
        SimilarityCacheConfig(vector_config={}, cache_config="sqlite", emb_config={}, cache_size=5, clean_size=6)
    with pytest.raises(ParameterError, match="score_max'\\] must be at least score_min"):
        SimilarityCacheConfig(vector_config={}, cache_config="sqlite", emb_config={}, cache_size=5,
                              similarity_config={"score_min": 2.0, "score_max": 1.5})
    with pytest.raises(ParameterError, match="nesting deeper than 1"):
        SimilarityCacheConfig(vector_config={}, cache_config="sqlite", emb_config={"a": {"b": 1}}, cache_size=5)
    memory_like = SimilarityCacheConfig(vector_config=None, cache_config=None, emb_config={}, cache_size=5)
    assert not memory_like.is_similarity


def _retriever(folder: Path, minilm: TextEmbedding) -> Retriever:
    facts = ["The 2024 gaokao essay asked whether AI leaves us fewer questions.", "Paris is the capital of France."]
    docstore = SQLiteDocstore(db_path=str(folder / "kb.db"))
    vectors = MindFAISS(x_dim=384, devs=[0], load_local_index=str(folder / "kb.index"))
    ids = docstore.add([MxDocument(text, {"source": f"fact{i}.txt"}) for i, text in enumerate(facts)], 1)
    vectors.add(ids, minilm.embed_documents(facts), document_id=1)
    return Retriever(vector_store=vectors, document_store=docstore, embed_func=minilm.embed_documents, k=1)


def test_cache_chain_chat_answers_a_paraphrase_without_the_llm(tmp_path: Path, minilm: TextEmbedding) -> None:
    retriever = _retriever(tmp_path, minilm)
    with ScriptedServer() as llm_server:
        llm = Text2TextLLM(base_url=llm_server.url("/v1/chat/completions"), model_name="scripted",
                           client_param=ClientParam(use_http=True, retries=0))
        chat = CacheChainChat(cache=similar(tmp_path, minilm), chain=SingleText2TextChain(llm=llm, retriever=retriever))
        llm_server.enqueue(Reply.chat("The 2024 essay topic was about AI and questions."))
        first = chat.query("What was the 2024 gaokao essay topic?")
        assert first["result"] == "The 2024 essay topic was about AI and questions."
        second = chat.query("What was the essay topic of the 2024 gaokao?")
        assert second == {**first, "query": "What was the essay topic of the 2024 gaokao?"}
        assert len(llm_server.requests) == 1
        streamed = list(chat.query("What was the 2024 gaokao essay topic?", LLMParameterConfig(stream=True)))
        assert streamed[-1]["result"] == first["result"] and len(llm_server.requests) == 1
        llm_server.enqueue(Reply.stream(["Par", "is"]))
        items = list(chat.query("What is the capital of France?", LLMParameterConfig(stream=True)))
        assert items[-1]["result"] == "Paris"
        assert chat.query("What is the capital city of France?")["result"] == "Paris"


def test_milvus_lite_as_the_vector_store(tmp_path: Path, minilm: TextEmbedding) -> None:
    pymilvus = pytest.importorskip("pymilvus")
    client = pymilvus.MilvusClient(str(tmp_path / "milvus.db"))
    try:
        cache = similar(tmp_path, minilm, vector_config={
            "vector_type": "milvus_db", "client": client, "x_dim": 384, "collection_name": "mxrag_cache_123",
            "use_http": False, "param": None})
        cache.update("Who wrote the play Hamlet?", "William Shakespeare")
        assert cache.search("Who is the author of the play Hamlet?") == "William Shakespeare"
        assert cache.search("How do I bake sourdough bread?") is None
    finally:
        client.close()
