# SPDX-License-Identifier: Apache-2.0
"""One behaviour contract for every ``GraphStore``.

A backend proves itself by subclassing ``GraphStoreConformance`` and providing the ``make_store``
fixture: a callable ``make_store(name="main") -> GraphStore`` that opens the store called
``name``, private to the running test. The first open of a name gives an empty store; opening
the same name again (after ``close()`` of the earlier object) gives what was made durable::

    class TestMyStore(GraphStoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            return lambda name="main": MyStore(tmp_path / f"{name}.db")

Needs pytest (a test dependency, not one of mx_rag's). mx_rag runs it on NetworkxGraphStore and
PostgresGraphStore (tests/graphrag/).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from mx_rag.errors import StorageError
from mx_rag.graphrag.graph_store import Edge, GraphStore, Node

__all__ = ["GraphStoreConformance", "StoreFactory", "chain_graph", "edge", "edge_keys", "names", "node"]

StoreFactory = Callable[..., GraphStore]


def node(name: str, *chunks: str, label: str = "", type: str = "entity", text: str = "") -> Node:
    """A node supported by ``chunks``, each with description ``text``."""
    return Node(name, label=label, type=type, descriptions={c: text for c in chunks})


def edge(source: str, target: str, relation: str, *chunks: str, text: str = "") -> Edge:
    """An edge supported by ``chunks``, each with description ``text``."""
    return Edge(source, target, relation, {c: text for c in chunks})


def names(store: GraphStore) -> set[str]:
    """The names of every node of ``store``."""
    return {n.name for n in store.iter_nodes()}


def edge_keys(store: GraphStore) -> set[tuple[str, str, str]]:
    """``(source, target, relation)`` of every edge of ``store``."""
    return {e.key for e in store.iter_edges()}


def chain_graph(store: GraphStore) -> None:
    """a -> b -> c -> d, e -> a, plus an isolated node z; all from chunk c1."""
    with store.batch():
        store.upsert_nodes([node(n, "c1") for n in "abcdez"])
        store.upsert_edges([edge("a", "b", "r", "c1"), edge("b", "c", "r", "c1"),
                            edge("c", "d", "r", "c1"), edge("e", "a", "r", "c1")])


class GraphStoreConformance:
    """Subclass this and provide the ``make_store`` fixture (see the module docstring)."""

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> GraphStore:
        return make_store()

    # -- nodes -----------------------------------------------------------------------------------

    def test_a_new_store_is_empty(self, store: GraphStore) -> None:
        assert store.count_nodes() == 0
        assert store.count_edges() == 0
        assert list(store.iter_nodes()) == []
        assert list(store.iter_edges()) == []
        assert store.get_node("x") is None
        assert store.expand(["x"], depth=2).nodes == {}

    def test_upsert_assigns_distinct_positive_ids(self, store: GraphStore) -> None:
        store.upsert_nodes([node("ada", "c1", label="Ada", type="person", text="a mathematician"),
                            node("london", "c1")])
        ada, london = store.get_node("ada"), store.get_node("london")
        assert ada is not None and london is not None
        assert ada.label == "Ada" and ada.type == "person" and ada.description == "a mathematician"
        assert london.label == "london" and london.type == "entity"
        assert ada.id > 0 and london.id > 0 and ada.id != london.id
        assert store.get_nodes_by_id([ada.id, london.id, 10**9]) == {ada.id: ada, london.id: london}
        assert store.count_nodes() == 2
        assert store.has_node("ada") and not store.has_node("Ada")

    def test_upsert_merges_descriptions_and_keeps_label_type_and_id(self, store: GraphStore) -> None:
        store.upsert_nodes([node("ada", "c1", label="Ada", type="person", text="first")])
        first = store.get_node("ada")
        assert first is not None
        store.upsert_nodes([node("ada", "c2", label="ADA", type="other", text="second"),
                            node("ada", "c1", text="first, revised")])
        merged = store.get_node("ada")
        assert merged is not None
        assert (merged.id, merged.label, merged.type) == (first.id, "Ada", "person")
        assert dict(merged.descriptions) == {"c1": "first, revised", "c2": "second"}
        assert merged.sources == {"c1", "c2"}
        assert store.count_nodes() == 1

    def test_get_nodes_leaves_out_missing_names(self, store: GraphStore) -> None:
        store.upsert_nodes([node("a", "c1"), node("b", "c1")])
        assert set(store.get_nodes(["a", "missing", "b", "a"])) == {"a", "b"}
        assert store.get_nodes([]) == {}

    def test_any_text_is_a_valid_name(self, make_store: StoreFactory) -> None:
        odd = ["O'Brien", 'say "hi"', "a\\b", "línea\nnueva", "北京大学", "x); DROP TABLE t; --", "%_*", " sp "]
        store = make_store()
        store.upsert_nodes([node(n, "c'1", text=n) for n in odd])
        store.upsert_edges([edge(odd[0], odd[1], "it's \"quoted\"", "c'1")])
        store.save()
        store.close()
        reopened = make_store()
        assert names(reopened) == set(odd)
        assert {n: reopened.get_nodes([n])[n].description for n in odd} == {n: n for n in odd}
        assert edge_keys(reopened) == {(odd[0], odd[1], "it's \"quoted\"")}

    # -- edges -----------------------------------------------------------------------------------

    def test_several_relations_between_one_pair_are_kept(self, store: GraphStore) -> None:
        store.upsert_nodes([node("a", "c1"), node("b", "c1")])
        store.upsert_edges([edge("a", "b", "founded", "c1"), edge("a", "b", "led", "c1"),
                            edge("b", "a", "founded", "c1")])
        store.upsert_edges([edge("a", "b", "founded", "c2", text="in 1900")])
        assert store.count_edges() == 3
        founded = [e for e in store.iter_edges() if e.key == ("a", "b", "founded")]
        assert len(founded) == 1 and dict(founded[0].descriptions) == {"c1": "", "c2": "in 1900"}

    def test_edges_of_returns_both_directions_once(self, store: GraphStore) -> None:
        chain_graph(store)
        assert {e.key for e in store.edges_of(["a"])} == {("a", "b", "r"), ("e", "a", "r")}
        assert {e.key for e in store.edges_of(["a", "b"])} == {("a", "b", "r"), ("e", "a", "r"), ("b", "c", "r")}
        assert len(store.edges_of(["a", "b"])) == 3
        assert store.edges_of(["z"]) == [] and store.edges_of(["missing"]) == []

    def test_an_edge_to_a_missing_node_is_refused_whole(self, store: GraphStore) -> None:
        store.upsert_nodes([node("a", "c1"), node("b", "c1")])
        with pytest.raises(StorageError):
            store.upsert_edges([edge("a", "b", "ok", "c1"), edge("a", "ghost", "bad", "c1")])
        assert store.count_edges() == 0
        assert not store.has_node("ghost")

    # -- removal ---------------------------------------------------------------------------------

    def test_remove_sources_deletes_only_what_has_no_source_left(self, store: GraphStore) -> None:
        with store.batch():
            store.upsert_nodes([node("shared", "c1", "c2", text="x"), node("only1", "c1"), node("only2", "c2")])
            store.upsert_edges([edge("shared", "only1", "r", "c1"), edge("shared", "only2", "r", "c2"),
                                edge("only2", "shared", "s", "c1", "c2")])
        removed = store.remove_sources(["c2"])
        assert removed == ["only2"]
        assert names(store) == {"shared", "only1"}
        assert edge_keys(store) == {("shared", "only1", "r")}
        shared = store.get_node("shared")
        assert shared is not None and shared.sources == {"c1"}

    def test_remove_sources_drops_an_edge_whose_sources_are_gone(self, store: GraphStore) -> None:
        store.upsert_nodes([node("a", "c1", "c2"), node("b", "c1", "c2")])
        store.upsert_edges([edge("a", "b", "r", "c2"), edge("a", "b", "q", "c1", "c2")])
        assert store.remove_sources(["c2", "unknown"]) == []
        assert edge_keys(store) == {("a", "b", "q")}
        assert [e.sources for e in store.iter_edges()] == [frozenset({"c1"})]

    def test_remove_everything_returns_sorted_names(self, store: GraphStore) -> None:
        chain_graph(store)
        assert store.remove_sources(["c1"]) == sorted("abcdez")
        assert store.count_nodes() == 0 and store.count_edges() == 0
        assert store.remove_sources([]) == []

    def test_ids_are_never_reused(self, make_store: StoreFactory) -> None:
        store = make_store()
        store.upsert_nodes([node("a", "c1"), node("b", "c1")])
        old = {n.id for n in store.iter_nodes()}
        store.remove_sources(["c1"])
        store.upsert_nodes([node("a", "c2"), node("c", "c2")])
        store.save()
        store.close()
        store = make_store()
        store.upsert_nodes([node("d", "c3")])
        new = {n.id for n in store.iter_nodes()}
        assert len(new) == 3 and not new & old

    # -- expansion -------------------------------------------------------------------------------

    def test_expand_goes_both_ways_hop_by_hop(self, store: GraphStore) -> None:
        chain_graph(store)
        assert dict(store.expand(["b"], depth=0).nodes) == {"b": 0}
        assert dict(store.expand(["b"], depth=1).nodes) == {"b": 0, "a": 1, "c": 1}
        assert dict(store.expand(["b"], depth=2).nodes) == {"b": 0, "a": 1, "c": 1, "d": 2, "e": 2}
        assert list(store.expand(["b"], depth=2).nodes) == ["b", "a", "c", "d", "e"]

    def test_expand_returns_the_edges_among_reached_nodes(self, store: GraphStore) -> None:
        chain_graph(store)
        sub = store.expand(["b"], depth=1)
        assert {e.key for e in sub.edges} == {("a", "b", "r"), ("b", "c", "r")}
        assert all(isinstance(e, Edge) and e.sources == {"c1"} for e in sub.edges)
        assert store.expand(["a", "c"], depth=0).edges == ()

    def test_expand_ignores_unknown_names_and_honours_max_nodes(self, store: GraphStore) -> None:
        chain_graph(store)
        assert dict(store.expand(["missing", "z"], depth=3).nodes) == {"z": 0}
        limited = store.expand(["b"], depth=3, max_nodes=3)
        assert dict(limited.nodes) == {"b": 0, "a": 1, "c": 1}
        assert store.expand(["a", "b", "c"], depth=1, max_nodes=2).nodes.keys() <= {"a", "b", "c"}
        assert len(store.expand(["a", "b", "c"], depth=1, max_nodes=2).nodes) == 2

    # -- batches and durability ------------------------------------------------------------------

    def test_a_failed_batch_leaves_nothing(self, make_store: StoreFactory) -> None:
        store = make_store()
        store.upsert_nodes([node("kept", "c0")])
        store.save()
        with pytest.raises(RuntimeError), store.batch():
            store.upsert_nodes([node("a", "c1"), node("kept", "c1")])
            store.upsert_edges([edge("a", "kept", "r", "c1")])
            raise RuntimeError("boom")
        assert names(store) == {"kept"}
        kept = store.get_node("kept")
        assert kept is not None and kept.sources == {"c0"}
        assert store.count_edges() == 0
        store.close()
        assert names(make_store()) == {"kept"}

    def test_a_failed_removal_in_a_batch_is_undone(self, store: GraphStore) -> None:
        chain_graph(store)
        with pytest.raises(RuntimeError), store.batch():
            store.remove_sources(["c1"])
            raise RuntimeError("boom")
        assert names(store) == set("abcdez") and store.count_edges() == 4

    def test_nested_batches_commit_at_the_outermost(self, make_store: StoreFactory) -> None:
        store = make_store()
        with store.batch():
            with store.batch():
                store.upsert_nodes([node("a", "c1")])
            store.upsert_nodes([node("b", "c1")])
        store.close()
        assert names(make_store()) == {"a", "b"}

    def test_saved_graph_reopens_identical(self, make_store: StoreFactory) -> None:
        store = make_store()
        chain_graph(store)
        store.upsert_nodes([node("a", "c9", label="A!", text="more")])
        store.save()
        before_nodes = {n.name: n for n in store.iter_nodes()}
        before_edges = {e.key: e for e in store.iter_edges()}
        before_expansion = store.expand(["b"], depth=2)
        store.close()
        reopened = make_store()
        assert {n.name: n for n in reopened.iter_nodes()} == before_nodes
        assert {e.key: e for e in reopened.iter_edges()} == before_edges
        assert reopened.expand(["b"], depth=2) == before_expansion

    def test_stores_with_different_names_are_separate(self, make_store: StoreFactory) -> None:
        first, second = make_store("one"), make_store("two")
        first.upsert_nodes([node("a", "c1")])
        first.save()
        assert second.count_nodes() == 0

    # -- threads ---------------------------------------------------------------------------------

    def test_concurrent_writers_and_readers(self, store: GraphStore) -> None:
        store.upsert_nodes([node("hub", "c0")])
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            try:
                for i in range(20):
                    name = f"w{worker}-{i}"
                    with store.batch():
                        store.upsert_nodes([node(name, f"c{worker}")])
                        store.upsert_edges([edge("hub", name, "has", f"c{worker}")])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def read() -> None:
            try:
                for _ in range(20):
                    sub = store.expand(["hub"], depth=1)
                    assert all(e.source in sub.nodes and e.target in sub.nodes for e in sub.edges)
                    store.count_edges()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        threads += [threading.Thread(target=read) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert store.count_nodes() == 81 and store.count_edges() == 80
        assert len({n.id for n in store.iter_nodes()}) == 81
