# SPDX-License-Identifier: Apache-2.0
"""``mxrag kb``: create, list, show, delete and repair the knowledge bases of a data folder.

::

    mxrag kb create handbook [--graph]
    mxrag kb list
    mxrag kb show handbook [--json] [--user alice_01] [--summary]
    mxrag kb delete handbook --yes
    mxrag kb repair [--kb handbook] [--check] [--user alice_01 | --all]

The commands act for the local user (the one of ``mxrag serve`` without keys); ``--user`` reaches
the knowledge bases of a key's user, ``repair --all`` those of every user (operator commands:
they read the data folder directly, with no key).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from mx_rag.cli.runtime import (
    ConfigOption,
    DataDirOption,
    EmbeddingOption,
    JsonOption,
    LLMModelOption,
    LLMUrlOption,
)

app = typer.Typer(help="Create, list, show, delete and repair knowledge bases (in --data-dir, default .mxrag).",
                  no_args_is_help=True)

UserOption = Annotated[
    str | None,
    typer.Option("--user", help="Act for this user (an API key's user) instead of the local user.",
                 show_default=False),
]
NameArgument = Annotated[
    str,
    typer.Argument(help="The knowledge base: 1 to 64 of [A-Za-z0-9_.-], starting with a letter or digit.",
                   show_default=False),
]


@app.command()
def create(
    name: NameArgument,
    graph: Annotated[bool, typer.Option("--graph", help="Also keep a knowledge graph (for --chain graph).")] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create an empty knowledge base (exit code 1 if it exists)."""
    from mx_rag.cli.runtime import guard, opened
    from mx_rag.errors import KnowledgeError

    with guard(), opened(config, data_dir) as here:
        if name in here.service.names(here.who):
            raise KnowledgeError(f"knowledge base {name!r} already exists in {here.settings.data_dir}")
        here.service.create(here.who, name, graph=graph)
    typer.echo(f"created knowledge base {name!r}{' with a knowledge graph' if graph else ''}")


@app.command("list")
def list_(as_json: JsonOption = False, config: ConfigOption = None, data_dir: DataDirOption = None) -> None:
    """List the knowledge bases with their document and chunk counts."""
    from mx_rag.cli.runtime import guard, opened

    with guard(), opened(config, data_dir) as here:
        described = [here.service.describe(here.who, name) for name in sorted(here.service.names(here.who))]
    rows = [{"name": d["name"], "documents": len(d["documents"]), "chunks": d["chunks"], "graph": d.get("graph", False)}
            for d in described]
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        typer.echo("no knowledge bases yet: `mxrag ingest PATH --kb NAME` makes one", err=True)
    for row in rows:
        typer.echo(f"{row['name']}\t{row['documents']} documents\t{row['chunks']} chunks"
                   + ("\tgraph" if row["graph"] else ""))


SummaryOption = Annotated[bool, typer.Option(
    "--summary", help="Also a summary of the knowledge base and of each document, written by the LLM the first "
                      "time (map-reduce over the chunks) and kept in DATA_DIR/summaries until the document changes.")]


@app.command()
def show(name: NameArgument, as_json: JsonOption = False, config: ConfigOption = None,
         data_dir: DataDirOption = None, user: UserOption = None, summary: SummaryOption = False,
         llm_url: LLMUrlOption = None, llm_model: LLMModelOption = None) -> None:
    """Show the documents of a knowledge base: id, chunks, the file's size now, and the file.

    A file that changed since it was stored is marked "changed since stored" (mxrag ingest stores
    it again); one that is gone says so. --summary adds what the knowledge base and each
    document are about (the embedded LLM, or --llm-url, writes what is not kept yet).
    """
    from mx_rag.cli.files import shown_path
    from mx_rag.cli.runtime import guard, opened

    with guard(), opened(config, data_dir) as here:
        here.act_for(user)
        here.require(name)
        described = here.service.describe(here.who, name)
        rows = {row.document_id: row for row in here.service.open(here.who, name).get_all_documents()}
        if described.get("graph"):
            described["graph_nodes"] = int(here.service.graph(here.who, name).graph.count_nodes())
        if summary:
            _summarize(here, name, described, rows, llm_url, llm_model)
    for doc in described["documents"]:
        row = rows.get(doc["id"])
        doc["path"] = shown_path(row.document_file_path if row else doc["name"])
        doc["changed"] = bool(row and doc["bytes"] is not None and row.content_hash
                              and _digest(row.document_file_path) != row.content_hash)
    if as_json:
        typer.echo(json.dumps(described))
        return
    graph = f", graph of {described['graph_nodes']} entities" if described.get("graph") else ""
    typer.echo(f"{name}: {len(described['documents'])} documents, {described['chunks']} chunks{graph}")
    if described.get("summary"):
        typer.echo(f"  summary: {described['summary']}")
    for doc in described["documents"]:
        size = "gone" if doc["bytes"] is None else _size(doc["bytes"])
        changed = "  (changed since stored)" if doc["changed"] else ""
        typer.echo(f"  {doc['id']:>5}  {doc['chunks']:>5} chunks  {size:>9}  {doc['path']}{changed}")
        if doc.get("summary"):
            typer.echo(f"         {doc['summary']}")


