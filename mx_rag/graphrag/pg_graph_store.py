# SPDX-License-Identifier: Apache-2.0
"""``PostgresGraphStore``: the knowledge graph in PostgreSQL tables, for graphs shared or too big for memory.

Five tables, named after ``table_prefix`` (``mxrag_graph`` by default) and shared by every graph
of the database; a graph is a row of the first, and everything else carries its id:

======================  =========================================================================
``<p>_graphs``          ``id``, ``name`` (unique): one row per ``graph_name``
``<p>_nodes``           ``id`` (identity: ``Node.id``, never reused), ``graph_id``, ``name``
                        (unique per graph), ``label``, ``type``
``<p>_node_sources``    ``node_id``, ``graph_id``, ``chunk_id``, ``description``: which chunks
                        support a node, with what each said (the keys of ``Node.descriptions``)
``<p>_edges``           ``id``, ``graph_id``, ``source_id``, ``target_id``, ``relation``
                        (unique per ``(source_id, target_id, relation)``)
``<p>_edge_sources``    ``edge_id``, ``graph_id``, ``chunk_id``, ``description``
======================  =========================================================================

Deleting a node deletes its edges and their sources (foreign keys ``ON DELETE CASCADE``).
Every value travels as a bound parameter; lists go as one array parameter (``= ANY(:ids)``,
``unnest(:names, ...)``), so a write of thousands of nodes is a few statements. Nothing is loaded
whole: ``expand`` asks the database one hop at a time, ``iter_nodes``/``iter_edges`` stream.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import URL, Connection, Engine, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError, ProgrammingError, SQLAlchemyError

from mx_rag.errors import ParameterError, StorageError
from mx_rag.graphrag._pg_schema import (
    _TEXTS,
    WRITE_ROWS,
    _any,
    _check_text,
    _grouped,
    _insert,
    _merged_edges,
    _merged_nodes,
    _node,
    _rows,
    _tables,
    _usable,
)
from mx_rag.graphrag.graph_store import Edge, GraphStore, Node, Subgraph
from mx_rag.storage.engines import postgres_engine
from mx_rag.utils.checks import check_pattern, check_str

__all__ = ["PostgresGraphStore"]

TABLE_PREFIX_PATTERN = r"[a-z_][a-z0-9_]{0,29}"
MAX_GRAPH_NAME = 255
STREAM_ROWS = 1_000  # rows fetched at a time by iter_nodes / iter_edges
BIGINT_MAX = 2**63 - 1

EDGE_KEY = ("source_id", "target_id", "relation")

# isolation of reads: one SELECT sees one snapshot by itself (no BEGIN and COMMIT round trips);
# several SELECTs share one in a REPEATABLE READ transaction; a server-side cursor needs a transaction
ONE_STATEMENT, SNAPSHOT, CURSOR = "AUTOCOMMIT", "REPEATABLE READ", "READ COMMITTED"


class PostgresGraphStore(GraphStore):
    """A ``GraphStore`` in PostgreSQL: several graphs (by ``graph_name``) share one set of tables.

    Every write call is one transaction, committed when it returns; inside :meth:`batch` the
    calls share one transaction (each call on its own savepoint, so a refused call leaves the
    batch usable), committed when the outermost batch ends. Other processes see the graph as soon
    as it is committed, so several workers can serve one graph. :meth:`save` has nothing left to do.

    Args:
        url_or_engine: ``postgresql+psycopg://user:password@host:5432/db`` (``postgresql://``
            means psycopg 3), or an Engine on PostgreSQL, which :meth:`close` leaves open.
        graph_name: the graph (1 to 255 characters, any text); created empty on first use.
        table_prefix: prefix of the five table names (lower-case letters, digits and ``_``, at
            most 30 characters).

    Raises:
        ParameterError: a bad argument.
        StorageError: the database cannot be reached, or the tables cannot be created.

    Example:
        >>> store = PostgresGraphStore("postgresql+psycopg://mxrag:mxrag@127.0.0.1:5432/mxrag",
        ...                            graph_name="manuals")
        >>> store.upsert_nodes([Node("ada", descriptions={"c1": "a mathematician"})])
        >>> store.expand(["ada"], depth=2).nodes
        {'ada': 0}
        >>> pipeline = GraphRAGPipeline(work_dir, llm, embedding, 384, graph_type="postgres",
        ...                             postgres_url=url)          # or graph_store=store
    """

    def __init__(
        self, url_or_engine: str | URL | Engine, graph_name: str = "graph", *, table_prefix: str = "mxrag_graph"
    ) -> None:
        check_str("graph_name", graph_name, 1, MAX_GRAPH_NAME)
        _check_text("graph_name", [graph_name])
        check_pattern("table_prefix", table_prefix, TABLE_PREFIX_PATTERN)
        self._graph_name = graph_name
        self._t = _tables(table_prefix)
        self._lock = threading.RLock()
        self._batch: Connection | None = None
        self._batch_thread: int | None = None
        self._engine, self._owns_engine = postgres_engine(url_or_engine)
        try:
            self._graph_id = self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> int:
        """Create the tables if missing (a race with another process is retried once); the graph's id."""
        graphs = self._t["graphs"]
        for attempt in (1, 2):
            try:
                with self._engine.begin() as conn:
                    graphs.metadata.create_all(conn)
                    conn.execute(pg_insert(graphs).values(name=self._graph_name).on_conflict_do_nothing())
                    return int(conn.execute(select(graphs.c.id).where(graphs.c.name == self._graph_name)).scalar_one())
            except SQLAlchemyError as exc:
                if attempt == 2 or not isinstance(exc, IntegrityError | ProgrammingError):
                    raise StorageError(f"opening graph {self._graph_name!r} in {graphs.name!r} failed: {exc}") from exc
        raise AssertionError("unreachable")

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine."""
        return self._engine

    @property
    def graph_name(self) -> str:
        return self._graph_name

    # -- connections -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StorageError(f"{action} failed on graph {self._graph_name!r}: {exc}") from exc
        except UnicodeEncodeError as exc:  # a lone surrogate
            raise ParameterError(f"{action}: the text holds characters UTF-8 cannot encode ({exc.reason})") from exc

    @contextlib.contextmanager
    def _writing(self, action: str) -> Iterator[Connection]:
        """One write call: its own transaction, or a savepoint of the running batch."""
        with self._lock, self._errors(action):
            if self._batch is not None:
                with self._batch.begin_nested():
                    yield self._batch
            else:
                with self._engine.begin() as conn:
                    yield conn

    @contextlib.contextmanager
    def _reading(self, action: str, isolation: str = ONE_STATEMENT) -> Iterator[Connection]:
        """A read: on the batch's connection in the thread running a batch (to see its writes),
        else a pooled connection with ``isolation`` (see ``ONE_STATEMENT``, ``SNAPSHOT``, ``CURSOR``)."""
        with self._errors(action):
            if self._batch is not None and self._batch_thread == threading.get_ident():
                yield self._batch
                return
            with self._engine.connect().execution_options(isolation_level=isolation) as conn:
                if isolation == ONE_STATEMENT:
                    yield conn
                    return
                with conn.begin():
                    yield conn

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        with self._lock:
            if self._batch is not None:  # nested: the outermost batch commits
                yield
                return
            with self._errors("starting a batch"):
                conn = self._engine.connect()
            try:
                transaction = conn.begin()
                self._batch, self._batch_thread = conn, threading.get_ident()
                try:
                    yield
                except BaseException:
                    transaction.rollback()
                    raise
                with self._errors("committing a batch"):
                    transaction.commit()
            finally:
                self._batch = self._batch_thread = None
                conn.close()

    def save(self) -> None:
        """Nothing to do: every write is committed when its call (or the outermost batch) ends."""

    def close(self) -> None:
        """Close the pooled connections (the engine is disposed only if the store created it)."""
        if self._owns_engine:
            self._engine.dispose()

    # -- writes ----------------------------------------------------------------------------------

    def upsert_nodes(self, nodes: Iterable[Node]) -> None:
        merged = _merged_nodes(nodes)
        if not merged:
            return
        items = [merged[name][0] for name in sorted(merged)]  # one lock order for concurrent writers
        columns: dict[str, list[Any]] = {name: [getattr(n, name) for n in items] for name in ("name", "label", "type")}
        with self._writing("adding nodes") as conn:
            _insert(conn, self._t["nodes"], self._graph_id, columns, ["graph_id", "name"])
            ids = self._ids_of(conn, list(merged))
            self._insert_sources(conn, "node", [(ids[n], descs) for n, (_, descs) in merged.items()])

    def _insert_sources(self, conn: Connection, kind: str, owners: list[tuple[int, dict[str, str]]]) -> None:
        """``(owner id, {chunk id: description})``; a chunk already there gets the new text."""
        rows = sorted((owner, chunk, text) for owner, descs in owners for chunk, text in descs.items())
        if rows:
            names = (f"{kind}_id", "chunk_id", "description")
            columns: dict[str, list[Any]] = {name: [row[i] for row in rows] for i, name in enumerate(names)}
            _insert(conn, self._t[f"{kind}_sources"], self._graph_id, columns, [f"{kind}_id", "chunk_id"],
                    update=["description"])  # fmt: skip

    def upsert_edges(self, edges: Iterable[Edge]) -> None:
        merged = _merged_edges(edges)
        if not merged:
            return
        with self._writing("adding edges") as conn:
            ids = self._ids_of(conn, sorted({n for key in merged for n in key[:2]}))
            missing = sorted({n for key in merged for n in key[:2] if n not in ids})
            if missing:
                raise StorageError(f"cannot add edges to nodes that are not stored: {missing[:5]}")
            by_key = {(ids[s], ids[t], r): descs for (s, t, r), descs in merged.items()}
            keys = sorted(by_key)  # one lock order for concurrent writers
            columns: dict[str, list[Any]] = {name: [key[i] for key in keys] for i, name in enumerate(EDGE_KEY)}
            _insert(conn, self._t["edges"], self._graph_id, columns, list(EDGE_KEY))
            edge_ids = self._edge_ids(conn, columns)
            self._insert_sources(conn, "edge", [(edge_ids[key], by_key[key]) for key in keys])

    def _edge_ids(self, conn: Connection, columns: dict[str, list[Any]]) -> dict[tuple[int, int, str], int]:
        """Edge id by ``(source_id, target_id, relation)``, for the keys held in ``columns``."""
        table = self._t["edges"]
        found: dict[tuple[int, int, str], int] = {}
        for start in range(0, len(columns["relation"]), WRITE_ROWS):
            part = {name: values[start : start + WRITE_ROWS] for name, values in columns.items()}
            rows = _rows(table, part)
            query = select(table.c.id, *(table.c[name] for name in EDGE_KEY)).join(
                rows, sa.and_(*(table.c[name] == rows.c[name] for name in EDGE_KEY))
            )
            found.update({(s, t, r): i for i, s, t, r in conn.execute(query, part)})
        return found

    def remove_sources(self, chunk_ids: Iterable[str]) -> list[str]:
        gone = list(dict.fromkeys(chunk_ids))
        _check_text("chunk ids", gone)
        if not gone:
            return []
        with self._writing("removing sources") as conn:
            self._drop_unsupported(conn, "edge", gone)
            return sorted(self._drop_unsupported(conn, "node", gone))

    def _drop_unsupported(self, conn: Connection, kind: str, chunks: list[str]) -> list[Any]:
        """Delete the ``chunks`` rows of ``<kind>_sources``, then the nodes or edges they supported
        that have no source left (a node takes its edges along); return the deleted nodes' names."""
        owners, sources = self._t[f"{kind}s"], self._t[f"{kind}_sources"]
        mine = (sources.c.graph_id == self._graph_id, sources.c.chunk_id == _any("c", _TEXTS))
        dropped = sa.delete(sources).where(*mine)
        touched = sorted(set(conn.execute(dropped.returning(sources.c[f"{kind}_id"]), {"c": chunks}).scalars()))
        supported = sa.exists().where(sources.c[f"{kind}_id"] == owners.c.id)
        dead = sa.delete(owners).where(owners.c.id == _any("ids"), ~supported)
        if kind == "edge":
            conn.execute(dead, {"ids": touched})
            return []
        return list(conn.execute(dead.returning(owners.c.name), {"ids": touched}).scalars())

    def clear(self) -> None:
        """Delete every node and edge of this graph (other graphs in the tables are untouched).

        Node ids are still never reused.
        """
        nodes = self._t["nodes"]
        with self._writing("clearing the graph") as conn:
            conn.execute(sa.delete(nodes).where(nodes.c.graph_id == self._graph_id))

    # -- reads -----------------------------------------------------------------------------------

    def _ids_of(self, conn: Connection, names: list[str]) -> dict[str, int]:
        nodes = self._t["nodes"]
        where = (nodes.c.graph_id == self._graph_id, nodes.c.name == _any("names", _TEXTS))
        return {name: node_id for name, node_id in conn.execute(select(nodes.c.name, nodes.c.id).where(*where),
                                                                 {"names": names})}  # fmt: skip

    def _node_query(self, *where: Any) -> Any:
        """Nodes (with ``graph_id``) and their sources, ordered by id: those of ``where``, else all
        of this graph."""
        nodes, sources = self._t["nodes"], self._t["node_sources"]
        return (
            select(nodes.c.id, nodes.c.name, nodes.c.label, nodes.c.type, nodes.c.graph_id, sources.c.chunk_id,
                   sources.c.description)
            .outerjoin(sources, sources.c.node_id == nodes.c.id)
            .where(*(where or [nodes.c.graph_id == self._graph_id]))
            .order_by(nodes.c.id)
        )  # fmt: skip

    def _edge_query(self, where: Any = None) -> Any:
        """Edges with their sources, ordered by id: those of ``where``, else all of this graph.

        A ``where`` on node ids needs no graph filter (node ids are unique across graphs), and
        must not have one: without fresh statistics the planner would scan the graph's edges."""
        edges, sources = self._t["edges"], self._t["edge_sources"]
        head, tail = self._t["nodes"].alias("head"), self._t["nodes"].alias("tail")
        return (
            select(edges.c.id, tail.c.name, head.c.name, edges.c.relation, sources.c.chunk_id, sources.c.description)
            .join(tail, tail.c.id == edges.c.source_id)
            .join(head, head.c.id == edges.c.target_id)
            .outerjoin(sources, sources.c.edge_id == edges.c.id)
            .where(edges.c.graph_id == self._graph_id if where is None else where)
            .order_by(edges.c.id)
        )

    def _read_nodes(self, conn: Connection, where: Any, params: dict[str, Any]) -> list[Node]:
        """This graph's nodes among those ``where`` selects."""
        rows = conn.execute(self._node_query(where), params)
        return [_node(i, fields, descs) for i, fields, descs in _grouped(rows) if fields[-1] == self._graph_id]

    def _read_edges(self, conn: Connection, where: Any, params: dict[str, Any]) -> list[Edge]:
        rows = conn.execute(self._edge_query(where), params)
        return [Edge(s, t, r, descs) for _, (s, t, r), descs in _grouped(rows)]

    def get_nodes(self, names: Iterable[str]) -> dict[str, Node]:
        wanted = _usable(names)
        if not wanted:
            return {}
        with self._reading("reading nodes") as conn:
            nodes = self._t["nodes"]
            where = sa.and_(nodes.c.graph_id == self._graph_id, nodes.c.name == _any("names", _TEXTS))
            found = self._read_nodes(conn, where, {"names": wanted})
        return {node.name: node for node in found}

    def get_nodes_by_id(self, ids: Iterable[int]) -> dict[int, Node]:
        wanted = [i for i in dict.fromkeys(ids) if isinstance(i, int) and 0 < i <= BIGINT_MAX]
        if not wanted:
            return {}
        with self._reading("reading nodes") as conn:  # by id alone: see _edge_query on the graph filter
            found = self._read_nodes(conn, self._t["nodes"].c.id == _any("ids"), {"ids": wanted})
        return {node.id: node for node in found}

    def edges_of(self, names: Iterable[str]) -> list[Edge]:
        wanted = _usable(names)
        if not wanted:
            return []
        edges = self._t["edges"]
        with self._reading("reading edges", SNAPSHOT) as conn:
            ids = list(self._ids_of(conn, wanted).values())
            where = sa.or_(edges.c.source_id == _any("ids"), edges.c.target_id == _any("ids"))
            return self._read_edges(conn, where, {"ids": ids}) if ids else []

    def iter_nodes(self) -> Iterator[Node]:
        return (_node(i, fields, descs) for i, fields, descs in _grouped(self._stream(self._node_query())))

    def iter_edges(self) -> Iterator[Edge]:
        return (Edge(s, t, r, descs) for _, (s, t, r), descs in _grouped(self._stream(self._edge_query())))

    def _stream(self, query: Any) -> Iterator[Sequence[Any]]:
        """The rows of ``query``: fetched whole in a batch's thread, else through a server-side cursor."""
        with self._reading("iterating the graph", CURSOR) as conn:
            if conn is self._batch:
                yield from conn.execute(query).all()
                return
            yield from conn.execution_options(stream_results=True, yield_per=STREAM_ROWS).execute(query)

    def count_nodes(self) -> int:
        return self._count("nodes")

    def count_edges(self) -> int:
        return self._count("edges")

    def _count(self, name: str) -> int:
        table = self._t[name]
        with self._reading(f"counting {name}") as conn:
            return int(conn.execute(select(sa.func.count()).where(table.c.graph_id == self._graph_id)).scalar_one())

    def expand(self, names: Iterable[str], depth: int, max_nodes: int | None = None) -> Subgraph:
        """Breadth-first in SQL: one query per hop for the unseen neighbours of the frontier.

        Within a hop, nodes are taken in name order (code points), as ``GraphStore.expand`` does.
        """
        start = _usable(names)
        limit = BIGINT_MAX if max_nodes is None else max(0, max_nodes)
        reached: dict[str, int] = {}
        ids: list[int] = []
        with self._reading("expanding the graph", SNAPSHOT) as conn:
            found = self._ids_of(conn, start) if start else {}
            frontier = sorted(found.items())[:limit]
            for hop in range(depth + 1):
                if hop:
                    if not frontier or len(reached) >= limit:
                        break
                    frontier = self._neighbours(conn, [i for _, i in frontier], ids)[: limit - len(reached)]
                for name, node_id in frontier:
                    reached[name] = hop
                    ids.append(node_id)
            found_edges = self._edges_among(conn, dict(zip(ids, reached, strict=True))) if ids else []
        return Subgraph(nodes=reached, edges=tuple(sorted(found_edges, key=lambda e: e.key)))

    def _edges_among(self, conn: Connection, names: dict[int, str]) -> list[Edge]:
        """The edges with both ends in ``names`` (node id -> name), with their sources."""
        edges, sources = self._t["edges"], self._t["edge_sources"]
        query = (
            select(edges.c.id, edges.c.source_id, edges.c.target_id, edges.c.relation, sources.c.chunk_id,
                   sources.c.description)
            .outerjoin(sources, sources.c.edge_id == edges.c.id)
            .where(edges.c.source_id == _any("ids"), edges.c.target_id == _any("ids"))
            .order_by(edges.c.id)
        )  # fmt: skip
        rows = conn.execute(query, {"ids": list(names)})
        return [Edge(names[s], names[t], r, descs) for _, (s, t, r), descs in _grouped(rows)]

    def _neighbours(self, conn: Connection, frontier: list[int], seen: list[int]) -> list[tuple[str, int]]:
        """``(name, id)`` of the nodes one edge away from ``frontier`` and not in ``seen``, by name."""
        nodes, edges = self._t["nodes"], self._t["edges"]
        near = sa.union(
            select(edges.c.target_id).where(edges.c.source_id == _any("frontier")),
            select(edges.c.source_id).where(edges.c.target_id == _any("frontier")),
        )
        query = select(nodes.c.name, nodes.c.id).where(nodes.c.id.in_(near), ~(nodes.c.id == _any("seen")))
        return sorted(tuple(row) for row in conn.execute(query, {"frontier": frontier, "seen": seen}))
