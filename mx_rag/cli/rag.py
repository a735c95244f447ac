# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest`` and ``mxrag ask``: a local knowledge base and questions over it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

WorkdirOption = Annotated[Path, typer.Option("--workdir", help="Folder holding the knowledge base.")]
EmbeddingOption = Annotated[
    str | None, typer.Option("--embedding", help="Embedding model path or built-in name (all-MiniLM-L6-v2).")
]


def _files(paths: list[Path]) -> list[Path]:
    """Files named directly, and every file under named folders (recursively, hidden ones skipped)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and not any(s.startswith(".") for s in p.parts))
        else:
            found.append(path)
    return found


def _open(workdir: Path, roots: list[Path], embedding: str | None) -> Any:
    from transformers.utils import logging as hf_logging

    from mx_rag.knowledge.local import LocalKnowledge

    hf_logging.disable_progress_bar()  # a command-line tool: keep the output to the answer

    allowed = sorted({(p if p.is_dir() else p.parent).resolve() for p in roots})
    return LocalKnowledge.open(workdir, white_paths=allowed, embedding_model=embedding)


def _supported(kb: Any, files: list[Path]) -> list[Path]:
    suffixes = {s.lower() for s in kb.loader_mng.loaders}
    return [f for f in files if f.suffix.lower() in suffixes]


def _sync(kb: Any, paths: list[Path]) -> None:
    files = _supported(kb, _files(paths))
    report = kb.sync(files)
    typer.echo(
        f"knowledge base: {len(report.added)} added, {len(report.replaced)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.failed)} failed",
        err=True,
    )
    for path in report.failed:
        typer.echo(f"  failed: {path}", err=True)


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to add.")],
    workdir: WorkdirOption = Path(".mxrag"),
    embedding: EmbeddingOption = None,
) -> None:
    """Add files (or every supported file under folders) to the local knowledge base."""
    from mx_rag.errors import MxRagError

    try:
        _sync(_open(workdir, paths, embedding), paths)
    except MxRagError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    docs: Annotated[list[Path], typer.Option("--docs", help="Files or folders to ingest first.")],
    workdir: WorkdirOption = Path(".mxrag"),
    embedding: EmbeddingOption = None,
    k: Annotated[int, typer.Option("--k", help="Chunks given to the LLM.")] = 3,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Longest answer, in tokens.")] = 256,
    llm_url: Annotated[
        str | None, typer.Option("--llm-url", help="An OpenAI-compatible chat URL; default: the embedded LLM.")
    ] = None,
    llm_model: Annotated[str, typer.Option("--llm-model", help="Model name for --llm-url.")] = "default",
) -> None:
    """Ingest ``--docs`` (new and changed files only), then answer QUESTION with its sources."""
    from mx_rag.errors import MxRagError

    try:
        kb = _open(workdir, docs, embedding)
        _sync(kb, docs)
        result = _answer(kb, question, k, max_tokens, llm_url, llm_model)
    except MxRagError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(result["result"].strip())
    typer.echo("\nSources:")
    for doc in result["source_documents"]:
        meta = doc["metadata"]
        page = f", page {meta['page']}" if "page" in meta else ""
        typer.echo(f"  - {meta.get('source', '?')}{page} (score {meta.get('score', 0):.2f})")


def _answer(kb: Any, question: str, k: int, max_tokens: int, llm_url: str | None, llm_model: str) -> Any:
    from contextlib import nullcontext

    from mx_rag.chain import SingleText2TextChain
    from mx_rag.llm import LLMParameterConfig, Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.utils import ClientParam

    server: Any = nullcontext() if llm_url else LocalLLMServer(n_parallel=1)
    with server as running:
        url = llm_url or running.chat_url
        llm = Text2TextLLM(
            base_url=url,
            model_name=llm_model if llm_url else running.model_name,
            client_param=ClientParam(use_http=True, timeout=300),
        )
        chain = SingleText2TextChain(
            llm=llm, retriever=kb.retriever(k=k), prompt="Answer the question using the information above."
        )
        return chain.query(question, LLMParameterConfig(max_tokens=max_tokens, temperature=0.0))
