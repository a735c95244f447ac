# SPDX-License-Identifier: Apache-2.0
"""What the example scripts share, beside the seeds' own code (which each script keeps as written).

* ``DOCS`` and ``FILES``: the shipped documents (tests/data/docs, also the white path) and the PDF, Word
  and PowerPoint files the text examples upload;
* ``client_param_for``: the seed's ``ClientParam(ca_file=...)`` for https, plain http for the local servers;
* ``add_llm_arguments`` and ``llm_endpoint``: ``--llm-url``/``--llm-model``/``--ca-file``, else the embedded
  llama.cpp server (``LocalLLMServer``, $MXRAG_LLM_MODEL or the default) on a free port;
* ``build_knowledge_base`` and ``upload_documents``: the knowledge base that the seeds of the multi-query and
  parallel-chain examples assume was built earlier (the basic-chat example's upload, in short).

A script run as ``python examples/<name>.py`` has examples/ first on ``sys.path``: ``from _common import ...``.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.document import LoaderMng
from mx_rag.document.loader import DocxLoader, PdfLoader, PowerPointLoader
from mx_rag.embedding.local import TextEmbedding
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.knowledge.handler import upload_files
from mx_rag.llm.local_server import LocalLLMServer
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.utils import ClientParam

DOCS = Path(__file__).resolve().parents[1] / "tests" / "data" / "docs"
FILES = [DOCS / "layout-parser-paper-fast.pdf", DOCS / "fake.docx", DOCS / "fake-power-point.pptx"]


def client_param_for(url: str, ca_file: str | None) -> ClientParam:
    """The seed's ClientParam(ca_file=...) for https; plain http (use_http=True) for the local servers."""
    return ClientParam(ca_file=ca_file) if ca_file else ClientParam(use_http=url.startswith("http:"))


def add_llm_arguments(parser: argparse.ArgumentParser, default_model: str,
                      ca_help: str = "CA certificate for an https --llm-url") -> None:
    parser.add_argument("--llm-url", help="an OpenAI-compatible .../v1/chat/completions URL (default: embedded LLM)")
    parser.add_argument("--llm-model", default=default_model, help="model name for --llm-url")
    parser.add_argument("--ca-file", help=ca_help)


def llm_endpoint(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[str, str]:
    """(URL, model name): ``--llm-url`` and ``--llm-model``, else the embedded LLM, stopped when ``stack`` closes."""
    if args.llm_url:
        return args.llm_url, args.llm_model
    server = stack.enter_context(LocalLLMServer())  # the embedded LLM, on a free port
    return server.chat_url, server.model_name


def upload_documents(workdir: Path, emb: TextEmbedding, vector_store: MindFAISS, chunk_store: SQLiteDocstore) -> None:
    """FILES into a knowledge base "test" over the given stores (registry in ``workdir``/sql.db)."""
    loader_mng = LoaderMng()
    loader_mng.register_loader(loader_class=PdfLoader, file_types=[".pdf"])
    loader_mng.register_loader(loader_class=DocxLoader, file_types=[".docx"])
    loader_mng.register_loader(loader_class=PowerPointLoader, file_types=[".pptx"])
    loader_mng.register_splitter(splitter_class=RecursiveCharacterTextSplitter,
                                 file_types=[".pdf", ".docx", ".pptx"],
                                 splitter_params={"chunk_size": 750, "chunk_overlap": 150, "keep_separator": False})
    knowledge_store = KnowledgeStore(db_path=str(workdir / "sql.db"))
    knowledge_store.add_knowledge("test", "Default", "admin")
    knowledge_db = KnowledgeDB(knowledge_store=knowledge_store, chunk_store=chunk_store, vector_store=vector_store,
                               knowledge_name="test", white_paths=[str(DOCS)], user_id="Default")
    failed = upload_files(knowledge_db, [str(f) for f in FILES], loader_mng, emb.embed_documents, True)
    print(f"uploaded {len(FILES) - len(failed)} of {len(FILES)} documents")


def build_knowledge_base(workdir: Path) -> tuple[TextEmbedding, MindFAISS, SQLiteDocstore]:
    """The packaged all-MiniLM-L6-v2 (MindFAISS x_dim=384) and the stores in ``workdir``, FILES uploaded."""
    emb = TextEmbedding("all-MiniLM-L6-v2", dev_id=0)
    vector_store = MindFAISS(x_dim=384, devs=[0], load_local_index=str(workdir / "faiss.index"), auto_save=True)
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    upload_documents(workdir, emb, vector_store, chunk_store)
    return emb, vector_store, chunk_store
