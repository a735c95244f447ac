# SPDX-License-Identifier: Apache-2.0
"""``GraphRAGPipeline``'s ``age_graph`` argument and ``graph_type="opengauss"``, from the original SDK.

The original stored an ``"opengauss"`` graph through an openGauss AGE connection
(``langchain_opengauss.openGaussAGEGraph``, Cypher over ``ag_catalog``) passed as ``age_graph``,
and ignored ``age_graph`` for ``"networkx"`` graphs. mx_rag keeps graphs in its own ``GraphStore``
classes and does not speak Cypher, so:

- ``age_graph`` that is a mx_rag ``GraphStore`` is used as the graph store, whatever ``graph_type``;
- ``graph_type="opengauss"`` stores the graph with ``PostgresGraphStore`` when ``postgres_url=`` is
  given (openGauss speaks PostgreSQL's protocol), ignoring an AGE connection passed as well;
- any other ``age_graph`` with ``graph_type="opengauss"`` and no ``postgres_url`` is a
  ``ParameterError`` that says what to pass instead;
- with ``"networkx"`` or ``"postgres"``, a foreign ``age_graph`` is ignored (as the original did), with a warning.
"""

from __future__ import annotations

import logging
from typing import Any

from mx_rag.errors import ParameterError
from mx_rag.graphrag.graph_store import GraphStore

__all__ = ["resolve_age_graph"]

logger = logging.getLogger(__name__)


def resolve_age_graph(graph_type: str, age_graph: Any, graph_store: GraphStore | None,
                      postgres_url: Any) -> tuple[str, GraphStore | None]:
    """The ``(graph_type, graph_store)`` a pipeline opens, given the original's arguments."""
    if graph_store is None and isinstance(age_graph, GraphStore):
        return graph_type, age_graph
    foreign = age_graph is not None and not isinstance(age_graph, GraphStore)
    if graph_type != "opengauss":
        if foreign:
            logger.warning("age_graph (%s) is ignored: it is used with graph_type='opengauss' only",
                           type(age_graph).__name__)
        return graph_type, graph_store
    if graph_store is not None or postgres_url is not None:
        if foreign:
            logger.warning("age_graph (%s) is ignored: the graph goes to %s", type(age_graph).__name__,
                           "graph_store" if graph_store is not None else "postgres_url")
        return "postgres", graph_store
    if foreign:
        raise ParameterError(
            f"age_graph: a {type(age_graph).__name__} (an openGauss AGE / Cypher connection) cannot be used by "
            "mx_rag; keep graph_type='opengauss' and pass postgres_url='postgresql+psycopg://user:pw@host:port/db' "
            "for the same openGauss or PostgreSQL database, or pass a mx_rag GraphStore as age_graph= or graph_store="
        )
    raise ParameterError("graph_type 'opengauss' needs postgres_url= (or a mx_rag GraphStore as age_graph= or "
                         "graph_store=)")
