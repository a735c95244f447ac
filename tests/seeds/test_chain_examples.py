"""The chain module's examples (seeds 000-003), with only paths, URLs and the vector width changed.

The seeds embed with bge-large-zh-v1.5 (1024 dimensions); here the packaged all-MiniLM-L6-v2
(384) plays that role, so ``x_dim`` follows it.
"""

from pathlib import Path
from typing import List

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter  # the seeds' langchain.text_splitter

from mx_rag.testing import Reply, ScriptedServer


def build_knowledge_base(workdir: Path, minilm_path: str, loader_params: dict | None = None):  # type: ignore[no-untyped-def]
    from mx_rag.document import LoaderMng
    from mx_rag.document.loader import DocxLoader, PdfLoader, PowerPointLoader
    from mx_rag.embedding.local import TextEmbedding
    from mx_rag.knowledge import KnowledgeDB
    from mx_rag.knowledge.handler import upload_files
    from mx_rag.knowledge.knowledge import KnowledgeStore
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS

    params = loader_params or {}
    loader_mng = LoaderMng()
    loader_mng.register_loader(loader_class=PdfLoader, file_types=[".pdf"], **params)
    loader_mng.register_loader(loader_class=DocxLoader, file_types=[".docx"], **params)
    loader_mng.register_loader(loader_class=PowerPointLoader, file_types=[".pptx"], **params)
    loader_mng.register_splitter(
        splitter_class=RecursiveCharacterTextSplitter,
        file_types=[".pdf", ".docx", ".txt", ".md", ".xlsx", ".pptx"],
        splitter_params={"chunk_size": 750, "chunk_overlap": 150, "keep_separator": False},
    )
    dev = 0
    emb = TextEmbedding(minilm_path, dev_id=dev)
    vector_store = MindFAISS(x_dim=384, devs=[dev], load_local_index=str(workdir / "faiss.index"), auto_save=True)
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    knowledge_store = KnowledgeStore(db_path=str(workdir / "sql.db"))
    knowledge_store.add_knowledge("test", "Default", "admin")
    knowledge_db = KnowledgeDB(
        knowledge_store=knowledge_store,
        chunk_store=chunk_store,
        vector_store=vector_store,
        knowledge_name="test",
        white_paths=[str(workdir)],
        user_id="Default",
    )
    files = [
        str(workdir / "files" / n)
        for n in ("layout-parser-paper-fast.pdf", "fake.docx", "fake-power-point.pptx", "embedded-images.pdf")
    ]
    failed = upload_files(knowledge_db, files, loader_mng, emb.embed_documents, True)
    assert failed == []
    return emb, vector_store, chunk_store, knowledge_db


QUESTION = "What is LayoutParser, the unified toolkit for deep learning based document image analysis?"


def test_basic_chat_example(workdir: Path, minilm_path: str, https_server: ScriptedServer, ca_file: str) -> None:
    from mx_rag.chain import SingleText2TextChain
    from mx_rag.llm import LLMParameterConfig, Text2TextLLM
    from mx_rag.retrievers import Retriever
    from mx_rag.utils import ClientParam

    emb, vector_store, chunk_store, _ = build_knowledge_base(workdir, minilm_path)
    client_param = ClientParam(ca_file=ca_file)
    llm = Text2TextLLM(
        model_name="Meta-Llama-3-8B-Instruct",
        base_url=https_server.url("/v1/chat/completions"),
        client_param=client_param,
    )
    r = Retriever(
        vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=1, score_threshold=0.6
    )
    rag = SingleText2TextChain(retriever=r, llm=llm)
    response = rag.query(QUESTION, LLMParameterConfig(max_tokens=1024, temperature=1.0, top_p=0.1))
    assert response["query"] == QUESTION
    (source,) = response["source_documents"]
    assert "LayoutParser" in source["page_content"] and source["metadata"]["score"] >= 0.6
    assert source["metadata"]["source"].endswith("layout-parser-paper-fast.pdf")
    assert response["result"].startswith("echo: ") and "LayoutParser" in response["result"]
    body = https_server.requests[-1].json
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (1024, 1.0, 0.1)


TEXT_INFER_PROMPT = """
You are a helpful question-answering assistant. Your task is to generate a interleaved text and image response
based on provided questions and quotes. Cite images using the format `![{conclusion}](image index)`.
"""


def user_content_builder(query: str, docs: List[Document], *args, **kwargs):  # type: ignore[no-untyped-def]
    text_docs = [doc for doc in docs if doc.metadata.get("type", "") == "text"]
    img_docs = [doc for doc in docs if doc.metadata.get("type", "") == "image"]
    user_message = []
    if len(text_docs) > 0:
        user_message.append("Text Quotes are:")
        for i, doc in enumerate(text_docs):
            user_message.append(f"\n[{i + 1}] {doc.page_content}")
    if len(img_docs) > 0:
        user_message.append("\nImage Quotes are:")
        for i, doc in enumerate(img_docs):
            user_message.append(f"\nimage{i + 1} is described as: {doc.page_content}")
    user_message.append("\n\n")
    user_message.append(f"The user question is: {query}")
    return "".join(user_message)


