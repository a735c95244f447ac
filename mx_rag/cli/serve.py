# SPDX-License-Identifier: Apache-2.0
"""``mxrag serve-retrieval``: serve a local knowledge base as the retrieval API CoRAG calls.

::

    mxrag serve-retrieval --docs docs/ --port 8000
    # stdout, first line: http://127.0.0.1:8000/retrieve
    curl -s localhost:8000/retrieve -d '{"query": "Where are vectors kept?", "top_k": 3}' \\
         -H 'Content-Type: application/json'
    # {"document_ids": [...], "documents": [...]}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mx_rag.cli.rag import EmbeddingOption, WorkdirOption


def serve_retrieval(
    docs: Annotated[list[Path], typer.Option("--docs", help="Files or folders to ingest and serve.")],
    workdir: WorkdirOption = Path(".mxrag"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = 8000,
    k: Annotated[int, typer.Option("--k", help="Documents per request when the request gives no top_k.")] = 5,
    max_top_k: Annotated[int, typer.Option("--max-top-k", help="Largest top_k a request may ask for.")] = 100,
    embedding: EmbeddingOption = None,
) -> None:
    """Ingest --docs (new and changed files only), then serve POST /retrieve until SIGINT or SIGTERM.

    The first line of stdout is the retrieve URL (for example http://127.0.0.1:8000/retrieve),
    to pass as CoRAG's retrieve_api_url with ClientParam(use_http=True); everything else goes to
    stderr. Requests are {"query": str, "top_k": int}; answers are {"document_ids", "documents"}.
    """
    from mx_rag.cli.common import fail, stop_on_signals
    from mx_rag.cli.rag import _open, _sync
    from mx_rag.errors import MxRagError, ParameterError
    from mx_rag.server.retrieval import RetrievalServer, create_retrieval_app
    from mx_rag.utils.common import MAX_TOP_K

    if not 1 <= max_top_k <= MAX_TOP_K:
        fail(ParameterError(f"--max-top-k must be in [1, {MAX_TOP_K}], got {max_top_k}"))
    if not 1 <= k <= max_top_k:
        fail(ParameterError(f"--k must be in [1, --max-top-k={max_top_k}], got {k}"))
    try:
        server = RetrievalServer(host=host, port=port).bind()  # a busy port fails before the slow ingest
    except MxRagError as exc:
        fail(exc)
    try:
        try:
            kb = _open(workdir, docs, embedding)
            _sync(kb, docs)
            server.app = create_retrieval_app(kb.retriever(k=k), max_top_k=max_top_k, default_top_k=k)
        except MxRagError as exc:
            fail(exc)
        with stop_on_signals() as stop:
            try:
                server.start()
            except MxRagError as exc:
                fail(exc)
            print(server.url, flush=True)
            typer.echo(f"serving {len(kb.knowledge.document_ids())} documents at {server.url}", err=True)
            typer.echo("stop with Ctrl-C or SIGTERM", err=True)
            server.wait(stop)
    finally:
        server.stop()
    typer.echo("stopped", err=True)
