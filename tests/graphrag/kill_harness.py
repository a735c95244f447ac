# SPDX-License-Identifier: Apache-2.0
"""Shared by ``graph_kill_worker.py`` (the child that is killed) and ``test_graph_kill.py``.

* ``NameExtractor``: a deterministic ``Extractor`` (capitalised name spans of a sentence are its
  entities, every two names of one sentence are related by ``co-occurs with``), so builds run
  offline and fast.
* ``corpus()``: the documents the worker builds, each in one to three versions: paragraphs of
  ``tests/data/multihop/hotpotqa_sample.json`` (shared between documents and versions, so a text
  moves between documents), lines of ``tests/data/docs/norwich-city.txt``, and two real files of
  ``tests/data/docs`` as they are (``fake-html.html``, ``codeblock.md``).
* Plans: a list of operations (``build`` some documents at given versions, ``delete`` one) and
  ``apply_op``, the model of what each leaves registered; ``perform`` runs one on a pipeline.
* ``check_consistency``: what must hold of the durable state of a work folder (the chunk
  registry, the graph store, the node vectors) however a process died: read through the public
  API of fresh store objects, and, for PostgreSQL, with SQL where the API hides too much.
* ``Worker``: drives ``graph_kill_worker.py serve`` and kills the children it forks (``Kill``).
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mx_rag.document import LoaderMng
from mx_rag.errors import KnowledgeError
from mx_rag.graphrag import Chunk, Entity, Extraction, GraphRAGPipeline, GraphStore, Relation
from mx_rag.graphrag.merge import normalise_name, to_records
from mx_rag.graphrag.registry import ChunkRegistry, chunk_id
from mx_rag.testing import HashEmbedding

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
DIM = 64
GRAPH_NAME = "kill"
CHUNK_SIZE = 500
BATCH_SIZE = 2  # chunks extracted per batch: several extraction batches (and registry saves) per build
PG_PREFIX = "mxrag_graph"  # the default table prefix of PostgresGraphStore

# -- the extractor -------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_TOKEN = re.compile(r"[^\W\d_][\w'’\-]*|\S")
_JOINERS = frozenset({"of", "the", "de", "von", "van", "and"})
MAX_NAMES_PER_SENTENCE = 6


def _is_capitalised(token: str) -> bool:
    return token[:1].isupper()


def _spans(tokens: list[str]) -> list[tuple[int, str]]:
    """(position, name) of the runs of capitalised tokens ("University of Oslo" joins over "of")."""
    spans: list[tuple[int, str]] = []
    run: list[str] = []
    for i, token in enumerate([*tokens, ""]):
        if _is_capitalised(token):
            run.append(token.removesuffix("'s").removesuffix("’s"))
            continue
        if run and token in _JOINERS and i + 1 < len(tokens) and _is_capitalised(tokens[i + 1]):
            run.append(token)
            continue
        if run:
            spans.append((i - len(run), " ".join(run)))
        run = []
    return spans


def extract_names(text: str) -> Extraction:
    """Entities: capitalised spans; a one-word span opening a sentence counts only if the same
    word is written capitalised inside a sentence too. Relations: ``co-occurs with`` from every
    name to each later one of the same sentence (at most 6 names a sentence)."""
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    spans = [_spans(_TOKEN.findall(s)) for s in sentences]
    inner = {name for found in spans for pos, name in found if pos > 0}
    mentions: dict[str, int] = {}
    relations: list[Relation] = []
    for number, found in enumerate(spans):
        names = list(dict.fromkeys(n for pos, n in found if pos > 0 or " " in n or n in inner))
        names = names[:MAX_NAMES_PER_SENTENCE]
        for name in names:
            mentions[name] = mentions.get(name, 0) + 1
        relations += [Relation(a, b, "co-occurs with", f"sentence {number + 1}")
                      for i, a in enumerate(names) for b in names[i + 1 :]]  # fmt: skip
    entities = tuple(Entity(name, "name", f"{count} mention(s)") for name, count in mentions.items())
    return Extraction(entities, tuple(relations))


class NameExtractor:
    """An ``Extractor`` (``extract(chunks)``, one ``Extraction`` per chunk) without a model."""

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        return [extract_names(chunk.text) for chunk in chunks]


# -- the corpus ----------------------------------------------------------------------------------


def _hotpot_paragraphs() -> list[str]:
    found: dict[str, str] = {}
    for item in json.loads((DATA / "multihop" / "hotpotqa_sample.json").read_text(encoding="utf-8")):
        for title, sentences in item["context"]:
            found.setdefault(title, f"{title}: {''.join(sentences).strip()}")
    return [text for text in found.values() if 150 <= len(text) <= 900]


def corpus() -> dict[str, list[bytes]]:
    """File name -> the contents of its versions (0, 1, ...)."""
    paragraphs = _hotpot_paragraphs()
    lines = (DATA / "docs" / "norwich-city.txt").read_text(encoding="utf-8").splitlines()

    def hotpot(*indexes: int) -> bytes:
        return "\n\n".join(paragraphs[i] for i in indexes).encode("utf-8")

    def norwich(*ranges: tuple[int, int]) -> bytes:
        return "\n".join(line for a, b in ranges for line in lines[a:b]).encode("utf-8")

    return {
        "nolan.txt": [hotpot(0, 1, 2), hotpot(0, 3, 2), hotpot(0, 1, 2, 4)],
        "myths.md": [hotpot(5, 6, 7), hotpot(5, 1, 7)],  # version 1 shares a paragraph with nolan.txt
        "languages.txt": [hotpot(8, 9), hotpot(8, 9, 10, 11), hotpot(11, 3)],
        "norwich.txt": [norwich((20, 45)), norwich((20, 30), (60, 80))],
        "fake-html.html": [(DATA / "docs" / "fake-html.html").read_bytes()],
        "codeblock.md": [(DATA / "docs" / "codeblock.md").read_bytes()],
    }


def loader_mng() -> LoaderMng:
    return LoaderMng.with_defaults(chunk_size=CHUNK_SIZE, chunk_overlap=0)


def write_version(docs_dir: Path, name: str, version: int, texts: dict[str, list[bytes]]) -> Path:
    path = docs_dir / name
    path.write_bytes(texts[name][version])
    return path.resolve()


# -- plans ---------------------------------------------------------------------------------------

Model = dict[str, int]  # document file name -> the version built into the graph


def apply_op(model: Model, op: dict[str, Any]) -> Model:
    """The documents (and versions) registered after ``op`` completes."""
    after = dict(model)
    if op["op"] == "build":
        after.update(op["docs"])
    else:
        after.pop(op["doc"], None)
    return after


def make_plan(rng: random.Random, model: Model, start: int, length: int,
              texts: dict[str, list[bytes]]) -> list[dict[str, Any]]:  # fmt: skip
    """``length`` operations numbered from ``start``: builds of one to three documents (a
    version already built is re-added unchanged), and deletions of a registered document."""
    plan = []
    names = sorted(texts)
    for index in range(start, start + length):
        if model and rng.random() < 0.4:
            op: dict[str, Any] = {"op": "delete", "doc": rng.choice(sorted(model))}
        else:
            chosen = rng.sample(names, rng.randint(1, 3))
            op = {"op": "build", "docs": {n: rng.randrange(len(texts[n])) for n in sorted(chosen)}}
        op["index"] = index
        plan.append(op)
        model = apply_op(model, op)
    return plan


def perform(pipeline: GraphRAGPipeline, op: dict[str, Any], docs_dir: Path, texts: dict[str, list[bytes]],
            loader: LoaderMng) -> None:  # fmt: skip
    """Run one operation of a plan. A deletion of a document that is no longer built (the
    interrupted deletion finished when the pipeline reopened) is a no-op."""
    if op["op"] == "build":
        paths = [write_version(docs_dir, name, version, texts) for name, version in sorted(op["docs"].items())]
        pipeline.upload_files(paths, loader)
        pipeline.build_graph(batch_size=BATCH_SIZE)
        return
    path = (docs_dir / op["doc"]).resolve()
    try:
        pipeline.delete_document(path)
    except KnowledgeError:
        if str(path) in pipeline.documents():
            raise


# -- opening -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """Where a harness run keeps its graph."""

    store: str  # "networkx" or "postgres"
    work_dir: Path
    docs_dir: Path
    postgres_url: str | None = None
    graph_name: str = GRAPH_NAME

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "work_dir": str(self.work_dir), "docs_dir": str(self.docs_dir),
                "postgres_url": self.postgres_url, "graph_name": self.graph_name}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Setup:
        return Setup(data["store"], Path(data["work_dir"]), Path(data["docs_dir"]), data["postgres_url"],
                     data["graph_name"])


def open_pipeline(setup: Setup, postgres_url: str | None = None, extractor: NameExtractor | None = None
                  ) -> GraphRAGPipeline:  # fmt: skip
    """The pipeline over ``setup`` (``postgres_url`` overrides ``setup.postgres_url``)."""
    extra: dict[str, Any] = {}
    if setup.store == "postgres":
        extra["postgres_url"] = postgres_url or setup.postgres_url
    return GraphRAGPipeline(setup.work_dir, None, HashEmbedding(DIM), DIM, graph_type=setup.store,
                            graph_name=setup.graph_name, extractor=extractor or NameExtractor(), devs=None,
                            **extra)  # fmt: skip


def open_graph(setup: Setup) -> GraphStore:
    if setup.store == "postgres":
        from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

        assert setup.postgres_url is not None
        return PostgresGraphStore(setup.postgres_url, setup.graph_name)
    from mx_rag.graphrag.networkx_store import NetworkxGraphStore

    return NetworkxGraphStore(setup.work_dir / f"{setup.graph_name}.json")


def open_registry(setup: Setup) -> ChunkRegistry:
    return ChunkRegistry(setup.work_dir / f"{setup.graph_name}_chunks.json")


def vector_ids(setup: Setup) -> set[int]:
    from mx_rag.storage.vectorstore import MindFAISS

    path = setup.work_dir / f"{setup.graph_name}_node_vectors.index"
    if not path.exists():
        return set()
    return set(MindFAISS(x_dim=DIM, devs=None, load_local_index=path, metric_type="COSINE").get_all_ids())


def reset(setup: Setup) -> None:
    """Delete the graph: the files of the work folder, the rows of the PostgreSQL graph."""
    for path in setup.work_dir.iterdir():
        path.unlink()
    if setup.store == "postgres":
        from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

        store = PostgresGraphStore(setup.postgres_url or "", setup.graph_name)
        store.clear()
        store.close()


# -- the checks ----------------------------------------------------------------------------------


def check_consistency(setup: Setup) -> list[str]:
    """Every way the durable state of ``setup`` disagrees with itself (empty: consistent).

    * the graph: every edge joins two stored nodes; every node and edge has a supporting chunk;
      node ids are positive and unique and ``get_nodes_by_id`` finds each node by its id; the
      counts agree with the iterations; ``edges_of`` returns exactly the edges of a node;
    * the registry: every chunk of a registered document is recorded, with a cached extraction;
    * the graph against the registry: the nodes and edges, with the chunks supporting them and
      what each chunk said, are exactly those that the cached extractions of the registered
      documents' chunks give (so no node or edge of a document not registered, nor of an old
      version of one, and none of a registered document missing);
    * the node vectors are keyed by exactly the ids of the stored nodes;
    * PostgreSQL: no row of another graph under this graph's rows, no node or edge without a
      source row (SQL).
    """
    problems: list[str] = []
    registry = open_registry(setup)
    graph = open_graph(setup)
    try:
        nodes = list(graph.iter_nodes())
        edges = list(graph.iter_edges())
        problems += _graph_problems(graph, nodes, edges)
        problems += _registry_problems(registry, nodes, edges)
        ids = {n.id for n in nodes}
        vectors = vector_ids(setup)
        if vectors != ids:
            problems.append(f"node vectors: {len(ids - vectors)} nodes without a vector "
                            f"{sorted(ids - vectors)[:5]}, {len(vectors - ids)} vectors of no node "
                            f"{sorted(vectors - ids)[:5]}")  # fmt: skip
        if setup.store == "postgres":
            problems += _sql_problems(graph)
    finally:
        graph.close()
    return problems


def _graph_problems(graph: GraphStore, nodes: list[Any], edges: list[Any]) -> list[str]:
    problems = []
    names = {n.name for n in nodes}
    if len(names) != len(nodes):
        problems.append(f"graph: {len(nodes) - len(names)} repeated node names")
    ids = [n.id for n in nodes]
    if len(set(ids)) != len(ids) or any(i <= 0 for i in ids):
        problems.append("graph: node ids are not unique positive integers")
    by_id = graph.get_nodes_by_id(ids)
    if {i: n.name for i, n in by_id.items()} != {n.id: n.name for n in nodes}:
        problems.append("graph: get_nodes_by_id disagrees with iter_nodes")
    if graph.count_nodes() != len(nodes) or graph.count_edges() != len(edges):
        problems.append(f"graph: counts {graph.count_nodes()}/{graph.count_edges()} but {len(nodes)}/"
                        f"{len(edges)} iterated")  # fmt: skip
    for node in nodes:
        if not node.sources:
            problems.append(f"graph: node {node.name!r} has no source")
        if normalise_name(node.label) != node.name:
            problems.append(f"graph: node {node.name!r} has the label {node.label!r}")
    keys = set()
    for edge in edges:
        keys.add(edge.key)
        for end in (edge.source, edge.target):
            if end not in names:
                problems.append(f"graph: edge {edge.key} names the missing node {end!r}")
        if not edge.sources:
            problems.append(f"graph: edge {edge.key} has no source")
    if len(keys) != len(edges):
        problems.append(f"graph: {len(edges) - len(keys)} repeated edge keys")
    if {e.key for e in graph.edges_of(names)} != keys:
        problems.append("graph: edges_of(every node) differs from iter_edges")
    return problems


def _registry_problems(registry: ChunkRegistry, nodes: list[Any], edges: list[Any]) -> list[str]:
    problems = []
    pairs: list[tuple[str, Extraction]] = []
    for document in registry.documents():
        ids = registry.chunk_ids(document)
        records = registry.chunks(ids)
        for cid in ids:
            record = records.get(cid)
            if record is None:
                problems.append(f"registry: chunk {cid} of {Path(document).name} is not recorded")
                continue
            extraction = registry.cached(record.hash)
            if extraction is None:
                problems.append(f"registry: chunk {cid} of {Path(document).name} has no cached extraction")
                continue
            pairs.append((cid, extraction))
    want_nodes, want_edges = to_records(pairs)
    problems += _compare("node", {n.name: dict(n.descriptions) for n in want_nodes},
                         {n.name: dict(n.descriptions) for n in nodes})
    problems += _compare("edge", {e.key: dict(e.descriptions) for e in want_edges},
                         {e.key: dict(e.descriptions) for e in edges})
    return problems


def _compare(kind: str, want: dict[Any, dict[str, str]], have: dict[Any, dict[str, str]]) -> list[str]:
    problems = []
    extra = sorted(set(have) - set(want), key=str)
    if extra:
        problems.append(f"{len(extra)} {kind}s supported by no registered chunk, e.g. {extra[0]!r} "
                        f"from chunks {sorted(have[extra[0]])[:3]}")  # fmt: skip
    missing = sorted(set(want) - set(have), key=str)
    if missing:
        problems.append(f"{len(missing)} {kind}s of registered chunks missing, e.g. {missing[0]!r}")
    differ = sorted((k for k in set(want) & set(have) if want[k] != have[k]), key=str)
    if differ:
        k = differ[0]
        problems.append(f"{len(differ)} {kind}s with other sources than their registered chunks give, e.g. "
                        f"{k!r}: {sorted(have[k])[:3]} instead of {sorted(want[k])[:3]}")  # fmt: skip
    return problems


def _sql_problems(graph: GraphStore) -> list[str]:
    import sqlalchemy as sa

    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

    assert isinstance(graph, PostgresGraphStore)
    p = PG_PREFIX
    queries = {
        "nodes without a source row":
            f"SELECT count(*) FROM {p}_nodes n WHERE n.graph_id = :g AND NOT EXISTS "
            f"(SELECT 1 FROM {p}_node_sources s WHERE s.node_id = n.id)",
        "edges without a source row":
            f"SELECT count(*) FROM {p}_edges e WHERE e.graph_id = :g AND NOT EXISTS "
            f"(SELECT 1 FROM {p}_edge_sources s WHERE s.edge_id = e.id)",
        "edges with an end in another graph":
            f"SELECT count(*) FROM {p}_edges e JOIN {p}_nodes a ON a.id = e.source_id "
            f"JOIN {p}_nodes b ON b.id = e.target_id WHERE (e.graph_id = :g OR a.graph_id = :g OR b.graph_id = :g) "
            f"AND NOT (e.graph_id = a.graph_id AND e.graph_id = b.graph_id)",
        "node source rows of another graph's node":
            f"SELECT count(*) FROM {p}_node_sources s JOIN {p}_nodes n ON n.id = s.node_id "
            f"WHERE (s.graph_id = :g OR n.graph_id = :g) AND s.graph_id <> n.graph_id",
        "edge source rows of another graph's edge":
            f"SELECT count(*) FROM {p}_edge_sources s JOIN {p}_edges e ON e.id = s.edge_id "
            f"WHERE (s.graph_id = :g OR e.graph_id = :g) AND s.graph_id <> e.graph_id",
    }  # fmt: skip
    problems = []
    with graph.engine.connect() as conn:
        graph_id = conn.execute(sa.text(f"SELECT id FROM {p}_graphs WHERE name = :n"),
                                {"n": graph.graph_name}).scalar_one()  # fmt: skip
        for what, query in queries.items():
            count = conn.execute(sa.text(query), {"g": graph_id}).scalar_one()
            if count:
                problems.append(f"postgres: {count} {what}")
    return problems


def expected_chunks(setup: Setup, model: Model, texts: dict[str, list[bytes]], scratch: Path,
                    cache: dict[tuple[str, int], list[str]]) -> dict[str, list[tuple[str, str]]]:  # fmt: skip
    """Document path -> [(chunk id, text)] that ``model`` registers (loaded from a scratch copy)."""
    loader = loader_mng()
    found = {}
    for name, version in sorted(model.items()):
        if (name, version) not in cache:
            scratch.mkdir(parents=True, exist_ok=True)
            copy = scratch / name
            copy.write_bytes(texts[name][version])
            cache[(name, version)] = [d.page_content for d in loader.load_and_split(str(copy.resolve()))]
        path = str((setup.docs_dir / name).resolve())
        found[path] = [(chunk_id(path, i, text), text) for i, text in enumerate(cache[(name, version)])]
    return found


def registered(setup: Setup) -> dict[str, list[tuple[str, str]]]:
    """Document path -> [(chunk id, text)] as the durable registry holds them."""
    registry = open_registry(setup)
    found = {}
    for document in registry.documents():
        ids = registry.chunk_ids(document)
        records = registry.chunks(ids)
        found[document] = [(i, records[i].text if i in records else "") for i in ids]
    return found


def extraction_problems(setup: Setup) -> list[str]:
    """Cached extractions that differ from what ``NameExtractor`` gives for the chunk's text."""
    registry = open_registry(setup)
    problems = []
    for document in registry.documents():
        for record in registry.chunks(registry.chunk_ids(document)).values():
            if registry.cached(record.hash) not in (None, extract_names(record.text)):
                problems.append(f"registry: the cached extraction of chunk {record.id} is not its text's")
    return problems


