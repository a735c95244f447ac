# SPDX-License-Identifier: Apache-2.0
"""PostgresGraphStore: the conformance suite, plus what only a database store does.

Needs a PostgreSQL server: ``MXRAG_TEST_POSTGRES_URL`` (``make test`` sets it from
``scripts/ensure_postgres.sh``); without it these tests are skipped. Every test gets its own
table prefix, and its tables are dropped afterwards.
"""

from __future__ import annotations

import itertools
import random
import threading
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, inspect, text

from mx_rag.errors import ParameterError, StorageError
from mx_rag.graphrag.graph_store import GraphStore
from mx_rag.graphrag.pg_graph_store import PostgresGraphStore
from mx_rag.testing.graph_store import GraphStoreConformance, StoreFactory, chain_graph, edge, edge_keys, names, node

TABLES = ("edge_sources", "node_sources", "edges", "nodes", "graphs")


@pytest.fixture
def prefix(postgres_url: str) -> Iterator[str]:
    """A table prefix unique to the test; its tables are dropped when the test ends."""
    name = f"g_{uuid.uuid4().hex[:16]}"
    yield name
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            for table in TABLES:
                conn.execute(text(f"DROP TABLE IF EXISTS {name}_{table} CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture
def make_store(postgres_url: str, prefix: str) -> Iterator[StoreFactory]:
    stores: list[GraphStore] = []

    def make(name: str = "main") -> GraphStore:
        stores.append(PostgresGraphStore(postgres_url, graph_name=name, table_prefix=prefix))
        return stores[-1]

    yield make
    for store in stores:
        store.close()


class TestPostgresStore(GraphStoreConformance):
    pass


# -- values travel as parameters ------------------------------------------------------------------

HOSTILE = [
    "O'Brien",
    "'; DROP TABLE x; --",
    'a "quoted" name',
    "back\\slash\\",
    "\\x00 not a NUL",
    "(parens) [brackets] {braces}",
    "$1 $$dollar$$ :name %(name)s %s ?",
    "Ærøskøbing — naïve café",
    "北京大学",
    "😀 emoji",
    "tab\tand\nnewline",
    "  leading and trailing  ",
    "%_ like wildcards",
    "E'\\n'",
]
PAIRS = list(itertools.pairwise(HOSTILE))


def test_hostile_names_are_stored_and_found_exactly(make_store: StoreFactory) -> None:
    store = make_store()
    store.upsert_nodes([node(n, f"chunk {n}", label=n, type=n, text=n) for n in HOSTILE])
    store.upsert_edges([edge(a, b, f"{a}->{b}", f"chunk {a}", text=b) for a, b in PAIRS])
    found = store.get_nodes(HOSTILE)
    assert set(found) == set(HOSTILE)
    for name, item in found.items():
        assert (item.label, item.type, item.description, item.sources) == (name, name, name, {f"chunk {name}"})
    assert store.get_nodes_by_id([found[n].id for n in HOSTILE]).keys() == {found[n].id for n in HOSTILE}
    assert edge_keys(store) == {(a, b, f"{a}->{b}") for a, b in PAIRS}
    far = store.expand([HOSTILE[0]], depth=len(HOSTILE))
    assert list(far.nodes) == HOSTILE and far.nodes[HOSTILE[-1]] == len(HOSTILE) - 1
    assert store.remove_sources([f"chunk {HOSTILE[1]}"]) == [HOSTILE[1]]
    assert store.count_nodes() == len(HOSTILE) - 1
    assert store.get_nodes(["%", "_", "O%"]) == {}


def test_nul_characters_are_refused_and_nothing_is_written(make_store: StoreFactory) -> None:
    store = make_store()
    with pytest.raises(ParameterError, match="NUL"):
        store.upsert_nodes([node("ok", "c1"), node("bad\x00name", "c1")])
    with pytest.raises(ParameterError, match="NUL"):
        store.upsert_nodes([node("ok", "c\x001")])
    assert store.count_nodes() == 0
    assert store.get_nodes(["bad\x00name"]) == {}


# -- namespacing ----------------------------------------------------------------------------------


def test_graphs_share_tables_but_not_nodes(make_store: StoreFactory, postgres_url: str, prefix: str) -> None:
    first, second = make_store("first"), make_store("second")
    chain_graph(first)
    chain_graph(second)
    second.upsert_nodes([node("only-in-second", "c1")])
    assert names(first) == set("abcdez") and names(second) == set("abcdez") | {"only-in-second"}
    first_ids = {n.id for n in first.iter_nodes()}
    assert not first_ids & {n.id for n in second.iter_nodes()}
    assert first.get_nodes_by_id(list(first_ids | {n.id for n in second.iter_nodes()})).keys() == first_ids
    assert first.get_node("only-in-second") is None and first.edges_of(["only-in-second"]) == []
    assert first.remove_sources(["c1"]) == sorted("abcdez")
    assert second.count_nodes() == 7 and second.count_edges() == 4
    assert dict(second.expand(["b"], depth=1).nodes) == {"b": 0, "a": 1, "c": 1}
    engine = create_engine(postgres_url)
    try:
        tables = set(inspect(engine).get_table_names())
        assert {f"{prefix}_{t}" for t in TABLES} <= tables
        with engine.connect() as conn:
            rows = conn.execute(text(f"SELECT name FROM {prefix}_graphs ORDER BY name")).scalars().all()
        assert rows == ["first", "second"]
    finally:
        engine.dispose()


def test_clear_empties_one_graph_only(make_store: StoreFactory) -> None:
    first, second = make_store("first"), make_store("second")
    chain_graph(first)
    chain_graph(second)
    old = {n.id for n in first.iter_nodes()}
    first.clear()  # type: ignore[attr-defined]
    assert first.count_nodes() == 0 and first.count_edges() == 0
    assert second.count_nodes() == 6 and second.count_edges() == 4
    first.upsert_nodes([node("a", "c1")])
    assert {n.id for n in first.iter_nodes()}.isdisjoint(old)


@pytest.mark.parametrize("graph_name", ["with space", "O'Brien", "图", "x" * 255])
def test_any_graph_name_is_a_value(postgres_url: str, prefix: str, graph_name: str) -> None:
    store = PostgresGraphStore(postgres_url, graph_name=graph_name, table_prefix=prefix)
    try:
        store.upsert_nodes([node("a", "c1")])
        assert store.graph_name == graph_name and store.count_nodes() == 1
    finally:
        store.close()


# -- arguments and failures -----------------------------------------------------------------------


@pytest.mark.parametrize("graph_name", ["", "x" * 256, "nul\x00", 7])
def test_bad_graph_names_are_refused(postgres_url: str, graph_name: object) -> None:
    with pytest.raises(ParameterError, match="graph_name"):
        PostgresGraphStore(postgres_url, graph_name=graph_name)  # type: ignore[arg-type]


@pytest.mark.parametrize("table_prefix", ["Graph", "1g", "a-b", "x" * 31, "", "g;drop"])
def test_bad_table_prefixes_are_refused(postgres_url: str, table_prefix: str) -> None:
    with pytest.raises(ParameterError, match="table_prefix"):
        PostgresGraphStore(postgres_url, table_prefix=table_prefix)


@pytest.mark.parametrize("url", ["sqlite:///g.db", "not a url", "mysql+pymysql://u:p@localhost/db"])
def test_other_databases_are_refused(url: str) -> None:
    with pytest.raises(ParameterError, match="url_or_engine"):
        PostgresGraphStore(url)


def test_a_shared_engine_stays_open(postgres_url: str, prefix: str) -> None:
    engine = create_engine(postgres_url)
    try:
        store = PostgresGraphStore(engine, table_prefix=prefix)
        chain_graph(store)
        store.close()
        with engine.connect() as conn:
            assert conn.execute(text(f"SELECT count(*) FROM {prefix}_nodes")).scalar_one() == 6
    finally:
        engine.dispose()


def test_an_unreachable_server_raises_storage_error(postgres_url: str) -> None:
    url = create_engine(postgres_url).url.set(host="127.0.0.1", port=1)
    with pytest.raises(StorageError, match="opening graph"):
        PostgresGraphStore(url)


def test_a_refused_call_inside_a_batch_leaves_the_batch_usable(make_store: StoreFactory) -> None:
    store = make_store()
    with store.batch():
        store.upsert_nodes([node("a", "c1"), node("b", "c1")])
        with pytest.raises(StorageError):
            store.upsert_edges([edge("a", "ghost", "r", "c1")])
        store.upsert_edges([edge("a", "b", "r", "c1")])
    assert names(store) == {"a", "b"} and edge_keys(store) == {("a", "b", "r")}


def test_large_writes_and_streaming_reads(make_store: StoreFactory) -> None:
    """More rows than one statement or one fetch holds."""
    store = make_store()
    count = 12_345
    store.upsert_nodes([node(f"n{i}", f"c{i % 7}") for i in range(count)])
    store.upsert_edges([edge(f"n{i}", f"n{i + 1}", "next", "c0") for i in range(count - 1)])
    assert store.count_nodes() == count and store.count_edges() == count - 1
    assert sum(1 for _ in store.iter_nodes()) == count
    assert sum(1 for _ in store.iter_edges()) == count - 1
    assert len(store.expand(["n0"], depth=5).nodes) == 6
    removed = store.remove_sources([f"c{i}" for i in range(1, 7)])
    assert len(removed) == count - len(range(0, count, 7))


def test_expand_in_sql_equals_the_generic_breadth_first(make_store: StoreFactory) -> None:
    """The native expansion against ``GraphStore.expand`` (built on ``edges_of``) on a random graph."""
    rng = random.Random(7)
    store = make_store()
    nodes = [f"n{i:02d}" for i in range(60)]
    pairs = {(rng.choice(nodes), rng.choice(nodes)) for _ in range(120)}
    with store.batch():
        store.upsert_nodes([node(n, "c1") for n in nodes])
        store.upsert_edges([edge(a, b, rng.choice("rs"), "c1") for a, b in pairs if a != b])
    for _ in range(30):
        start = rng.sample([*nodes, "missing"], rng.randint(1, 4))
        depth, limit = rng.randint(0, 4), rng.choice([None, 1, 3, 10, 40])
        native, generic = store.expand(start, depth, limit), GraphStore.expand(store, start, depth, limit)
        assert list(native.nodes.items()) == list(generic.nodes.items()) and native.edges == generic.edges


def test_two_stores_on_one_graph_write_overlapping_batches_at_once(make_store: StoreFactory) -> None:
    """Two stores (two pools, as two processes would have) merging the same nodes in opposite orders."""
    first, second = make_store("shared"), make_store("shared")
    names_ = [f"n{i:03d}" for i in range(200)]
    errors: list[BaseException] = []

    def write(store: GraphStore, order: list[str], chunk: str) -> None:
        try:
            for start in range(0, len(order), 20):
                part = order[start : start + 20]
                with store.batch():
                    store.upsert_nodes([node(n, chunk) for n in part])
                    store.upsert_edges([edge(a, b, "next", chunk) for a, b in itertools.pairwise(part)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(first, names_, "c1")),
               threading.Thread(target=write, args=(second, names_[::-1], "c2"))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = {n.name: n for n in first.iter_nodes()}
    assert stored.keys() == set(names_) and all(n.sources == {"c1", "c2"} for n in stored.values())
    assert len({n.id for n in stored.values()}) == len(names_)
    assert second.count_edges() == 2 * (len(names_) - len(names_) // 20)
