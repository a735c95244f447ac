# SPDX-License-Identifier: Apache-2.0
"""``GraphStore``: the knowledge graph behind ``GraphRAGPipeline``, and its records.

The graph is directed and keeps several relations between the same pair of nodes. Every node and
every edge remembers which chunks support it, with the description each chunk gave, so that
deleting a document removes exactly what only that document supported.

Records are immutable values (``Node``, ``Edge``, ``Subgraph``); a store never returns its
internal objects, and never mutates the records it is given.

Implementations: ``NetworkxGraphStore`` (a file, the embedded default) and
``PostgresGraphStore`` (a database, for graphs shared between processes or too large for memory).
Every implementation passes ``tests/graphrag/graph_store_suite.py``.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mx_rag.utils.lifecycle import Closable

__all__ = ["DESCRIPTION_SEPARATOR", "Edge", "GraphStore", "Node", "Subgraph"]

DESCRIPTION_SEPARATOR = "\n"


def _frozen(descriptions: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(descriptions.items())))


def joined_description(descriptions: Mapping[str, str]) -> str:
    """The distinct non-empty descriptions, in chunk-id order, one per line."""
    seen: dict[str, None] = {}
    for text in descriptions.values():
        if text and text not in seen:
            seen[text] = None
    return DESCRIPTION_SEPARATOR.join(seen)


class _Supported:
    """What a node and an edge derive from their ``descriptions`` (chunk id -> description)."""

    descriptions: Mapping[str, str]

    @property
    def sources(self) -> frozenset[str]:
        """The ids of the chunks that support this node or edge."""
        return frozenset(self.descriptions)

    @property
    def description(self) -> str:
        """The distinct non-empty descriptions, one per line."""
        return joined_description(self.descriptions)


@dataclass(frozen=True)
class Node(_Supported):
    """One entity of the graph.

    Attributes:
        name: the key: the entity name normalised by the pipeline (case-folded, spaces
            collapsed). Unique in a store; any non-empty string (spaces, quotes, any script).
        label: the name as first written in a document ("Alan Turing"); defaults to ``name``.
        type: a free-form kind ("person", "organisation"; ``"entity"`` when unknown).
        descriptions: chunk id -> the description that chunk gave (possibly ``""``). Its keys
            are the chunks that support the node; a stored node always has at least one.
        id: a stable positive integer the store assigns when the node is first written (0 in
            records not read from a store). It never changes while the node exists and is never
            given to another node, even after the node is removed; the pipeline keys the node's
            vector by it.

    Example:
        >>> Node("alan turing", label="Alan Turing", descriptions={"c1": "a mathematician"})
    """

    name: str
    label: str = ""
    type: str = "entity"
    descriptions: Mapping[str, str] = field(default_factory=dict)
    id: int = 0

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)
        object.__setattr__(self, "descriptions", _frozen(self.descriptions))


@dataclass(frozen=True)
class Edge(_Supported):
    """One relation ``source -relation-> target`` between two stored nodes (by ``Node.name``).

    ``(source, target, relation)`` is the key: two different relations between the same nodes
    are two edges; the same relation written by two chunks is one edge with two sources.

    Attributes:
        source: name of the tail node.
        target: name of the head node.
        relation: a short verb phrase ("born in"), normalised by the pipeline; may be ``""``.
        descriptions: chunk id -> the description that chunk gave; keys are the supporting chunks.
    """

    source: str
    target: str
    relation: str = ""
    descriptions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "descriptions", _frozen(self.descriptions))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.target, self.relation)


@dataclass(frozen=True)
class Subgraph:
    """What ``GraphStore.expand`` reached.

    Attributes:
        nodes: node name -> hop distance from the nearest start node (0 for the start nodes),
            in order of discovery (hop by hop).
        edges: every stored edge whose two ends are both in ``nodes``.
    """

    nodes: Mapping[str, int]
    edges: tuple[Edge, ...]


class GraphStore(ABC, Closable):
    """A directed multi-relation graph of entities, with per-chunk provenance.

    Contract for implementations (``tests/graphrag/graph_store_suite.py`` checks it):

    * **Writes** merge. ``upsert_nodes`` creates missing nodes (assigning ``Node.id``) and merges
      into existing ones: the ``descriptions`` maps are united (a chunk id already present gets
      the new text); ``label``, ``type`` and ``id`` of an existing node are kept. ``upsert_edges``
      does the same per ``(source, target, relation)``; both end nodes must already be stored
      (earlier, or earlier in the same batch), else ``StorageError`` and nothing of that call is
      written.
    * **Removal** goes by chunk: ``remove_sources(chunk_ids)`` takes those chunks out of every
      node and edge; an edge left without sources is deleted; a node left without sources is
      deleted with all its edges. It returns the deleted node names.
    * **Durability**: a write is durable once ``save()`` returns, or when the outermost
      ``batch()`` block exits without an exception. A backend may make writes durable earlier
      (a database commits every call outside a batch). If a ``batch()`` block raises, none of
      the writes made inside it remain, for readers of this store as well as on disk.
    * **Reads** return fresh immutable records and never fail on missing names (they are left
      out). Iteration order is unspecified.
    * **Threads**: every method may be called from several threads at once; a reader sees each
      write call either completely or not at all.
    * **Errors**: storage failures raise ``mx_rag.errors.StorageError``; a store whose persisted
      data cannot be read raises ``StorageError`` when opened, never starts empty.

    Example:
        >>> with store.batch():
        ...     store.upsert_nodes([Node("ada", descriptions={"c1": "a mathematician"}),
        ...                         Node("london", descriptions={"c1": ""})])
        ...     store.upsert_edges([Edge("ada", "london", "born in", {"c1": ""})])
        >>> store.expand(["ada"], depth=1).nodes
        {'ada': 0, 'london': 1}
        >>> store.remove_sources(["c1"])
        ['ada', 'london']
    """

    # -- writes ----------------------------------------------------------------------------------

    @abstractmethod
    def upsert_nodes(self, nodes: Iterable[Node]) -> None:
        """Create or merge nodes (see the class contract). ``Node.id`` of the input is ignored."""

    @abstractmethod
    def upsert_edges(self, edges: Iterable[Edge]) -> None:
        """Create or merge edges; both end nodes must exist (``StorageError`` otherwise)."""

    @abstractmethod
    def remove_sources(self, chunk_ids: Iterable[str]) -> list[str]:
        """Take these chunks out of every node and edge; delete what has no source left.

        Returns:
            the names of the deleted nodes, sorted.
        """

    @abstractmethod
    def batch(self) -> contextlib.AbstractContextManager[None]:
        """A context manager grouping writes: durable together at exit, or undone on error.

        Batches nest; only the outermost one commits. Other threads' writes wait until the
        outermost batch of this store ends (implementations may also serialise reads).
        """

    # -- reads -----------------------------------------------------------------------------------

    @abstractmethod
    def get_nodes(self, names: Iterable[str]) -> dict[str, Node]:
        """The stored nodes among ``names``, by name (missing names are left out)."""

    @abstractmethod
    def get_nodes_by_id(self, ids: Iterable[int]) -> dict[int, Node]:
        """The stored nodes among ``ids`` (``Node.id``), by id (missing ids are left out)."""

    @abstractmethod
    def edges_of(self, names: Iterable[str]) -> list[Edge]:
        """Every edge with at least one end in ``names`` (each edge once)."""

    @abstractmethod
    def iter_nodes(self) -> Iterator[Node]:
        """Every node, in no particular order (a snapshot or a consistent cursor)."""

    @abstractmethod
    def iter_edges(self) -> Iterator[Edge]:
        """Every edge, in no particular order."""

    @abstractmethod
    def count_nodes(self) -> int:
        """Number of nodes."""

    @abstractmethod
    def count_edges(self) -> int:
        """Number of edges (relations), counting each ``(source, target, relation)`` once."""

    def get_node(self, name: str) -> Node | None:
        """One node by name, or None."""
        return self.get_nodes([name]).get(name)

    def has_node(self, name: str) -> bool:
        return name in self.get_nodes([name])

    def expand(self, names: Iterable[str], depth: int, max_nodes: int | None = None) -> Subgraph:
        """Breadth-first from ``names`` along edges in both directions, up to ``depth`` hops.

        Unknown start names are ignored. ``depth=0`` returns the start nodes alone (with the
        edges among them). With ``max_nodes``, discovery stops once that many nodes are reached
        (nearer nodes first; ties in an unspecified but deterministic order).
        Backends may override this with a native query; the result must be the same.
        """
        reached: dict[str, int] = {}
        for name in sorted(self.get_nodes(dict.fromkeys(names))):
            if max_nodes is not None and len(reached) >= max_nodes:
                break
            reached[name] = 0
        frontier = list(reached)
        for hop in range(1, depth + 1):
            if not frontier or (max_nodes is not None and len(reached) >= max_nodes):
                break
            found: set[str] = set()
            for edge in self.edges_of(frontier):
                found.update(n for n in (edge.source, edge.target) if n not in reached)
            frontier = []
            for name in sorted(found):
                if max_nodes is not None and len(reached) >= max_nodes:
                    break
                reached[name] = hop
                frontier.append(name)
        edges = tuple(
            sorted(
                (e for e in self.edges_of(reached) if e.source in reached and e.target in reached),
                key=lambda e: e.key,
            )
        )
        return Subgraph(nodes=reached, edges=edges)

    # -- lifecycle -------------------------------------------------------------------------------

    @abstractmethod
    def save(self) -> None:
        """Make every write so far durable."""

    def close(self) -> None:
        """Release files or connections; does not save. Idempotent."""
        return None

