# SPDX-License-Identifier: Apache-2.0
"""The long run of docs/reliability.md: ``MXRAG_RAY_KILLS=N`` rounds, each changing every file, then
killing, in turn, the embedding actor, the driver or the worker node (then replaced) mid-run, then
checking what is visible (each ready document is one whole version) and, after a rerun where the
driver was killed, that the stores are exact. Skipped in CI.

    MXRAG_RAY_KILLS=20 MXRAG_TEST_POSTGRES_URL=$(cat /tmp/pg.url) pytest -q tests/distributed/test_ray_kill_loop.py -s

``MXRAG_RAY_KILLS_UNTIL`` (an ISO 8601 time, UTC unless it names a zone, e.g. ``2026-12-07T15:08``)
ends the loop cleanly before a round that might not finish by then (the longest round so far, at
least ``LONGEST_ROUND_S``, is kept free): the test passes with the rounds done, and its last line
says how many of each kind were made.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from mx_rag.app.service import KnowledgeService
from mx_rag.app.users import Principal
from tests.distributed.conftest import Stack
from tests.distributed.test_ray_ingest import (
    KB,
    assert_exact,
    corpus,
    expected,
    kill_actor_mid_run,
    kill_driver_mid_run,
    kill_node_mid_run,
    ready_documents_complete,
    run,
    settings,
    stored,
)

ROUNDS = int(os.environ.get("MXRAG_RAY_KILLS", "0") or 0)
LONGEST_ROUND_S = 150.0  # the longest round seen on the 2 shared cores here


def deadline() -> float | None:
    """``MXRAG_RAY_KILLS_UNTIL`` as a Unix time, or None."""
    until = os.environ.get("MXRAG_RAY_KILLS_UNTIL", "").strip()
    if not until:
        return None
    moment = datetime.fromisoformat(until)
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


@pytest.mark.slow
@pytest.mark.timeout(900 + 300 * ROUNDS)  # a round takes 35 to 150 s on the 2 shared cores here
@pytest.mark.skipif(ROUNDS < 1, reason="a long run: set MXRAG_RAY_KILLS to the number of kills")
def test_kill_loop(local_cluster: Any, stack: Stack, tmp_path: Path) -> None:
    ray_cluster = local_cluster.address
    service = KnowledgeService(settings(stack))
    service.create(Principal.local(), KB)
    paths = corpus(tmp_path / "docs", files=8)
    previous = {path: [] for path in expected(service, paths)}
    kills = {"actor": 0, "driver": 0, "node": 0}
    until, longest = deadline(), LONGEST_ROUND_S
    for turn in range(ROUNDS):
        if until is not None and time.time() + longest > until:
            break
        started = time.monotonic()
        corpus(tmp_path / "docs", files=8, paragraphs=6 + turn % 5, seed=turn + 1)  # every file changes
        want = expected(service, paths)
        rows = len(stored(service)["chunk_ids"])
        if turn % 3 == 1:
            kill_driver_mid_run(stack, paths, ray_cluster, service, rows)
            kills["driver"] += 1
            ready_documents_complete(service, want, previous)
            run(KnowledgeService(settings(stack)), paths, ray_cluster)
        elif turn % 3 == 2:
            assert not kill_node_mid_run(local_cluster, service, paths, rows).failed
            kills["node"] += 1
        else:
            assert not kill_actor_mid_run(local_cluster, service, paths, rows).failed
            kills["actor"] += 1
        assert_exact(service, want)
        previous = want
        seconds = time.monotonic() - started
        longest = max(longest, seconds)
        print(json.dumps({"turn": turn, **kills, "chunks": sum(len(v) for v in want.values()), "exact": True,
                          "seconds": round(seconds, 1), "loadavg": os.getloadavg()[0]}), flush=True)
    print(json.dumps({"rounds": sum(kills.values()), "of": ROUNDS, **kills, "all_exact": True}), flush=True)
