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

from _common import add_llm_arguments, client_param_for, llm_endpoint, upload_documents

from mx_rag.chain import ParallelText2TextChain
from mx_rag.embedding.local import TextEmbedding
from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

QUESTION = "How do I add a bullet slide?"


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
    # not in the seed, which opens an existing index: the basic-chat example's upload, in short
    upload_documents(workdir, emb, vector_store, chunk_store)
    retriever = Retriever(vector_store=vector_store, document_store=chunk_store, embed_func=emb.embed_documents, k=1,
                          score_threshold=0.6)
    parallel_chain = ParallelText2TextChain(llm=llm, retriever=retriever)
    answer = parallel_chain.query(text=args.question, llm_config=LLMParameterConfig(max_tokens=128))
    print(answer)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--question", default=QUESTION)
    add_llm_arguments(parser, "Meta-Llama-3-8B-Instruct")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="mxrag-parallel-chain-") as tmp, contextlib.ExitStack() as stack:
        main(arguments, Path(tmp), *llm_endpoint(arguments, stack))
