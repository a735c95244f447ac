# SPDX-License-Identifier: Apache-2.0
"""``kill -9`` during Graph RAG builds and deletions: the pipeline reopens consistent.

``graph_kill_worker.py`` builds documents into a graph, deletes and re-adds them, following a
plan, and is killed with ``SIGKILL``: at a random moment (from its start, reopening included, or
once it is ready), or by itself at an instrumented point (``MXRAG_KILL_AT=<point>:<n>``, see
``graph_kill_worker.POINTS``). Sometimes a second worker is killed while it reopens what the
first left. Then this process reopens the pipeline and checks:

* ``kill_harness.check_consistency``: the durable state agrees with itself;
* every operation the worker reported done is fully there, and the interrupted one is either
  fully there or not at all (the registered documents and their chunks are those of the plan's
  model before or after it; the graph is what their extractions give);
* the interrupted operation, run again, completes and leaves the state of the model after it.

A run with problems starts again from an empty graph; all problems are reported at the end.

Each store gets half of ``MXRAG_KILLS`` kills (default 20 in all); ``MXRAG_KILL_SEED`` picks the
plans and kill points (default 0); ``MXRAG_KILL_REPORT=<file>`` writes the figures as JSON. For a
long run::

    url=$(scripts/ensure_postgres.sh) MXRAG_TEST_POSTGRES_URL=$url MXRAG_KILLS=1000 \\
        MXRAG_KILL_REPORT=/tmp/kills.json .venv/bin/pytest tests/graphrag/test_graph_kill.py -s
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.graphrag.graph_kill_worker import POINTS
from tests.graphrag.kill_harness import (
    Kill,
    Model,
    RunResult,
    Setup,
    Worker,
    apply_op,
    check_consistency,
    child_url,
    corpus,
    expected_chunks,
    extraction_problems,
    loader_mng,
    make_plan,
    open_pipeline,
    perform,
    registered,
    reset,
    wait_sessions_gone,
)

KILLS = int(os.environ.get("MXRAG_KILLS", "20"))
SEED = int(os.environ.get("MXRAG_KILL_SEED", "0"))
REPORT = os.environ.get("MXRAG_KILL_REPORT", "")
PLAN_LENGTH = 8
POINT_SHARE = 0.55  # kills at an instrumented point; the rest at a random moment
EARLY_SHARE = 0.2  # random kills timed from the fork (during the reopening) rather than from "ready"
RECOVERY_SHARE = 0.2  # after a kill, also kill the next worker while it reopens
READY_DELAY_S = 0.6  # random kills come within this long after "ready" (a plan takes about 0.5 s)
EARLY_DELAY_S = 0.15
# the largest n of <point>:<n> worth trying in a plan of PLAN_LENGTH operations (more: not reached)
MAX_HITS = {"extract": 6, "registry.save": 12, "registry.saved": 12, "file.replace": 30}


@dataclass
class Stats:
    kills: Counter[str] = field(default_factory=Counter)  # by store
    points: Counter[str] = field(default_factory=Counter)  # by kill label
    killed_at: Counter[str] = field(default_factory=Counter)  # by point reached ("random": none)
    not_reached: Counter[str] = field(default_factory=Counter)
    operations_done: int = 0
    reruns: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"seed": SEED, "kills": dict(self.kills), "total_kills": sum(self.kills.values()),
                "by_point": dict(sorted(self.killed_at.items())), "by_label": dict(sorted(self.points.items())),
                "point_not_reached": dict(self.not_reached),
                "operations_done": self.operations_done, "reruns": self.reruns,
                "inconsistencies": len(self.problems), "problems": self.problems[:200], "seconds": self.seconds}


def choose_kill(rng: random.Random, order: Iterator[str], recovery: bool = False) -> Kill:
    if rng.random() < POINT_SHARE:
        point = next(order)
        top = 3 if recovery else MAX_HITS.get(point, PLAN_LENGTH)
        return Kill(point, rng.randint(1, top))
    if recovery or rng.random() < EARLY_SHARE:
        return Kill(since="forked", delay=rng.uniform(0, EARLY_DELAY_S))
    return Kill(since="ready", delay=rng.uniform(0, READY_DELAY_S))


def cycle_points(rng: random.Random) -> Iterator[str]:
    while True:
        points = sorted(POINTS)
        rng.shuffle(points)
        yield from points


def kill_loop(setup: Setup, kills: int, rng: random.Random, worker: Worker, stats: Stats) -> None:
    """Kill ``kills`` workers on ``setup``, checking after each (or after each two)."""
    texts = corpus()
    loader = loader_mng()
    chunk_cache: dict[tuple[str, int], list[str]] = {}
    scratch = setup.work_dir.parent / "scratch"
    order = cycle_points(rng)
    application = f"mxrag_kill_{uuid.uuid4().hex[:8]}"
    url = child_url(setup.postgres_url, application) if setup.postgres_url else None

    def expect(model: Model) -> dict[str, list[tuple[str, str]]]:
        return expected_chunks(setup, model, texts, scratch, chunk_cache)

    def one_run(plan: list[dict[str, Any]], kill: Kill) -> RunResult:
        request = {"setup": setup.to_json(), "plan": plan, "postgres_url": url}
        result = worker.run(request, kill)
        stats.kills[setup.store] += 1
        stats.points[kill.label] += 1
        if kill.point and not result.killed_at:
            stats.not_reached[kill.label] += 1
        point = result.killed_at.rpartition(":")[0]
        stats.killed_at[f"{setup.store} {point or ('idle' if result.reached else 'random')}"] += 1
        if url:
            wait_sessions_gone(setup.postgres_url or "", application)
        return result

    model: Model = {}
    index = 0
    killed = 0
    while killed < kills:
        plan = make_plan(rng, model, index, PLAN_LENGTH, texts)
        kill = choose_kill(rng, order)
        result = one_run(plan, kill)
        killed += 1
        assert not result.reached.startswith("error"), f"{setup.store}: the worker failed: {result}"
        stats.operations_done += len(result.done)
        before = model
        for op in plan:
            if op["index"] in result.done:
                before = apply_op(before, op)
        assert result.done == [op["index"] for op in plan[: len(result.done)]], result
        pending = plan[len(result.done)] if len(result.done) < len(plan) else None
        interrupted = pending if pending is not None and pending["index"] in result.started else None
        after = before if interrupted is None else apply_op(before, interrupted)
        where = f"{setup.store} kill {killed} ({kill.label}, after op {index + len(result.done) - 1})"
        if interrupted is not None and killed < kills and rng.random() < RECOVERY_SHARE:
            second = choose_kill(rng, order, recovery=True)
            one_run([], second)
            killed += 1
            where += f" + reopening killed ({second.label})"

        problems: list[str] = []
        model = before if pending is None else apply_op(before, pending)
        try:
            pipeline = open_pipeline(setup)  # finishes what the kill interrupted
            try:
                problems += check_consistency(setup) + extraction_problems(setup)
                state = registered(setup)
                if state not in (expect(before), expect(after)):
                    problems.append(f"registered documents are neither those before nor after {interrupted}: "
                                    f"{_summary(state)} vs before {_summary(expect(before))}, after "
                                    f"{_summary(expect(after))}")  # fmt: skip
                if pending is not None:
                    perform(pipeline, pending, setup.docs_dir, texts, loader)
                    stats.reruns += 1
            finally:
                pipeline.graph.close()
            again = check_consistency(setup)
            problems += [f"after running {pending} again: {p}" for p in again]
            if not again and registered(setup) != expect(model):
                problems.append(f"after running {pending} again the documents are "
                                f"{_summary(registered(setup))}, not {_summary(expect(model))}")  # fmt: skip
        except Exception as exc:  # a store that cannot be reopened, an operation that fails again
            problems.append(f"reopening or running {pending} again raised {type(exc).__name__}: {exc}")
        if problems:
            stats.problems += [f"{where}: {p}" for p in problems]
            reset(setup)
            model = {}
        index = plan[-1]["index"] + 1 if pending is None else pending["index"] + 1


def _summary(state: dict[str, list[tuple[str, str]]]) -> dict[str, int]:
    return {Path(d).name: len(chunks) for d, chunks in sorted(state.items())}


@pytest.fixture(scope="module")
def stats() -> Iterator[Stats]:
    found = Stats()
    yield found
    print("\ngraph kill harness:", json.dumps(found.as_json(), indent=1))
    if REPORT:
        Path(REPORT).write_text(json.dumps(found.as_json(), indent=1), encoding="utf-8")


@pytest.mark.parametrize("store", ["networkx", "postgres"])
def test_kill_during_builds_and_deletes(store: str, tmp_path: Path, request: pytest.FixtureRequest,
                                        stats: Stats) -> None:  # fmt: skip
    url = request.getfixturevalue("postgres_url") if store == "postgres" else None
    graph_name = f"kill_{uuid.uuid4().hex[:10]}"
    (tmp_path / "work").mkdir()
    (tmp_path / "docs").mkdir()
    setup = Setup(store, tmp_path / "work", tmp_path / "docs", url, graph_name)
    rng = random.Random(f"{SEED}-{store}")
    worker = Worker(tmp_path / "worker.log")
    begin = time.monotonic()
    problems_before = len(stats.problems)
    try:
        kill_loop(setup, max(1, KILLS // 2), rng, worker, stats)
    finally:
        worker.close()
        stats.seconds += time.monotonic() - begin
        if url:
            reset(setup)
    assert stats.kills[store] >= max(1, KILLS // 2)
    found = stats.problems[problems_before:]
    assert not found, f"{len(found)} inconsistencies:\n" + "\n".join(found[:30])
