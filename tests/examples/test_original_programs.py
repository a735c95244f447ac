"""The original SDK's example programs (its example/ folder), written again from what they do, with
only the edits a user makes off Ascend hardware: paths, URLs, device ids. Services are real code
behind HTTP on 127.0.0.1: a TEI-style server whose /embed runs the packaged MiniLM and whose /rerank
scores with BM25.

Covered here: ``langgraph`` (its data side: loaders, factories, knowledge base, retriever),
``chat_with_ascend`` (its data side: files saved outside ``white_paths`` and added with
``KnowledgeDB.add_file``, MilvusDB on milvus-lite), ``rag_with_api``, ``dify`` (data side) and
``concurrent_query``. ``parse_document`` is in
tests/document/test_markdown_splitter.py, ``embedding_finetune`` in tests/finetune/test_trainer.py,
``chat_with_ascend``'s graph side (``age_graph``) in tests/graphrag/test_age_graph.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mx_rag.embedding.local import TextEmbedding
from mx_rag.testing import RecordedRequest, Reply, ScriptedServer
from mx_rag.utils import ClientParam

PARAGRAPHS = [
    "MindIE is an inference engine for Ascend NPUs. Install it after the CANN toolkit.",
    "The CANN toolkit provides drivers, compilers and operator libraries for Ascend hardware.",
    "RAG SDK builds knowledge bases: documents are split into chunks and embedded.",
    "Milvus is a vector database; milvus-lite keeps the collection in a local file.",
]


@pytest.fixture(scope="module")
def services() -> Iterator[ScriptedServer]:
    """/embed: MiniLM vectors (TEI format); /rerank: BM25 scores of the texts for the query."""
    from mx_rag.retrievers.bm25 import BM25Index

    model = TextEmbedding("all-MiniLM-L6-v2")

    def answer(request: RecordedRequest) -> Reply | None:
        body: dict[str, Any] = request.json or {}
        if request.path.endswith("/embed"):
            return Reply.json(model.embed_documents(body["inputs"]))
        if request.path.endswith("/rerank"):
            scores = BM25Index(body["texts"]).query(body["query"])
            return Reply.json([{"index": i, "score": s} for i, s in enumerate(scores)])
        return None

    with ScriptedServer(responder=answer) as server:
        yield server


def make_docx(path: Path, paragraphs: list[str]) -> Path:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return path


def test_langgraph_data_side(services: ScriptedServer, tmp_path: Path) -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import DocxLoader
    from mx_rag.embedding import EmbeddingFactory
    from mx_rag.knowledge import KnowledgeDB
    from mx_rag.knowledge.handler import upload_files
    from mx_rag.knowledge.knowledge import KnowledgeStore
    from mx_rag.reranker.reranker_factory import RerankerFactory
    from mx_rag.retrievers.retriever import Retriever
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS

    home = tmp_path / "HwHiAiUser"  # the program's /home/HwHiAiUser/
    home.mkdir()
    knowledge_files = [str(make_docx(home / "mindie.docx", PARAGRAPHS[:2])),
                       str(make_docx(home / "rag.docx", PARAGRAPHS[2:]))]
    # create_loader_and_spliter
    loader_mng = LoaderMng()
    loader_mng.register_loader(DocxLoader, [".docx"])
    loader_mng.register_splitter(RecursiveCharacterTextSplitter, [".docx"],
                                 {"chunk_size": 200, "chunk_overlap": 50, "keep_separator": False})
    # create_remote_connector
    reranker = RerankerFactory.create_reranker(similarity_type="tei_reranker", url=services.url("/rerank"),
                                               client_param=ClientParam(use_http=True), k=3)
    embedding = EmbeddingFactory.create_embedding(embedding_type="tei_embedding", url=services.url("/embed"),
                                                  client_param=ClientParam(use_http=True))
    # create_knowledge_storage (x_dim 1024 of bge-large becomes MiniLM's 384)
    vector_store = MindFAISS(x_dim=384, devs=[0], load_local_index=str(home / "rag_npu_faiss.index"))
    chunk_store = SQLiteDocstore(db_path=str(home / "rag_sql.db"))
    knowledge_store = KnowledgeStore(db_path=str(home / "rag_sql.db"))
    knowledge_store.add_knowledge("rag", "Default01", "admin")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                               knowledge_name="rag", white_paths=[str(home)], user_id="Default01")
    failed = upload_files(knowledge_db, knowledge_files, loader_mng=loader_mng,
                          embed_func=embedding.embed_documents, force=True)
    assert failed == []
    # create_hybrid_search_retriever: LangChain's EnsembleRetriever over our Retriever (langchain 1.x keeps it
    # in langchain_classic; the program imports it from langchain.retrievers, its 0.x home)
    from langchain_classic.retrievers import EnsembleRetriever

    retriever = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=embedding.embed_documents,
                          k=10, score_threshold=0.4)
    hybrid = EnsembleRetriever(retrievers=[retriever], weights=[1.0])
    docs = hybrid.invoke("How do I install MindIE on Ascend?")
    assert docs and "MindIE" in docs[0].page_content
    ranked = reranker.rerank_top_k(docs, reranker.rerank("install MindIE", [d.page_content for d in docs]))
    assert len(ranked) <= 3 and "MindIE" in ranked[0].page_content


def test_chat_with_ascend_data_side(services: ScriptedServer, tmp_path: Path) -> None:
    """upload_file(): the file is saved under WORKSPACE_DIR/<name>_data, outside the knowledge base's
    white_paths (the temp directory in the program), parsed with the loader and splitter registered
    for its suffix, and stored with KnowledgeDB.add_file; then listed, and the base cleared."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from pymilvus import MilvusClient

    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import DocxLoader
    from mx_rag.embedding.service import TEIEmbedding
    from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
    from mx_rag.storage.vectorstore import MilvusDB

    try:  # the program's chunk store; SQLite until MilvusDocstore is in mx_rag
        from mx_rag.storage.document_store import MilvusDocstore  # type: ignore[attr-defined]
    except ImportError:
        MilvusDocstore = None

    workspace = tmp_path / "workspace"
    upload_file_dir = workspace / "test_wyj_data"
    upload_file_dir.mkdir(parents=True)
    white = tmp_path / "tmpdir"  # tempfile.gettempdir() of the program: not where uploads go
    white.mkdir()
    knowledge_store = KnowledgeStore(db_path=str(workspace / "knowledge_store_sql.db"))
    milvus_client = MilvusClient(str(workspace / "milvus.db"))
    vector_store = MilvusDB.create(client=milvus_client, x_dim=384, collection_name="test_wyj_vector")
    if MilvusDocstore is not None:
        chunk_store = MilvusDocstore(milvus_client, collection_name="test_wyj_chunk")
    else:
        from mx_rag.storage.document_store import SQLiteDocstore

        chunk_store = SQLiteDocstore(db_path=str(workspace / "chunks.db"))
    knowledge_store.add_knowledge("test_wyj", user_id="Default01")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                               knowledge_name="test_wyj", white_paths=[str(white)], user_id="Default01")
    loader_mng = LoaderMng()
    loader_mng.register_loader(DocxLoader, [".docx"])
    loader_mng.register_splitter(RecursiveCharacterTextSplitter, [".docx"], {"chunk_size": 200, "chunk_overlap": 20})
    emb = TEIEmbedding(url=services.url("/embed"), client_param=ClientParam(use_http=True))

    file_obj = make_docx(upload_file_dir / "guide.docx", PARAGRAPHS)
    loader_info, splitter_info = loader_mng.get_loader(file_obj.suffix), loader_mng.get_splitter(file_obj.suffix)
    assert not knowledge_db.check_document_exist(file_obj.name)
    loader = loader_info.loader_class(file_path=file_obj.as_posix(), **loader_info.loader_params)
    splitter = splitter_info.splitter_class(**splitter_info.splitter_params)
    docs = loader.load_and_split(splitter)
    texts = [doc.page_content for doc in docs if doc.page_content]
    meta_data = [{**doc.metadata, "type": "text"} for doc in docs if doc.page_content]
    knowledge_db.add_file(file_obj, texts, {"dense": emb.embed_documents}, meta_data)

    assert knowledge_db.check_document_exist(file_obj.name)
    assert [d.document_name for d in knowledge_db.get_all_documents()] == ["guide.docx"]
    assert vector_store.get_ntotal() == len(texts) == chunk_store.count()
    knowledge_db.delete_all()
    assert vector_store.get_ntotal() == 0


