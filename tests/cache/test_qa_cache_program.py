"""The original SDK's ``qa_cache`` example program, written again from what it does (paths changed):

a memory cache in front of a similarity cache, pre-filled with question/answer pairs an LLM writes
from a Markdown file (``MarkDownParser``, ``QAGenerate``), a knowledge base of the same file
(``upload_files``: FAISS and SQLite), and ``CacheChainChat`` over ``SingleText2TextChain``: a
paraphrase of a pre-filled question is answered from the cache, another question by the chain (and
then from the cache). The program's ``SimilarityStrategy.FLAT_L2`` (an older API, not in the
reference) is the reference's ``metric_type="L2"`` here. The embedding and the tokenizer are the
packaged MiniLM (384 dimensions for the program's 1024); the LLM is the scripted OpenAI-compatible
server.
"""

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

GAOKAO = (
    "# 2024 Gaokao essay topics\n\n"
    "The national paper I essay of the 2024 gaokao asked students to write about artificial intelligence "
    "and whether more answers lead to fewer questions.\n"
    "The Beijing paper asked for an essay on the meaning of a single sentence of classical literature.\n"
)


def test_the_qa_cache_program(tmp_path: Path) -> None:
    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from transformers import AutoTokenizer

    from mx_rag.cache import (
        CacheChainChat,
        CacheConfig,
        MarkDownParser,
        MxRAGCache,
        QAGenerate,
        QAGenerationConfig,
        SimilarityCacheConfig,
    )
    from mx_rag.chain import SingleText2TextChain
    from mx_rag.document import LoaderMng
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.embedding.local.model_info import minilm_dir
    from mx_rag.knowledge import KnowledgeDB
    from mx_rag.knowledge.handler import upload_files
    from mx_rag.knowledge.knowledge import KnowledgeStore
    from mx_rag.llm import Text2TextLLM
    from mx_rag.retrievers import Retriever
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS
    from mx_rag.testing import Reply, ScriptedServer
    from mx_rag.utils import ClientParam

    home = tmp_path / "HwHiAiUser"
    home.mkdir()
    (home / "gaokao.md").write_text(GAOKAO, encoding="utf-8")
    cache_dir = home / "cache_save_dir"
    embedding_path = str(minilm_dir())
    memory_cache = MxRAGCache("memory_cache", CacheConfig(cache_size=100, data_save_folder=str(cache_dir)))
    similarity_cache = MxRAGCache("similarity_cache", SimilarityCacheConfig(
        vector_config={"vector_type": "npu_faiss_db", "x_dim": 384, "devs": [0],
                       "metric_type": "L2"},
        cache_config="sqlite",
        emb_config={"embedding_type": "local_text_embedding", "x_dim": 384, "model_path": embedding_path,
                    "dev_id": 0},
        similarity_config={}, retrieval_top_k=5, cache_size=1000, similarity_threshold=0.8,
        data_save_folder=str(cache_dir)))
    memory_cache.join(similarity_cache)

    with ScriptedServer() as server:
        llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="Llama3-8B-Chinese-Chat",
                           client_param=ClientParam(use_http=True, timeout=600))
        titles, contents = MarkDownParser(str(home)).parse()
        tokenizer = AutoTokenizer.from_pretrained(embedding_path, local_files_only=True)
        server.enqueue(Reply.chat(
            "Q1: What was the topic of the national paper I essay of the 2024 gaokao?\n"
            "Reference: The national paper I essay of the 2024 gaokao asked students to write about artificial "
            "intelligence and whether more answers lead to fewer questions.\n"))
        qas = QAGenerate(QAGenerationConfig(titles, contents, tokenizer, llm, qas_num=3)).generate_qa()
        assert len(qas) == 1
        for query, answer in qas.items():
            memory_cache.update(query, json.dumps({"result": answer}))

        loader_mng = LoaderMng()
        loader_mng.register_loader(loader_class=TextLoader, file_types=[".txt", ".md", ".docx"])
        loader_mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter, file_types=[".txt", ".md", ".docx"],
                                     splitter_params={"chunk_size": 750, "chunk_overlap": 150,
                                                      "keep_separator": False})
        vector_store = MindFAISS(x_dim=384, metric_type="L2", devs=[0],
                                 load_local_index=str(cache_dir / "faiss.index"))
        emb = TextEmbedding(model_path=embedding_path, dev_id=0)
        chunk_store = SQLiteDocstore(db_path=str(home / "sql.db"))
        knowledge_store = KnowledgeStore(db_path=str(home / "sql.db"))
        knowledge_store.add_knowledge("test", "Default", "admin")  # as the reference's examples do
        knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                                   knowledge_name="test", white_paths=[str(home)],
                                   user_id="Default")  # required by the reference, left out by the program
        upload_files(knowledge=knowledge_db, files=[str(home / "gaokao.md")], loader_mng=loader_mng,
                     embed_func=emb.embed_documents, force=True)
        text_retriever = Retriever(vector_store=vector_store, document_store=chunk_store,
                                   embed_func=emb.embed_documents, k=3, score_threshold=0.5)
        cache_chain = CacheChainChat(chain=SingleText2TextChain(llm, text_retriever), cache=memory_cache)

        asked = len(server.requests)
        hit = cache_chain.query("What was the topic of the 2024 gaokao national paper I essay?")
        assert isinstance(hit, dict) and "artificial intelligence" in hit["result"]
        assert len(server.requests) == asked  # answered from the cache

        server.enqueue(Reply.chat("A sentence of classical literature."))
        missed = cache_chain.query("What did the Beijing paper ask for?")
        assert isinstance(missed, dict) and missed["result"] == "A sentence of classical literature."
        assert len(server.requests) == asked + 1
        assert "Beijing paper" in server.requests[-1].json["messages"][-1]["content"]  # the chain retrieved the file
        again = cache_chain.query("What did the Beijing paper ask for?")
        assert isinstance(again, dict) and again["result"] == missed["result"] and len(server.requests) == asked + 1