def _summarize(here: Any, name: str, described: dict[str, Any], rows: dict[int, Any],
               llm_url: str | None, llm_model: str | None) -> None:
    """Each document's summary (by id and content hash) and the knowledge base's, from their
    stored copies, else written by the LLM (started only when one is missing)."""
    from contextlib import ExitStack

    from mx_rag.cli.runtime import running_llm
    from mx_rag.summary import Summary
    from mx_rag.summary.stored import StoredSummaries
    from mx_rag.utils.checkpoint import digest

    stored = StoredSummaries(Path(here.settings.data_dir) / "summaries" / here.who.user_id / f"{name}.json")
    keys = {doc["id"]: f"{doc['id']}:{getattr(rows.get(doc['id']), 'content_hash', None)}"
            for doc in described["documents"]}
    whole = f"kb:{digest(sorted(keys.values()))}"
    with ExitStack() as stack:
        writer: list[Summary] = []

        def summarize(key: str, texts: list[str]) -> str:
            found = stored.get(key)
            if found is not None:
                return found
            if not writer:
                writer.append(Summary(llm=stack.enter_context(running_llm(here.settings, llm_url, llm_model))))
            return stored.summarize(writer[0], key, texts)

        for doc in described["documents"]:
            chunks = here.service.chunks.search_by_document_id(doc["id"])
            texts = [c.page_content for c in chunks if c.metadata.get("type", "text") == "text" and c.page_content]
            doc["summary"] = summarize(keys[doc["id"]], texts) if texts else None
        parts = [doc["summary"] for doc in described["documents"] if doc["summary"]]
        described["summary"] = parts[0] if len(parts) == 1 else summarize(whole, parts) if parts else None
    stored.keep_only([*keys.values(), whole])


def _digest(path: str) -> str | None:
    from mx_rag.knowledge.ingest import file_digest

    try:
        return file_digest(Path(path))
    except OSError:  # unreadable now: not known to differ
        return None


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@app.command()
def delete(
    name: NameArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Delete a knowledge base: its documents' chunks and vectors, its graph, its uploaded copies.

    Files ingested from your folders stay where they are.
    """
    from mx_rag.cli.runtime import guard, opened

    with guard(), opened(config, data_dir) as here:
        here.require(name)
        count = len(here.service.describe(here.who, name)["documents"])
        if not yes:
            if not sys.stdin.isatty():
                typer.echo(f"error: deleting {name!r} ({count} documents) needs --yes when stdin is not a terminal",
                           err=True)
                raise typer.Exit(2)
            typer.confirm(f"Delete knowledge base {name!r} and its {count} documents?", abort=True, err=True)
        here.service.delete(here.who, name)
        (Path(here.settings.data_dir) / "summaries" / here.who.user_id / f"{name}.json").unlink(missing_ok=True)
    typer.echo(f"deleted knowledge base {name!r} ({count} documents)")


@app.command()
def repair(
    kb: Annotated[str | None, typer.Option("--kb", help="Only this knowledge base (default: all).")] = None,
    check_only: Annotated[bool, typer.Option("--check", help="Only report; change nothing.")] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    embedding: EmbeddingOption = None,
    user: UserOption = None,
    every_user: Annotated[bool, typer.Option("--all", help="The knowledge bases of every user.")] = False,
) -> None:
    """Finish what a crash interrupted and remove documents whose vectors were lost.

    Those documents can then be ingested again. Prints what the stores hold afterwards; exit code
    1 when they do not agree.
    """
    from mx_rag.cli.runtime import guard, opened, settings_of
    from mx_rag.errors import KnowledgeError, ParameterError

    with guard():
        settings = settings_of(config, data_dir, embedding)
        from mx_rag.app.workspace import has_registry

        if not has_registry(settings):
            raise KnowledgeError(f"{settings.data_dir} holds no knowledge base (no sql.db)")
        if every_user and (user or kb):
            raise ParameterError("--all repairs every knowledge base of every user: give it without --user and --kb")
        with opened(config, data_dir, embedding, settings=settings) as here:
            here.act_for(user)
            if every_user:
                targets = _every_knowledge_base(here.service)
            else:
                if kb:
                    here.require(kb)
                targets = [(here.who.user_id, name) for name in ([kb] if kb else sorted(here.service.names(here.who)))]
            consistent = all([_repair(here, owner, name, check_only, every_user) for owner, name in targets])
    if not consistent:
        raise typer.Exit(1)


def _every_knowledge_base(service: Any) -> list[tuple[str, str]]:
    """(an admin user, name) of every knowledge base in the registry."""
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from mx_rag.knowledge.models import KnowledgeModel

    query = (select(func.min(KnowledgeModel.user_id), KnowledgeModel.knowledge_name)
             .where(KnowledgeModel.role == "admin")
             .group_by(KnowledgeModel.knowledge_id, KnowledgeModel.knowledge_name))
    with Session(service.registry.engine) as session:
        return sorted((user, name) for user, name in session.execute(query).all())


def _repair(here: Any, user_id: str, name: str, check_only: bool, show_user: bool = False) -> bool:
    from mx_rag.knowledge.knowledge import KnowledgeDB

    service = here.service
    kb = KnowledgeDB(knowledge_store=service.registry, chunk_store=service.chunks, vector_store=service.vectors,
                     knowledge_name=name, white_paths=[str(service.uploads)], user_id=user_id,
                     drop_incomplete=not check_only)
    report = kb.check()
    prefix = f"{user_id}/{name}: " if show_user else f"{name}: "
    typer.echo(prefix + (f"repaired {len(kb.repaired_on_open)} document(s): {kb.repaired_on_open}"
                         if kb.repaired_on_open else "nothing to repair"))
    typer.echo(prefix + f"{report.documents} documents, {report.chunks} chunks, {report.vectors} vectors: "
               + ("consistent" if report.ok else f"NOT consistent: {report}"))
    return bool(report.ok)
