# SPDX-License-Identifier: Apache-2.0
"""``NetworkxGraphStore``: the graph in memory (a networkx ``MultiDiGraph``), saved to one file.

The file is JSON (``{"format": "mxrag-graph", "version": 1, ...}``), optionally passed through
``encrypt_fn`` before writing and ``decrypt_fn`` after reading. Saves are atomic (temp file,
fsync, rename): a crash leaves the previous complete file. A missing file means a new, empty
graph; a file that cannot be read, decrypted or parsed raises ``StorageError``, so a damaged
graph is never silently replaced by an empty one.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from mx_rag.errors import ExtraNotInstalledError, StorageError
from mx_rag.graphrag.graph_store import Edge, GraphStore, Node
from mx_rag.utils.atomic import remove_stale_temps, write_atomic

__all__ = ["NetworkxGraphStore"]

FORMAT = "mxrag-graph"
VERSION = 1


def _networkx() -> Any:
    try:
        import networkx
    except ImportError as exc:
        raise ExtraNotInstalledError("networkx", "graph") from exc
    return networkx


class NetworkxGraphStore(GraphStore):
    """A ``GraphStore`` held in memory and saved to ``path`` (None: memory only).

    Args:
        path: the graph file; loaded if it exists.
        encrypt_fn / decrypt_fn: optional ``str -> str`` applied to the file's text.

    All methods are thread-safe (one lock; a ``batch()`` holds it until it ends).

    Example:
        >>> store = NetworkxGraphStore("/data/work/graph.json")
        >>> store.upsert_nodes([Node("ada", descriptions={"c1": ""})]); store.save()
    """

    def __init__(
        self,
        path: str | Path | None = None,
        encrypt_fn: Callable[[str], str] | None = None,
        decrypt_fn: Callable[[str], str] | None = None,
    ) -> None:
        self._nx = _networkx()
        self._path = None if path is None else Path(path)
        self._encrypt_fn = encrypt_fn
        self._decrypt_fn = decrypt_fn
        self._lock = threading.RLock()
        self._depth = 0
        self._graph = self._nx.MultiDiGraph()
        self._by_id: dict[int, str] = {}
        self._next_id = 1
        if self._path is not None:
            remove_stale_temps(self._path)
            if self._path.exists():
                self._load(self._path)

    # -- writes ----------------------------------------------------------------------------------

    def upsert_nodes(self, nodes: Iterable[Node]) -> None:
        with self._lock:
            for item in nodes:
                attrs = self._graph.nodes.get(item.name)
                if attrs is None:
                    self._graph.add_node(item.name, label=item.label, type=item.type,
                                         descriptions=dict(item.descriptions), id=self._next_id)
                    self._by_id[self._next_id] = item.name
                    self._next_id += 1
                else:
                    attrs["descriptions"] = {**attrs["descriptions"], **item.descriptions}

    def upsert_edges(self, edges: Iterable[Edge]) -> None:
        items = list(edges)
        with self._lock:
            missing = {n for e in items for n in (e.source, e.target) if n not in self._graph}
            if missing:
                raise StorageError(f"cannot add edges to nodes that are not stored: {sorted(missing)[:5]}")
            for item in items:
                data = self._graph.get_edge_data(item.source, item.target, key=item.relation)
                if data is None:
                    self._graph.add_edge(item.source, item.target, key=item.relation,
                                         descriptions=dict(item.descriptions))
                else:
                    data["descriptions"] = {**data["descriptions"], **item.descriptions}

    def remove_sources(self, chunk_ids: Iterable[str]) -> list[str]:
        gone = set(chunk_ids)
        if not gone:
            return []
        with self._lock:
            dead_edges = []
            for u, v, key, data in self._graph.edges(keys=True, data=True):
                if gone.intersection(data["descriptions"]):
                    left = {c: t for c, t in data["descriptions"].items() if c not in gone}
                    data["descriptions"] = left
                    if not left:
                        dead_edges.append((u, v, key))
            self._graph.remove_edges_from(dead_edges)
            dead_nodes = []
            for name, attrs in self._graph.nodes(data=True):
                if gone.intersection(attrs["descriptions"]):
                    attrs["descriptions"] = {c: t for c, t in attrs["descriptions"].items() if c not in gone}
                    if not attrs["descriptions"]:
                        dead_nodes.append(name)
            for name in dead_nodes:
                del self._by_id[self._graph.nodes[name]["id"]]
            self._graph.remove_nodes_from(dead_nodes)
            return sorted(dead_nodes)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            snapshot = (self._graph.copy(), dict(self._by_id), self._next_id)
            self._depth = 1
            try:
                yield
                self.save()
            except BaseException:
                self._graph, self._by_id, self._next_id = snapshot
                raise
            finally:
                self._depth = 0

    # -- reads -----------------------------------------------------------------------------------

    def get_nodes(self, names: Iterable[str]) -> dict[str, Node]:
        with self._lock:
            return {name: self._node(name) for name in names if name in self._graph}

    def get_nodes_by_id(self, ids: Iterable[int]) -> dict[int, Node]:
        with self._lock:
            return {i: self._node(self._by_id[i]) for i in ids if i in self._by_id}

    def edges_of(self, names: Iterable[str]) -> list[Edge]:
        with self._lock:
            found: dict[tuple[str, str, str], Edge] = {}
            for name in names:
                if name not in self._graph:
                    continue
                for u, v, key, data in self._graph.out_edges(name, keys=True, data=True):
                    found[(u, v, key)] = Edge(u, v, key, data["descriptions"])
                for u, v, key, data in self._graph.in_edges(name, keys=True, data=True):
                    found[(u, v, key)] = Edge(u, v, key, data["descriptions"])
            return list(found.values())

    def iter_nodes(self) -> Iterator[Node]:
        with self._lock:
            nodes = [self._node(name) for name in self._graph.nodes]
        return iter(nodes)

    def iter_edges(self) -> Iterator[Edge]:
        with self._lock:
            edges = [Edge(u, v, k, d["descriptions"]) for u, v, k, d in self._graph.edges(keys=True, data=True)]
        return iter(edges)

    def count_nodes(self) -> int:
        with self._lock:
            return int(self._graph.number_of_nodes())

    def count_edges(self) -> int:
        with self._lock:
            return int(self._graph.number_of_edges())

    def _node(self, name: str) -> Node:
        attrs = self._graph.nodes[name]
        return Node(name, label=attrs["label"], type=attrs["type"], descriptions=attrs["descriptions"],
                    id=attrs["id"])

    # -- files -----------------------------------------------------------------------------------

    def save(self) -> None:
        if self._path is None:
            return
        with self._lock:
            text = json.dumps(self._to_dict(), ensure_ascii=False, separators=(",", ":"))
        if self._encrypt_fn is not None:
            text = self._encrypt_fn(text)
        data = text.encode("utf-8")

        def write(tmp: str) -> None:
            Path(tmp).write_bytes(data)

        try:
            write_atomic(self._path, write)
        except OSError as exc:
            raise StorageError(f"cannot save the graph to {str(self._path)!r}: {exc}") from exc

    def _to_dict(self) -> dict[str, Any]:
        nodes = [
            {"name": n, "label": a["label"], "type": a["type"], "id": a["id"], "descriptions": a["descriptions"]}
            for n, a in self._graph.nodes(data=True)
        ]
        edges = [
            {"source": u, "target": v, "relation": k, "descriptions": d["descriptions"]}
            for u, v, k, d in self._graph.edges(keys=True, data=True)
        ]
        return {"format": FORMAT, "version": VERSION, "next_id": self._next_id, "nodes": nodes, "edges": edges}

    def _load(self, path: Path) -> None:
        where = f"the graph file {str(path)!r}"
        try:
            text = path.read_bytes().decode("utf-8")
            if self._decrypt_fn is not None:
                text = self._decrypt_fn(text)
            data = json.loads(text)
        except Exception as exc:
            raise StorageError(f"cannot read {where} (damaged, or the wrong decrypt_fn): {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
            raise StorageError(f"{where} is not an mx_rag graph of version {VERSION}")
        try:
            for item in data["nodes"]:
                self._graph.add_node(str(item["name"]), label=str(item["label"]), type=str(item["type"]),
                                     id=int(item["id"]), descriptions=_str_dict(item["descriptions"]))
                self._by_id[int(item["id"])] = str(item["name"])
            for item in data["edges"]:
                if item["source"] not in self._graph or item["target"] not in self._graph:
                    raise ValueError(f"edge {item['source']!r} -> {item['target']!r} names a missing node")
                self._graph.add_edge(str(item["source"]), str(item["target"]), key=str(item["relation"]),
                                     descriptions=_str_dict(item["descriptions"]))
            self._next_id = max(int(data["next_id"]), max(self._by_id, default=0) + 1)
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageError(f"{where} is inconsistent: {type(exc).__name__}: {exc}") from exc


def _str_dict(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError(f"descriptions must be an object, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}
