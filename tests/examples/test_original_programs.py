"""The original SDK's example programs (its example/ folder), written again from what they do, with
only the edits a user makes off Ascend hardware: paths, URLs, device ids. Services are real code
behind HTTP on 127.0.0.1: a TEI-style server whose /embed runs the packaged MiniLM and whose /rerank
scores with BM25.

Covered here: ``langgraph`` (its data side: loaders, factories, knowledge base, retriever) and
``chat_with_ascend`` (its data side: files saved outside ``white_paths`` and added with
``KnowledgeDB.add_file``, MilvusDB on milvus-lite). ``parse_document`` is in
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

    model = TextEmbedding()

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
    # create_hybrid_search_retriever (its EnsembleRetriever of one retriever, weight 1.0, is that retriever)
    retriever = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=embedding.embed_documents,
                          k=10, score_threshold=0.4)
    docs = retriever.invoke("How do I install MindIE on Ascend?")
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