def milvus_docstore() -> Any:
    """MilvusDocstore, or a skip until mx_rag has it (it comes with the stores work of issue 31)."""
    module = pytest.importorskip("mx_rag.storage.document_store")
    if not hasattr(module, "MilvusDocstore"):
        pytest.skip("mx_rag.storage.document_store.MilvusDocstore is not in this checkout")
    return module.MilvusDocstore


def test_rag_with_api_programs(services: ScriptedServer, tmp_path: Path) -> None:
    """rag_demo_knowledge.py (upload files from threads into Milvus-backed stores) then
    rag_demo_query.py (answer questions from threads with SingleText2TextChain, k=1)."""
    import threading

    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from pymilvus import MilvusClient

    from mx_rag.chain import SingleText2TextChain
    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import DocxLoader, PdfLoader
    from mx_rag.embedding.service import TEIEmbedding
    from mx_rag.knowledge import KnowledgeDB
    from mx_rag.knowledge.handler import upload_files
    from mx_rag.knowledge.knowledge import KnowledgeStore
    from mx_rag.llm import Text2TextLLM
    from mx_rag.retrievers import Retriever
    from mx_rag.storage.vectorstore import MilvusDB

    docstore = milvus_docstore()
    files = []
    for i, text in enumerate(PARAGRAPHS):
        files.append(tmp_path / f"doc{i}.txt")
        files[-1].write_text(text, encoding="utf-8")
    loader_mng = LoaderMng()
    loader_mng.register_loader(loader_class=TextLoader, file_types=[".txt", ".md"])
    loader_mng.register_loader(loader_class=PdfLoader, file_types=[".pdf"])
    loader_mng.register_loader(loader_class=DocxLoader, file_types=[".docx"])
    loader_mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter,
                                 file_types=[".pdf", ".docx", ".txt", ".md"],
                                 splitter_params={"chunk_size": 750, "chunk_overlap": 150, "keep_separator": False})
    emb = TEIEmbedding(url=services.url("/embed"), client_param=ClientParam(use_http=True))
    embedding_dim = len(emb.embed_documents(["test"])[0])
    client = MilvusClient(str(tmp_path / "milvus.db"))
    vector_store = MilvusDB.create(client=client, x_dim=embedding_dim, collection_name="milvus_vector",
                                   auto_flush=False)
    chunk_store = docstore(client=client, collection_name="milvus_chunk", auto_flush=False)
    knowledge_store = KnowledgeStore(db_path=str(tmp_path / "milvus-knowledge.db"))
    knowledge_store.add_knowledge("test", "Default", "admin")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                               knowledge_name="test", white_paths=[str(tmp_path)], user_id="Default",
                               lock=threading.Lock())
    batches = [[str(f) for f in files[:2]], [str(f) for f in files[2:]]]
    threads = [threading.Thread(target=upload_files, args=(knowledge_db, batch, loader_mng, emb.embed_documents, True))
               for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(d.document_name for d in knowledge_db.get_all_documents()) == [f.name for f in files]

    with ScriptedServer() as llm_server:  # echoes the prompt: the answer shows the context it got
        retriever = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents,
                              k=1, score_threshold=0.3)
        llm = Text2TextLLM(base_url=llm_server.url("/v1/chat/completions"), model_name="qwen",
                           client_param=ClientParam(use_http=True, timeout=60))
        results: dict[str, Any] = {}

        def ask(question: str) -> None:
            results[question] = SingleText2TextChain(retriever=retriever, llm=llm).query(question)

        questions = ["What is Milvus?", "What does the CANN toolkit provide?"]
        workers = [threading.Thread(target=ask, args=(q,)) for q in questions]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert "milvus-lite" in results[questions[0]]["source_documents"][0]["page_content"]
    assert "operator libraries" in results[questions[1]]["source_documents"][0]["page_content"]
    client.close()