# -- the worker ----------------------------------------------------------------------------------

RUN_TIMEOUT_S = 120.0


@dataclass
class Kill:
    """How a worker dies: at ``point``:``n``, else ``delay`` seconds after ``since`` (forked, ready)."""

    point: str = ""
    n: int = 0
    since: str = "ready"
    delay: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.point}:{self.n}" if self.point else f"random after {self.since}"


@dataclass
class RunResult:
    started: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    killed_at: str = ""  # the point the worker killed itself at, or "" (killed from here)
    reached: str = ""  # "idle" or "error ..." when it got there before being killed
    seconds: float = 0.0


class Worker:
    """``graph_kill_worker.py serve``: a zygote that forks one worker per request."""

    def __init__(self, log: Path) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        self._log = log.open("w")
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.graphrag.graph_kill_worker", "serve"],
                                      cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                      text=True, env=env)  # fmt: skip
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put("eof")

    def run(self, request: dict[str, Any], kill: Kill) -> RunResult:
        """Send one request; kill its worker as ``kill`` says; return what it reported."""
        assert self._proc.stdin is not None
        env = {"MXRAG_KILL_AT": f"{kill.point}:{kill.n}"} if kill.point else {}
        self._proc.stdin.write(json.dumps({**request, "env": env}) + "\n")
        self._proc.stdin.flush()
        result = RunResult()
        begin = time.monotonic()
        deadline = begin + RUN_TIMEOUT_S
        pid = 0
        kill_time = float("inf")  # when to kill the child (once its pid is known)
        sent = False
        status: int | None = None
        while status is None:
            now = time.monotonic()
            if now >= deadline:
                raise AssertionError(f"the worker did not end within {RUN_TIMEOUT_S} s: {result}")
            if pid and not sent and now >= kill_time:
                os.kill(pid, signal.SIGKILL)  # the child never exits by itself: the pid is still its
                sent = True
            wake = deadline if sent or not pid else min(deadline, kill_time)
            try:
                line = self._lines.get(timeout=max(0.0, wake - now))
            except queue.Empty:
                continue
            word, _, rest = line.partition(" ")
            if word == "eof":
                raise AssertionError(f"the worker zygote died (rc {self._proc.poll()}); see {self._log.name}")
            if word == "forked":
                pid = int(rest)
                if not kill.point and kill.since == "forked":
                    kill_time = time.monotonic() + kill.delay
            elif word == "ready" and not kill.point and kill.since == "ready":
                kill_time = time.monotonic() + kill.delay
            elif word == "start":
                result.started.append(int(rest))
            elif word == "done":
                result.done.append(int(rest))
            elif word == "kill":
                result.killed_at = rest
            elif word in ("idle", "error"):
                result.reached = line
                kill_time = time.monotonic()
            elif word == "exited":
                status = int(rest)
        result.seconds = time.monotonic() - begin
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (status, result)
        return result

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(30)
        self._log.close()


def child_url(url: str, application: str) -> str:
    """``url`` naming its sessions ``application`` (to wait for them to end once killed)."""
    return f"{url}{'&' if '?' in url else '?'}application_name={application}"


def wait_sessions_gone(url: str, application: str) -> None:
    """Until PostgreSQL has ended the killed worker's sessions (its last transaction settled)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        for _ in range(300):
            with engine.connect() as conn:
                count = conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :a"),
                                     {"a": application}).scalar_one()  # fmt: skip
            if not count:
                return
            time.sleep(0.05)
        raise AssertionError(f"PostgreSQL still runs {count} sessions of the killed worker")
    finally:
        engine.dispose()
