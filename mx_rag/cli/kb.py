# SPDX-License-Identifier: Apache-2.0
"""``mxrag kb``: look after the local knowledge base of ``mxrag ingest`` and ``mxrag ask``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mx_rag.cli.rag import EmbeddingOption, WorkdirOption

app = typer.Typer(help="Look after the local knowledge base (the --workdir of ingest and ask).", no_args_is_help=True)


@app.command()
def repair(
    workdir: WorkdirOption = Path(".mxrag"),
    embedding: EmbeddingOption = None,
    check_only: Annotated[bool, typer.Option("--check", help="Only report; change nothing.")] = False,
) -> None:
    """Finish what a crash interrupted and remove documents whose vectors were lost.

    Those documents can then be ingested again. Prints what the stores hold afterwards.
    """
    from mx_rag.errors import MxRagError
    from mx_rag.knowledge.local import LocalKnowledge

    if not (workdir / "sql.db").exists():
        typer.echo(f"error: {workdir} holds no knowledge base (no sql.db)", err=True)
        raise typer.Exit(1)
    try:
        kb = LocalKnowledge.open(workdir, white_paths=[workdir], embedding_model=embedding,
                                 drop_incomplete=not check_only).knowledge
        report = kb.check()
    except MxRagError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"repaired {len(kb.repaired_on_open)} document(s): {kb.repaired_on_open}" if kb.repaired_on_open
               else "nothing to repair")
    typer.echo(f"{report.documents} documents, {report.chunks} chunks, {report.vectors} vectors: "
               + ("consistent" if report.ok else f"NOT consistent: {report}"))
    if not report.ok:
        raise typer.Exit(1)
