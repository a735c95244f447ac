# SPDX-License-Identifier: Apache-2.0
"""The process ``test_graph_kill.py`` kills: builds, incremental builds and deletions of a graph.

A request (JSON) names the graph (``kill_harness.Setup``) and a plan of operations; the worker
opens the pipeline (which finishes what an earlier kill interrupted), prints ``ready``, then for
each operation ``start <index>`` and, once it returned, ``done <index>``; at the end ``idle``, and
it waits to be killed. Each line is one unbuffered write to stdout.

``MXRAG_KILL_AT=<point>:<n>`` makes it kill itself (``SIGKILL``) at the n-th time it reaches
``point`` (counted from the start of the process, the reopening included), after printing
``kill <point>:<n>``. The points (``POINTS``) wrap methods of the stores inside this process
only; the library has no test hooks.

Two ways to run it (from the repository root)::

    python -m tests.graphrag.graph_kill_worker serve        # requests on stdin, one a line
    MXRAG_KILL_AT=graph.before_commit:2 python -m tests.graphrag.graph_kill_worker run request.json

``serve`` imports everything once and forks a child per request (a fresh interpreter costs a few
seconds of imports per kill); it prints ``forked <pid>`` and, when the child died,
``exited <wait status>``. ``run`` does one request in this process and exits after the plan.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import faiss  # noqa: F401  (imported before forking, so a child does not pay for it)

from mx_rag.graphrag import Extraction
from mx_rag.graphrag.networkx_store import NetworkxGraphStore
from mx_rag.graphrag.pg_graph_store import PostgresGraphStore
from mx_rag.graphrag.registry import ChunkRegistry
from mx_rag.storage.vectorstore import MindFAISS
from tests.graphrag.kill_harness import NameExtractor, Setup, corpus, loader_mng, open_pipeline, perform

KILL_ENV = "MXRAG_KILL_AT"
IDLE_LIMIT_S = 900.0  # a child nobody killed exits after this long

# point -> what the process is about to do (or has just done) when it dies there
POINTS = {
    "extract": "an extraction batch returned (before its results are cached)",
    "registry.save": "about to save the chunk registry",
    "registry.saved": "saved the chunk registry",
    "graph.remove_sources": "removed chunks' sources inside the graph batch (not committed)",
    "graph.upsert_nodes": "wrote nodes inside the graph batch (not committed)",
    "graph.upsert_edges": "wrote edges inside the graph batch (not committed)",
    "graph.before_commit": "the graph batch's body is done; its commit (or file save) is next",
    "graph.after_commit": "the graph batch committed",
    "vectors.save": "about to save the node vectors",
    "vectors.saved": "saved the node vectors",
    "file.replace": "a temp file is written and fsynced; the rename onto the real file is next",
}


def emit(line: str) -> None:
    os.write(1, f"{line}\n".encode())


class KillPoints:
    """Counts the points reached; kills this process at the chosen one."""

    def __init__(self, spec: str) -> None:
        self.point, self.at = "", 0
        if spec:
            point, _, count = spec.rpartition(":")
            if point not in POINTS or not count.isdigit() or int(count) < 1:
                raise SystemExit(f"{KILL_ENV} must be <point>:<n> with a point of {sorted(POINTS)}, got {spec!r}")
            self.point, self.at = point, int(count)
        self.counts: dict[str, int] = {}

    def hit(self, point: str) -> None:
        self.counts[point] = self.counts.get(point, 0) + 1
        if point == self.point and self.counts[point] == self.at:
            emit(f"kill {point}:{self.at}")
            os.kill(os.getpid(), signal.SIGKILL)


def _after(method: Callable[..., Any], point: str, points: KillPoints) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        points.hit(point)
        return result

    return wrapper


def _around(method: Callable[..., Any], before: str, after: str, points: KillPoints) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        points.hit(before)
        result = method(*args, **kwargs)
        points.hit(after)
        return result

    return wrapper


def _batch(method: Callable[..., Any], points: KillPoints) -> Callable[..., Any]:
    depth = [0]

    @contextlib.contextmanager
    def batch(self: Any) -> Iterator[None]:
        depth[0] += 1
        try:
            with method(self):
                yield
                if depth[0] == 1:
                    points.hit("graph.before_commit")
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            points.hit("graph.after_commit")

    return batch


def install(points: KillPoints) -> None:
    """Wrap the write methods of the stores (in this process only) so that they reach the points."""
    for store in (NetworkxGraphStore, PostgresGraphStore):
        for name in ("remove_sources", "upsert_nodes", "upsert_edges"):
            setattr(store, name, _after(getattr(store, name), f"graph.{name}", points))
        store.batch = _batch(store.batch, points)  # type: ignore[method-assign]
    ChunkRegistry.save = _around(ChunkRegistry.save, "registry.save", "registry.saved", points)  # type: ignore[method-assign]
    MindFAISS.save_local = _around(MindFAISS.save_local, "vectors.save", "vectors.saved", points)  # type: ignore[method-assign]
    replace = os.replace

    def replacing(src: Any, dst: Any, **kwargs: Any) -> None:
        points.hit("file.replace")
        replace(src, dst, **kwargs)

    os.replace = replacing


class KillingExtractor(NameExtractor):
    def __init__(self, points: KillPoints) -> None:
        self._points = points

    def extract(self, chunks: Any) -> list[Extraction]:
        found = super().extract(chunks)
        self._points.hit("extract")
        return found


def work(request: dict[str, Any], texts: dict[str, list[bytes]]) -> None:
    """Open the pipeline and run the plan of ``request``, printing progress."""
    os.environ.update(request.get("env", {}))
    points = KillPoints(os.environ.get(KILL_ENV, ""))
    install(points)
    setup = Setup.from_json(request["setup"])
    pipeline = open_pipeline(setup, request.get("postgres_url"), KillingExtractor(points))
    emit("ready")
    loader = loader_mng()
    for op in request["plan"]:
        emit(f"start {op['index']}")
        perform(pipeline, op, setup.docs_dir, texts, loader)
        emit(f"done {op['index']}")
    emit("idle")


def child(request: dict[str, Any], texts: dict[str, list[bytes]]) -> None:
    try:
        work(request, texts)
    except BaseException as exc:
        traceback.print_exc()
        emit(f"error {type(exc).__name__}: {str(exc)[:300]!r}")
    deadline = time.monotonic() + IDLE_LIMIT_S
    while time.monotonic() < deadline:  # wait to be killed: the parent kills a pid it knows is ours
        time.sleep(1.0)
    os._exit(0)


def warm(texts: dict[str, list[bytes]]) -> None:
    """Import what a child would import on first use (the loaders, the database driver)."""
    import psycopg  # noqa: F401

    loader = loader_mng()
    with tempfile.TemporaryDirectory() as folder:
        for name, versions in texts.items():
            (Path(folder) / name).write_bytes(versions[0])
            loader.load_and_split(str(Path(folder) / name))


def serve() -> None:
    texts = corpus()
    warm(texts)
    while line := sys.stdin.readline():
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(request, texts)
        emit(f"forked {pid}")
        _, status = os.waitpid(pid, 0)
        emit(f"exited {status}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"]:
        serve()
    elif len(argv) == 2 and argv[0] == "run":
        work(json.loads(Path(argv[1]).read_text(encoding="utf-8")), corpus())
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