def test_image_and_text_example(workdir: Path, minilm_path: str, https_server: ScriptedServer, ca_file: str) -> None:
    from mx_rag.chain import SingleText2TextChain
    from mx_rag.llm import Img2TextLLM, LLMParameterConfig, Text2TextLLM
    from mx_rag.retrievers import Retriever
    from mx_rag.utils import ClientParam

    vlm = Img2TextLLM(
        base_url=https_server.url("/openai/v1/chat/completions"),
        model_name="Qwen2.5-VL-7B-Instruct",
        llm_config=LLMParameterConfig(max_tokens=512),
        client_param=ClientParam(ca_file=ca_file),
    )
    emb, vector_store, chunk_store, knowledge_db = build_knowledge_base(
        workdir, minilm_path, {"loader_params": {"vlm": vlm}}
    )
    images = [
        d
        for doc_id in knowledge_db.document_ids()
        for d in chunk_store.search_by_document_id(doc_id)
        if d.metadata.get("type") == "image"
    ]
    assert images, "the VLM captioned no picture"
    assert all(d.metadata["image_base64"] and d.page_content.startswith("echo: ") for d in images)
    vlm_call = next(r for r in https_server.requests if r.path.startswith("/openai/"))
    assert vlm_call.json["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/")

    llm = Text2TextLLM(
        model_name="Meta-Llama-3-8B-Instruct",
        base_url=https_server.url("/v1/chat/completions"),
        client_param=ClientParam(ca_file=ca_file),
    )
    sys_messages = [{"role": "system", "content": TEXT_INFER_PROMPT}]
    r = Retriever(
        vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=3, score_threshold=0.1
    )
    rag = SingleText2TextChain(
        retriever=r, llm=llm, sys_messages=sys_messages, user_content_builder=user_content_builder
    )
    response = rag.query(images[0].page_content, LLMParameterConfig(max_tokens=1024, temperature=1.0, top_p=0.1))
    kinds = {d["metadata"]["type"] for d in response["source_documents"]}
    assert "image" in kinds
    image_doc = next(d for d in response["source_documents"] if d["metadata"]["type"] == "image")
    assert image_doc["metadata"]["image_base64"]
    sent = https_server.requests[-1].json["messages"]
    assert sent[0] == {"role": "system", "content": TEXT_INFER_PROMPT}
    assert "Image Quotes are:" in sent[-1]["content"]


def test_multi_query_example(workdir: Path, minilm_path: str, https_server: ScriptedServer, ca_file: str) -> None:
    from mx_rag.llm import Text2TextLLM
    from mx_rag.retrievers import MultiQueryRetriever
    from mx_rag.utils import ClientParam

    emb, vector_store, chunk_store, _ = build_knowledge_base(workdir, minilm_path)
    llm = Text2TextLLM(
        base_url=https_server.url("/v1/chat/completions"),
        model_name="Llama3-8B-Chinese-Chat",
        client_param=ClientParam(ca_file=ca_file),
    )
    multi_text_retriever = MultiQueryRetriever(
        llm=llm,
        vector_store=vector_store,
        document_store=chunk_store,
        embed_func=emb.embed_documents,
        k=1,
        score_threshold=0.2,
    )
    https_server.enqueue(Reply.chat("1. What is LayoutParser?\n2. How are bullet slides added?\n3. Lorem ipsum?"))
    res = multi_text_retriever.invoke("Describe the LayoutParser toolkit.")
    assert len(res) >= 2 and len({d.page_content for d in res}) == len(res)
    assert [len(d.page_content) for d in res] == sorted((len(d.page_content) for d in res), reverse=True)


def test_parallel_chain_example(workdir: Path, minilm_path: str, https_server: ScriptedServer, ca_file: str) -> None:
    from mx_rag.chain import ParallelText2TextChain
    from mx_rag.llm import Text2TextLLM
    from mx_rag.retrievers import Retriever
    from mx_rag.utils import ClientParam

    emb, vector_store, chunk_store, _ = build_knowledge_base(workdir, minilm_path)
    client_param = ClientParam(ca_file=ca_file)
    llm = Text2TextLLM(
        model_name="Meta-Llama-3-8B-Instruct",
        base_url=https_server.url("/v1/chat/completions"),
        client_param=client_param,
    )
    retriever = Retriever(
        vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=1, score_threshold=0.6
    )
    parallel_chain = ParallelText2TextChain(llm=llm, retriever=retriever)
    answer = parallel_chain.query(text="123456")
    assert answer["query"] == answer["prompt"] == "123456"
    assert answer["result"].startswith("echo: ") and "source_documents" in answer


def test_text2img_example(https_server: ScriptedServer, ca_file: str) -> None:
    from mx_rag.chain import Text2ImgChain
    from mx_rag.llm import Text2ImgMultiModel
    from mx_rag.utils import ClientParam

    client_param = ClientParam(ca_file=ca_file)
    multi_model = Text2ImgMultiModel(model_name="sd", url=https_server.url("/text2img"), client_param=client_param)
    text2img_chain = Text2ImgChain(multi_model=multi_model)
    llm_data = text2img_chain.query("dog wearing black glasses", output_format="jpg")
    assert llm_data["prompt"] == "dog wearing black glasses"
    import base64

    assert base64.b64decode(llm_data["result"]).startswith(b"\x89PNG")
