# SPDX-License-Identifier: Apache-2.0
"""Seed 000, SingleText2TextChain «基本对话功能» (basic chat), as a runnable script.

Changed from the seed, and why (everything else is the seed's code, in the seed's order):
- no `from paddle.base import libpaddle`: a workaround for the original's Ascend stack; mx_rag needs no paddle.
- `langchain_text_splitters` instead of `langchain.text_splitter`: where the splitter lives in current LangChain.
- unused or duplicate imports dropped (TEIEmbedding, Img2TextLLM, the second KnowledgeStore and
  LLMParameterConfig): ruff rejects them.
- embedding: the packaged all-MiniLM-L6-v2 instead of /path/to/bge-large-zh-v1.5, so MindFAISS x_dim=384, not 1024.
- paths: the index and the databases go into a temporary folder; the documents are a PDF, a Word file and a
  PowerPoint file from tests/data/docs, which is also the white path.
- LLM: the embedded llama.cpp server ($MXRAG_LLM_MODEL or the default), started by LocalLLMServer, over http with
  ClientParam(use_http=True) instead of https + ca_file. Pass --llm-url/--llm-model (and --ca-file) for a real
  server.
- question: one about the shipped English documents instead of mxVision; max_tokens 128 instead of 1024 (a small
  CPU model).

Run (after `make setup`): .venv/bin/python examples/basic_chat.py [--question TEXT] [--llm-url URL --llm-model NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from _common import DOCS, FILES, add_llm_arguments, client_param_for, llm_endpoint
from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.chain import SingleText2TextChain
from mx_rag.document import LoaderMng
from mx_rag.document.loader import DocxLoader, PdfLoader, PowerPointLoader
from mx_rag.embedding.local import TextEmbedding
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.knowledge.handler import upload_files
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

QUESTION = "What is LayoutParser, the unified toolkit for deep learning based document image analysis?"


def main(args: argparse.Namespace, workdir: Path, llm_url: str, llm_model: str) -> None:
    loader_mng = LoaderMng()
    # 加载文档加载器，可以使用mxrag自有的，也可以使用langchain的
    loader_mng.register_loader(loader_class=PdfLoader, file_types=[".pdf"])
    loader_mng.register_loader(loader_class=DocxLoader, file_types=[".docx"])
    loader_mng.register_loader(loader_class=PowerPointLoader, file_types=[".pptx"])
    # 加载文档切分器，使用langchain的
    loader_mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter,
                                 file_types=[".pdf", ".docx", ".txt", ".md", ".xlsx", ".pptx"],
                                 splitter_params={"chunk_size": 750,
                                                  "chunk_overlap": 150,
                                                  "keep_separator": False})

    dev = 0
    # 加载embedding模型 (the packaged all-MiniLM-L6-v2, 384 dimensions)
    emb = TextEmbedding("all-MiniLM-L6-v2", dev_id=dev)
    # 初始化向量数据库
    vector_store = MindFAISS(x_dim=384, devs=[dev],
                             load_local_index=str(workdir / "faiss.index"),
                             auto_save=True)
    # 初始化文档chunk关系数据库
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    # 初始化知识管理关系数据库
    knowledge_store = KnowledgeStore(db_path=str(workdir / "sql.db"))
    # 添加知识库
    knowledge_store.add_knowledge("test", "Default", "admin")
    # 初始化知识库管理
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store,
                               chunk_store=chunk_store,
                               vector_store=vector_store,
                               knowledge_name="test",
                               white_paths=[str(DOCS)],
                               user_id="Default"
                               )
    # 上传文档到知识库
    failed = upload_files(knowledge_db, [str(f) for f in FILES], loader_mng, emb.embed_documents, True)
    print(f"uploaded {len(FILES) - len(failed)} of {len(FILES)} documents")
    # the seed: ClientParam(ca_file="/path/to/ca.crt") for https; the embedded server speaks plain http
    client_param = client_param_for(llm_url, args.ca_file)
    llm = Text2TextLLM(model_name=llm_model,
                       base_url=llm_url,
                       client_param=client_param)
    r = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=1,
                  score_threshold=args.score_threshold)
    rag = SingleText2TextChain(retriever=r, llm=llm)
    response = rag.query(args.question, LLMParameterConfig(max_tokens=128, temperature=1.0, top_p=0.1))
    print(response)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--score-threshold", type=float, default=0.6)
    add_llm_arguments(parser, "Meta-Llama-3-8B-Instruct")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="mxrag-basic-chat-") as tmp, contextlib.ExitStack() as stack:
        main(arguments, Path(tmp), *llm_endpoint(arguments, stack))
