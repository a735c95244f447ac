# SPDX-License-Identifier: Apache-2.0
"""Seed 002, MultiQueryRetriever (the LLM rewrites the question, each version is retrieved), as a runnable script.

Changed from the seed, and why (everything else is the seed's code):
- the knowledge base: the seed assumes one built earlier ("see Step 1 in section Retriever"); a fresh machine
  has none, so the script first builds one in a temporary folder from a PDF, a Word file and a PowerPoint file
  of tests/data/docs (LoaderMng, upload_files), with the packaged all-MiniLM-L6-v2 (MindFAISS x_dim=384).
- LLM: the embedded llama.cpp server ($MXRAG_LLM_MODEL or the default), started by LocalLLMServer, over http with
  ClientParam(use_http=True) instead of https + ca_file; --llm-url/--llm-model (and --ca-file) for a real server.
  A 135M model often writes poor rewrites (the default prompt asks for three numbered questions in Chinese);
  the original question is always searched as well.
- question: one about the shipped documents instead of the 2024 college entrance examination;
  llm_config=LLMParameterConfig(max_tokens=128) (a documented parameter) so the rewrite call stays short.

Run (after `make setup`): .venv/bin/python examples/multi_query.py [--question TEXT] [--llm-url URL ...]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from _common import add_llm_arguments, build_knowledge_base, client_param_for, llm_endpoint

from mx_rag.llm import LLMParameterConfig, Text2TextLLM
from mx_rag.retrievers import MultiQueryRetriever

QUESTION = "Describe the LayoutParser toolkit for document image analysis."


def main(args: argparse.Namespace, workdir: Path, llm_url: str, llm_model: str) -> None:
    # For details about how to build a knowledge base, see Step 1 in section "Retriever".
    # (Not in the seed, which assumes an offline knowledge base: the basic-chat example's upload, in short.)
    emb, vector_store, chunk_store = build_knowledge_base(workdir)
    # Initialize an LLM (the seed: ClientParam(ca_file="/path/to/ca.crt") for https).
    client_param = client_param_for(llm_url, args.ca_file)
    llm = Text2TextLLM(base_url=llm_url,
                       model_name=llm_model,
                       client_param=client_param)
    # Initialize the retriever.
    multi_text_retriever = MultiQueryRetriever(llm=llm,
                                               vector_store=vector_store,
                                               document_store=chunk_store,
                                               embed_func=emb.embed_documents,
                                               k=1,
                                               score_threshold=0.2,
                                               llm_config=LLMParameterConfig(max_tokens=128)
                                               )
    res = multi_text_retriever.invoke(args.question)
    print(res)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--question", default=QUESTION)
    add_llm_arguments(parser, "Llama3-8B-Chinese-Chat")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="mxrag-multi-query-") as tmp, contextlib.ExitStack() as stack:
        main(arguments, Path(tmp), *llm_endpoint(arguments, stack))
