# SPDX-License-Identifier: Apache-2.0
"""The tables of ``PostgresGraphStore`` (described in the module doc of ``mx_rag.graphrag.pg_graph_store``),
the SQL building blocks its statements are made of, and the checks and conversions between
``Node``/``Edge`` records and rows. No connection handling: that is the store's."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import BigInteger, Column, Connection, ForeignKey, Table, Text, bindparam, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert

from mx_rag.errors import ParameterError
from mx_rag.graphrag.graph_store import Edge, Node

__all__ = ["WRITE_ROWS"]

WRITE_ROWS = 10_000  # rows per statement of a bulk write

_IDS = ARRAY(BigInteger)
_TEXTS = ARRAY(Text)


def _tables(prefix: str) -> dict[str, Table]:
    meta = sa.MetaData()

    def key() -> Column[int]:
        return Column("id", BigInteger, sa.Identity(), primary_key=True)

    def owner(name: str, table: Table) -> Column[int]:
        return Column(name, BigInteger, ForeignKey(table.c.id, ondelete="CASCADE"), nullable=False)

    graphs = Table(f"{prefix}_graphs", meta, key(), Column("name", Text, nullable=False, unique=True))
    nodes = Table(
        f"{prefix}_nodes", meta, key(), owner("graph_id", graphs),
        *(Column(name, Text, nullable=False) for name in ("name", "label", "type")),
        sa.UniqueConstraint("graph_id", "name", name=f"uq_{prefix}_nodes_name"),
    )  # fmt: skip
    edges = Table(
        f"{prefix}_edges", meta, key(), owner("graph_id", graphs), owner("source_id", nodes),
        owner("target_id", nodes), Column("relation", Text, nullable=False),
        sa.UniqueConstraint("source_id", "target_id", "relation", name=f"uq_{prefix}_edges_key"),
        sa.Index(f"ix_{prefix}_edges_target", "target_id"), sa.Index(f"ix_{prefix}_edges_graph", "graph_id"),
    )  # fmt: skip
    found = {"graphs": graphs, "nodes": nodes, "edges": edges}
    for kind, table in (("node", nodes), ("edge", edges)):
        found[f"{kind}_sources"] = Table(
            f"{prefix}_{kind}_sources", meta, owner(f"{kind}_id", table),
            Column("graph_id", BigInteger, nullable=False), Column("chunk_id", Text, nullable=False),
            Column("description", Text, nullable=False),
            sa.PrimaryKeyConstraint(f"{kind}_id", "chunk_id", name=f"pk_{prefix}_{kind}_sources"),
            sa.Index(f"ix_{prefix}_{kind}_sources_chunk", "graph_id", "chunk_id"),
        )  # fmt: skip
    return found


def _any(name: str, kind: Any = _IDS) -> Any:
    """``ANY(:name)``: one bound array parameter (``x == _any("ids")`` renders ``x = ANY(%(ids)s)``)."""
    return sa.any_(bindparam(name, type_=kind))


def _rows(table: Table, arrays: dict[str, list[Any]]) -> Any:
    """``unnest(:a, :b, ...) AS anon(a, b, ...)``: one bound array per column of ``table``, read as rows."""
    params = [bindparam(name, type_=ARRAY(table.c[name].type)) for name in arrays]
    return sa.func.unnest(*params).table_valued(*arrays).render_derived()


def _insert(conn: Connection, table: Table, graph_id: int, arrays: dict[str, list[Any]], conflict: list[str],
            update: Sequence[str] = ()) -> None:  # fmt: skip
    """``INSERT INTO table (graph_id, <columns>) SELECT :graph_id, * FROM unnest(<arrays>) ON CONFLICT
    (<conflict>) DO NOTHING`` (``DO UPDATE`` of the ``update`` columns), ``WRITE_ROWS`` rows a statement."""
    for start in range(0, len(next(iter(arrays.values()))), WRITE_ROWS):
        part = {name: values[start : start + WRITE_ROWS] for name, values in arrays.items()}
        rows = _rows(table, part)
        values = select(bindparam("graph_id", type_=BigInteger), *rows.c)
        statement = pg_insert(table).from_select(["graph_id", *part], values)
        if update:
            changes = {name: statement.excluded[name] for name in update}
            statement = statement.on_conflict_do_update(index_elements=conflict, set_=changes)
        else:
            statement = statement.on_conflict_do_nothing(index_elements=conflict)
        conn.execute(statement, {"graph_id": graph_id, **part})


def _check_text(what: str, values: Iterable[str]) -> None:
    for value in values:
        if not isinstance(value, str):
            raise ParameterError(f"{what} must be str, got {type(value).__name__}")
        if "\x00" in value:
            raise ParameterError(f"{what} cannot hold NUL characters (PostgreSQL text refuses them): {value!r}")


def _usable(names: Iterable[Any]) -> list[str]:
    """The distinct names a store can hold (a NUL-holding name can never have been stored)."""
    return [n for n in dict.fromkeys(names) if isinstance(n, str) and "\x00" not in n]


def _merged_nodes(nodes: Iterable[Node]) -> dict[str, tuple[Node, dict[str, str]]]:
    """Input nodes by name: the first record (its label and type win) and the united descriptions."""
    merged: dict[str, tuple[Node, dict[str, str]]] = {}
    for item in nodes:
        if not isinstance(item, Node):
            raise ParameterError(f"nodes must hold Node records, got {type(item).__name__}")
        merged.setdefault(item.name, (item, {}))[1].update(item.descriptions)
    for name, (item, descs) in merged.items():
        _check_text("node names, labels, types, chunk ids and descriptions",
                    [name, item.label, item.type, *descs.keys(), *descs.values()])  # fmt: skip
    return merged


def _merged_edges(edges: Iterable[Edge]) -> dict[tuple[str, str, str], dict[str, str]]:
    """Input edges by key, with their descriptions united (a later record's text wins)."""
    merged: dict[tuple[str, str, str], dict[str, str]] = {}
    for item in edges:
        if not isinstance(item, Edge):
            raise ParameterError(f"edges must hold Edge records, got {type(item).__name__}")
        merged.setdefault(item.key, {}).update(item.descriptions)
    for key, descs in merged.items():
        _check_text("edge ends, relations, chunk ids and descriptions", [*key, *descs.keys(), *descs.values()])
    return merged


def _grouped(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[int, tuple[Any, ...], dict[str, str]]]:
    """Rows ``(id, *fields, chunk_id, description)`` ordered by id -> ``(id, fields, descriptions)``."""
    for key, group in itertools.groupby(rows, key=lambda row: row[0]):
        members = list(group)
        descriptions = {row[-2]: row[-1] for row in members if row[-2] is not None}
        yield key, tuple(members[0][1:-2]), descriptions


def _node(node_id: int, fields: tuple[Any, ...], descriptions: dict[str, str]) -> Node:
    name, label, kind, _ = fields
    return Node(name, label=label, type=kind, descriptions=descriptions, id=node_id)
