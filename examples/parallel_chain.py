# SPDX-License-Identifier: Apache-2.0
"""Seeds 000 and 003, ParallelText2TextChain (retrieval in parallel with the LLM warm-up), as a runnable script.

Changed from the seed, and why (everything else is the seed's code, in the seed's order):
- the knowledge base: the seed opens an index built earlier (/path/to/faiss.index); a fresh machine has none, so
  the script first builds one in a temporary folder from a PDF, a Word file and a PowerPoint file of
  tests/data/docs, the way the basic-chat example does (LoaderMng, upload_files).
- embedding: the packaged all-MiniLM-L6-v2 instead of /path/to/bge-large-zh-v1.5, so MindFAISS x_dim=384, not 1024.
- LLM: the embedded llama.cpp server ($MXRAG_LLM_MODEL or the default), started by LocalLLMServer, over http with
  ClientParam(use_http=True) instead of https + ca_file; --llm-url/--llm-model (and --ca-file) for a real server.
- question: one about the shipped documents instead of the seed's "123456" (which still runs: --question 123456,
  and retrieves nothing); LLMParameterConfig(max_tokens=128) passed so that the small CPU model stops early.

Run (after `make setup`): .venv/bin/python examples/parallel_chain.py [--question TEXT] [--llm-url URL ...]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from langchain_text_splitters import RecursiveCharacterTextSplitter

from mx_rag.chain import ParallelText2TextChain
from mx_rag.document import LoaderMng
from mx_rag.document.loader import DocxLoader, PdfLoader, PowerPointLoader
from mx_rag.embedding.local import TextEmbedding
from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.knowledge.handler import upload_files
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.llm.local_server import LocalLLMServer
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS
from mx_rag.utils import ClientParam

DOCS = Path(__file__).resolve().parents[1] / "tests" / "data" / "docs"
FILES = [DOCS / "layout-parser-paper-fast.pdf", DOCS / "fake.docx", DOCS / "fake-power-point.pptx"]
QUESTION = "How do I add a bullet slide?"


def build_knowledge_base(workdir: Path, emb: TextEmbedding, vector_store: MindFAISS,
                         chunk_store: SQLiteDocstore) -> None:
    """Not in the seed, which opens an existing index: the basic-chat example's upload, in short."""
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


def main(args: argparse.Namespace, workdir: Path, llm_url: str, llm_model: str) -> None:
    dev = 0
    emb = TextEmbedding("all-MiniLM-L6-v2", dev_id=dev)
    # the seed: ClientParam(ca_file="/path/to/ca.crt") for https; the embedded server speaks plain http
    client_param = client_param_for(llm_url, args.ca_file)
    llm = Text2TextLLM(model_name=llm_model,
                       base_url=llm_url,
                       client_param=client_param)
    vector_store = MindFAISS(x_dim=384, devs=[dev],
                             load_local_index=str(workdir / "faiss.index"),
                             auto_save=True)
    chunk_store = SQLiteDocstore(db_path=str(workdir / "sql.db"))
    build_knowledge_base(workdir, emb, vector_store, chunk_store)
    retriever = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=1,
                          score_threshold=0.6)
    parallel_chain = ParallelText2TextChain(llm=llm, retriever=retriever)
    answer = parallel_chain.query(text=args.question, llm_config=LLMParameterConfig(max_tokens=128))
    print(answer)


def client_param_for(url: str, ca_file: str | None) -> ClientParam:
    """The seed's ClientParam(ca_file=...) for https; plain http (use_http=True) for the local servers."""
    return ClientParam(ca_file=ca_file) if ca_file else ClientParam(use_http=url.startswith("http:"))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--llm-url", help="an OpenAI-compatible .../v1/chat/completions URL (default: embedded LLM)")
    parser.add_argument("--llm-model", default="Meta-Llama-3-8B-Instruct", help="model name for --llm-url")
    parser.add_argument("--ca-file", help="CA certificate for an https --llm-url")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="mxrag-parallel-chain-") as tmp, contextlib.ExitStack() as stack:
        if arguments.llm_url:
            url, model = arguments.llm_url, arguments.llm_model
        else:
            server = stack.enter_context(LocalLLMServer())  # the embedded LLM, on a free port
            url, model = server.chat_url, server.model_name
        main(arguments, Path(tmp), url, model)
