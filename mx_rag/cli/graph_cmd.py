# SPDX-License-Identifier: Apache-2.0
"""``mxrag graph``: the knowledge graph of a knowledge base, for ``mxrag ask --chain graph``.

::

    mxrag graph build handbook            # extract entities and relations of new documents
    mxrag graph show handbook             # counts and the most connected entities
    mxrag graph show handbook --entity "alan turing"
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any

import typer

from mx_rag.cli.runtime import ConfigOption, DataDirOption, JsonOption, Where, llm_options

app = typer.Typer(help="The knowledge graph of a knowledge base (for --chain graph).", no_args_is_help=True)

NameArgument = Annotated[str, typer.Argument(help="The knowledge base.", show_default=False)]


@app.command()
@llm_options
def build(name: NameArgument, *, where: Where) -> None:
    """Build (or extend) the graph of a knowledge base from its documents; only new documents
    cost anything. A knowledge base made without --graph keeps a graph from now on, and later
    ingests extend it. Entities come from graph.extractor: offline (spaCy/jieba) or the LLM."""
    from contextlib import nullcontext

    from mx_rag.cli.runtime import guard, opened, running_llm

    with guard():
        settings = where.settings()
        needs_llm = settings.graph.extractor == "llm"
        with (running_llm(settings, where.llm_url, where.llm_model) if needs_llm else nullcontext()) as llm, \
                opened(where.config, where.data_dir, where.embedding, llm=llm, settings=settings) as here:
            here.require(name)
            if not here.service.is_graph(here.who, name):
                here.service.create(here.who, name, graph=True)
                typer.echo(f"knowledge base {name!r} keeps a knowledge graph from now on", err=True)
            documents = len(here.service.open(here.who, name).get_all_documents())
            typer.echo(f"building the graph of {documents} document(s)…", err=True)
            nodes = here.service.build_graph(here.who, name)
            edges = int(here.service.graph(here.who, name).graph.count_edges())
    typer.echo(f"graph of {name!r}: {nodes} entities, {edges} relations")


@app.command()
def show(
    name: NameArgument,
    entity: Annotated[str | None, typer.Option("--entity", help="Show this entity: its relations and sources.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, max=1000, help="Most connected entities listed.")] = 20,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Show a graph: its size and most connected entities, or one entity with its relations."""
    from mx_rag.cli.runtime import guard, opened

    with guard(), opened(config, data_dir) as here:
        here.require(name)
        store = here.service.graph(here.who, name).graph
        data = _entity(store, entity) if entity is not None else _overview(store, top)
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False))
    elif entity is not None:
        typer.echo(f"{data['label']} ({data['type']}): {data['description'] or 'no description'}")
        for rel in data["relations"]:
            typer.echo(f"  {rel['source']} -[{rel['relation'] or 'related to'}]-> {rel['target']}")
    else:
        typer.echo(f"graph of {name!r}: {data['entities']} entities, {data['relations']} relations")
        for item in data["top"]:
            typer.echo(f"  {item['relations']:>4}  {item['label']} ({item['type']})")


def _overview(store: Any, top: int) -> dict[str, Any]:
    degree: Counter[str] = Counter()
    for edge in store.iter_edges():
        degree[edge.source] += 1
        degree[edge.target] += 1
    names = [n for n, _ in degree.most_common(top)]
    nodes = store.get_nodes(names)
    return {"entities": int(store.count_nodes()), "relations": int(store.count_edges()),
            "top": [{"name": n, "label": nodes[n].label, "type": nodes[n].type, "relations": degree[n]}
                    for n in names if n in nodes]}


def _entity(store: Any, entity: str) -> dict[str, Any]:
    from mx_rag.errors import KnowledgeError

    node = store.get_node(entity) or store.get_node(" ".join(entity.casefold().split()))
    if node is None:
        raise KnowledgeError(f"the graph has no entity {entity!r} (entity names are case-folded; "
                             "`mxrag graph show KB` lists the most connected ones)")
    return {"name": node.name, "label": node.label, "type": node.type, "description": node.description,
            "relations": [{"source": e.source, "relation": e.relation, "target": e.target}
                          for e in store.edges_of([node.name])]}
