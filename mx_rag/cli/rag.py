# SPDX-License-Identifier: Apache-2.0
"""``mxrag ingest``, ``ask``, ``chat`` and ``search``: documents in, answers and chunks out.

::

    mxrag ingest docs/ --kb handbook         # new and changed files; --prune drops deleted ones
    mxrag ask "How do I install it?" --kb handbook --chain hybrid
    mxrag ask "How do I install it?" --docs docs/   # ingest into "default", then answer
    mxrag chat --kb handbook
    mxrag search "install" --kb handbook     # the chunks only, no LLM

The knowledge bases live in the data folder (``--data-dir``, default ``.mxrag``), the one
``mxrag serve`` serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from mx_rag.app.chains import ChainType
from mx_rag.cli.runtime import (
    ConfigOption,
    DataDirOption,
    EmbeddingOption,
    JsonOption,
    Where,
    answering_session,
    llm_options,
)

__all__ = ["ask", "chat", "ingest", "search"]

WorkdirOption = Annotated[Path, typer.Option("--workdir", help="Folder holding the knowledge base.")]

DEFAULT_KB = "default"
KbOption = Annotated[str, typer.Option("--kb", help="The knowledge base (see `mxrag kb list`).")]
ChainOption = Annotated[ChainType | None, typer.Option("--chain", help="How to answer (default: chain.type, hybrid).")]
KOption = Annotated[int | None, typer.Option("--k", min=1, max=100, help="Chunks given to the LLM (default chain.k).")]
MaxTokensOption = Annotated[
    int | None, typer.Option("--max-tokens", min=1, help="Longest answer, in tokens (default llm.max_tokens).")
]
TemperatureOption = Annotated[
    float | None, typer.Option("--temperature", min=0.0, max=2.0, help="Sampling temperature (default 0).")
]
StreamOption = Annotated[bool, typer.Option("--stream", help="Print the answer as it is written.")]


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked recursively, hidden entries left out).",
                                                show_default=False)],
    kb: KbOption = DEFAULT_KB,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Also remove the documents under PATHS whose files are gone (a named path that no longer "
                        "exists removes its documents). Documents from elsewhere stay.")] = False,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="Parse files that failed before even if they have not changed.")] = False,
    ray: Annotated[str | None, typer.Option(
        "--ray", metavar="ADDRESS|auto", help="Ingest on this Ray cluster into PostgreSQL and Milvus (mxrag[ray]; "
                                              "default: ingest.ray_address, else in this process).")] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    embedding: EmbeddingOption = None,
) -> None:
    """Add new files and update changed ones in a knowledge base (made if missing); unchanged files
    cost nothing.

    Shows a progress bar on a terminal, one line per file otherwise, then a summary. Each batch is
    committed as it is stored: Ctrl-C keeps what was stored (a second Ctrl-C stops at once).
    Exit code 0: every file stored or unchanged; 1: a file or path failed (each is named with its
    reason; the others are stored); 130: interrupted (143: SIGTERM).
    """
    from mx_rag.cli.ingesting import ingest_paths
    from mx_rag.cli.progress import reporter
    from mx_rag.cli.runtime import guard, opened

    with guard(), opened(config, data_dir, embedding) as here:
        report = reporter()
        try:
            outcome = ingest_paths(here, kb, paths, report, prune=prune, retry_failed=retry_failed,
                                   ray=ray or here.settings.ingest.ray_address)
        finally:
            report.close()
    report.echo(outcome.summary(report.elapsed))
    if outcome.signal is not None:
        report.echo(outcome.kept())
    if as_json:
        typer.echo(json.dumps(outcome.as_dict(), ensure_ascii=False))
    raise typer.Exit(outcome.exit_code)


@llm_options
def ask(
    question: Annotated[str, typer.Argument(help="The question.", show_default=False)],
    kb: KbOption = DEFAULT_KB,
    docs: Annotated[list[Path] | None, typer.Option(
        "--docs", help="Files or folders to ingest into --kb first (new and changed files only).")] = None,
    chain: ChainOption = None,
    k: KOption = None,
    stream: StreamOption = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print {answer, sources, …} as JSON (with --stream: one JSON object per line).")] = False,
    max_tokens: MaxTokensOption = None,
    temperature: TemperatureOption = None,
    timings: Annotated[bool, typer.Option(
        "--timings", help="Print the time of each stage of the answer (embed, search, LLM) to stderr.")] = False,
    *,
    where: Where,
) -> None:
    """Answer QUESTION from a knowledge base and print the sources it used.

    With --docs, those files are ingested into the knowledge base first (it is made if missing).
    Without --llm-url or llm.url, the embedded LLM is started for the question.
    """
    from mx_rag.cli.answering import Asking, timed

    with answering_session(where, kb, docs) as (here, llm):
        asking = Asking(here, llm, kb, chain or here.settings.chain.type, k, max_tokens, temperature)
        with timed(timings):
            asking.ask(question, stream=stream, as_json=as_json)


@llm_options
def chat(
    kb: KbOption = DEFAULT_KB,
    chain: ChainOption = None,
    k: KOption = None,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Print answers as they are written.")] = True,
    max_tokens: MaxTokensOption = None,
    temperature: TemperatureOption = None,
    *,
    where: Where,
) -> None:
    """Talk with a knowledge base: each question goes with the conversation so far.

    Ctrl-C stops an answer; Ctrl-D, /exit or Ctrl-C at the prompt ends; /clear forgets the
    conversation. Questions are read from stdin, so `mxrag chat < questions.txt` works too.
    """
    from mx_rag.cli.answering import Asking, chat_loop

    with answering_session(where, kb) as (here, llm):
        chat_loop(Asking(here, llm, kb, chain or here.settings.chain.type, k, max_tokens, temperature), stream)


def search(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    kb: KbOption = DEFAULT_KB,
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="Chunks to return.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {text, path, page, score}.")] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    embedding: EmbeddingOption = None,
) -> None:
    """Print the chunks of a knowledge base nearest to QUERY, with their files and scores (no LLM)."""
    from mx_rag.cli.answering import print_chunks
    from mx_rag.cli.runtime import guard, opened

    with guard(), opened(config, data_dir, embedding) as here:
        here.require(kb)
        docs = here.service.retriever(here.who, kb, k=k).invoke(query)
        print_chunks(docs, as_json)


# -- the LocalKnowledge of ``mxrag serve-retrieval`` (cli/serve.py) ---------------------------------


def _open(workdir: Path, roots: list[Path], embedding: str | None) -> Any:
    """The knowledge base "default" in ``workdir`` through ``LocalKnowledge``, reading ``roots``."""
    from mx_rag.cli.runtime import quiet_logging
    from mx_rag.knowledge.local import LocalKnowledge

    quiet_logging()
    allowed = sorted({(p if p.is_dir() else p.parent).resolve() for p in roots})
    return LocalKnowledge.open(workdir, white_paths=allowed, embedding_model=embedding)


def _sync(kb: Any, paths: list[Path]) -> None:
    """Ingest the supported files under ``paths``; one line on stderr per failed or missing path."""
    from mx_rag.cli.files import find_files

    found = find_files(paths, {s.lower() for s in kb.loader_mng.loaders})
    report = kb.sync(found.files)
    typer.echo(
        f"knowledge base: {len(report.added)} added, {len(report.replaced)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.failed) + len(found.failed)} failed",
        err=True,
    )
    for path, reason in [*found.failed.items(), *report.reasons.items()]:
        typer.echo(f"  failed: {found.shown.get(path, path)}: {reason}", err=True)