def test_dify_program_data_side(services: ScriptedServer, tmp_path: Path) -> None:
    """dify_demo.py: files added through KnowledgeDB, then retrieve_similarity_docs(): dense Retriever
    plus FullTextRetriever on the Milvus chunk store, deduplicated, reranked by TEI."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from pymilvus import MilvusClient

    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import DocxLoader
    from mx_rag.embedding.service import TEIEmbedding
    from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
    from mx_rag.reranker.service import TEIReranker
    from mx_rag.retrievers import FullTextRetriever, Retriever
    from mx_rag.storage.vectorstore import MilvusDB

    docstore = milvus_docstore()
    home = tmp_path / "home"
    home.mkdir()
    client = MilvusClient(str(tmp_path / "milvus.db"))
    vector_store = MilvusDB.create(client=client, x_dim=384, collection_name="kb_vector")
    chunk_store = docstore(client, collection_name="kb_chunk")
    knowledge_store = KnowledgeStore(db_path=str(tmp_path / "knowledge_store_sql.db"))
    knowledge_store.add_knowledge("kb", user_id="knowledge_demo")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                               knowledge_name="kb", white_paths=[str(home)], user_id="knowledge_demo")
    emb = TEIEmbedding(url=services.url("/embed"), client_param=ClientParam(use_http=True))
    loader_mng = LoaderMng()
    loader_mng.register_loader(loader_class=DocxLoader, file_types=[".docx"])
    loader_mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter, file_types=[".docx"],
                                 splitter_params={"chunk_size": 120, "chunk_overlap": 0, "keep_separator": False})
    path = make_docx(home / "guide.docx", PARAGRAPHS)
    loader_info, splitter_info = loader_mng.get_loader(".docx"), loader_mng.get_splitter(".docx")
    docs = loader_info.loader_class(file_path=str(path)).load_and_split(
        splitter_info.splitter_class(**splitter_info.splitter_params))
    knowledge_db.add_file(path, [d.page_content for d in docs], emb.embed_documents,
                          [d.metadata for d in docs])

    query = "Which vector database keeps its collection in a local file?"
    dense = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=3,
                      score_threshold=0.1).invoke(query)
    full_text = FullTextRetriever(document_store=chunk_store, k=3).invoke(query)
    unique = list({d.page_content: d for d in dense + full_text}.values())
    reranker = TEIReranker(url=services.url("/rerank"), client_param=ClientParam(use_http=True), k=1)
    best = reranker.rerank_top_k(unique, reranker.rerank(query, [d.page_content for d in unique]))
    assert "milvus-lite" in best[0].page_content
    client.close()


def test_concurrent_query_program(services: ScriptedServer, tmp_path: Path) -> None:
    """concurrent_query/fastapi_multithread.py with its TEI options: a .docx uploaded into SQLite and
    FAISS stores, then POST /query/ answered by SingleText2TextChain (k=1, TEI reranker) on a
    thread pool, several questions at once (fastapi_request.py's client side). The one edit beyond
    paths and URLs: MindFAISS's dimension, 384 for the MiniLM behind /embed instead of 1024."""
    from concurrent.futures import ThreadPoolExecutor

    from fastapi import FastAPI, HTTPException
    from fastapi.testclient import TestClient
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from mx_rag.chain import SingleText2TextChain
    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import DocxLoader
    from mx_rag.embedding.service import TEIEmbedding
    from mx_rag.knowledge import KnowledgeDB
    from mx_rag.knowledge.handler import upload_files
    from mx_rag.knowledge.knowledge import KnowledgeStore
    from mx_rag.llm import Text2TextLLM
    from mx_rag.reranker.service import TEIReranker
    from mx_rag.retrievers import Retriever
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS

    home = tmp_path / "home"
    home.mkdir()
    sql_path, vector_path = str(tmp_path / "sql.db"), str(tmp_path / "faiss.index")
    emb = TEIEmbedding(url=services.url("/embed"), client_param=ClientParam(use_http=True))
    chunk_store = SQLiteDocstore(db_path=sql_path)
    vector_store = MindFAISS(384, [0], load_local_index=vector_path)
    text_retriever = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents,
                               k=1, score_threshold=0.5)
    knowledge_store = KnowledgeStore(db_path=sql_path)
    knowledge_store.add_knowledge("test", "Default01", "admin")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                               knowledge_name="test", white_paths=[str(home)], user_id="Default01")
    loader_mng = LoaderMng()
    loader_mng.register_loader(DocxLoader, [".docx"])
    loader_mng.register_splitter(RecursiveCharacterTextSplitter, [".xlsx", ".docx", ".pdf"],
                                 {"chunk_size": 100, "chunk_overlap": 0, "keep_separator": False})
    upload_files(knowledge_db, [str(make_docx(home / "guide.docx", PARAGRAPHS))], loader_mng=loader_mng,
                 embed_func=emb.embed_documents, force=True)
    reranker = TEIReranker(url=services.url("/rerank"), client_param=ClientParam(use_http=True))

    with ScriptedServer() as llm_server:  # echoes the prompt: the answer shows the context it got
        llm = Text2TextLLM(base_url=llm_server.url("/v1/chat/completions"), model_name="Llama3-8B-Chinese-Chat",
                           client_param=ClientParam(use_http=True))
        app = FastAPI()
        pool = ThreadPoolExecutor(max_workers=10)

        def fun(input_string: str) -> str:
            return f"{SingleText2TextChain(retriever=text_retriever, llm=llm, reranker=reranker).query(input_string)}"

        @app.post("/query/")
        async def call_fun(items: dict[str, Any]) -> dict[str, str]:
            future = pool.submit(fun, items["question"])
            try:
                return {"result": future.result()}
            except Exception as exc:
                raise HTTPException(status_code=500) from exc

        questions = ["What is Milvus?", "What does the CANN toolkit provide?", "What is MindIE?"]
        with TestClient(app) as http, ThreadPoolExecutor(max_workers=3) as clients:
            answers = list(clients.map(lambda q: http.post("/query/", json={"question": q}), questions))
        pool.shutdown()
    assert [a.status_code for a in answers] == [200, 200, 200]
    results = [a.json()["result"] for a in answers]
    assert "milvus-lite" in results[0] and "operator libraries" in results[1]
    assert "'source_documents': []" in results[2]  # MiniLM scores "MindIE" under the program's 0.5
