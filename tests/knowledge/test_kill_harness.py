"""SIGKILL a process that uploads, replaces and deletes real files; the stores must stay whole.

After each kill the parent reopens the folder (which repairs it) and checks: the three stores
agree, every finished operation is there, each document is exactly one whole version (the one
before the cut operation, or the one it was writing), and the cut operation re-runs cleanly.
``MXRAG_KILLS=N`` sets the number of kills (40 by default); the figures of long runs are in
docs/reliability.md.
"""

import json
import multiprocessing
import os
import random
import time
from pathlib import Path

import pytest

from tests.knowledge import kill_harness as harness
from tests.knowledge.conftest import USER, open_stores

KILLS = int(os.environ.get("MXRAG_KILLS", "40"))
OPS_PER_CHILD = 8


def _expected_chunks(tmp: Path, slot: int, version: int, cache: dict[tuple[int, int], list[str]]) -> list[str]:
    if (slot, version) not in cache:
        path = tmp / f"expected-{slot}-{version}.txt"
        path.write_text(harness.content(slot, version), encoding="utf-8")
        cache[slot, version] = [d.page_content for d in harness.loader().load_and_split(str(path))]
    return cache[slot, version]


def _version_of(chunks: list[str]) -> int:
    versions = {int(v) for text in chunks for _, v in harness.MARKER.findall(text)}
    assert len(versions) == 1, f"a document mixes versions {versions}"
    return versions.pop()


@pytest.mark.slow
def test_kills_leave_every_document_old_or_new_and_the_cut_call_reruns(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    setup = open_stores(root)
    setup.knowledge_store.add_knowledge("test", USER)
    ops = harness.operations(seed=11, count=KILLS * OPS_PER_CHILD + 10)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.knowledge.kill_harness", "mx_rag.storage.vectorstore._faiss_index"])
    rng = random.Random(5)
    expected: dict[tuple[int, int], list[str]] = {}
    first, kills, figures = 0, 0, {"random": 0, "instrumented": 0, "ran_out": 0, "cut_ops": {"put": 0, "delete": 0}}
    for round_ in range(KILLS):
        (root / "journal").unlink(missing_ok=True)
        point = None
        if round_ % 2:  # every other round at an instrumented point, else at a random moment
            owner, method = harness.POINTS[(round_ // 2) % len(harness.POINTS)]
            point = (owner, method, rng.choice(["before", "after"]), rng.randint(1, 3))
        proc = context.Process(target=harness.child, args=(str(root), ops[: first + OPS_PER_CHILD], first, point))
        proc.start()
        deadline = time.monotonic() + 60
        while not harness.read_journal(root)[0] and proc.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if point is None:  # a random moment of a random operation, however fast the machine is
            target = first + rng.randrange(OPS_PER_CHILD) - 1
            while proc.is_alive() and time.monotonic() < deadline:
                last = harness.read_journal(root)[1]
                if target < first or (last is not None and last >= target):
                    break
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.08))
            proc.kill()
        proc.join(60)
        assert proc.exitcode is not None, "the child hung"
        ready, last, finished = harness.read_journal(root)
        assert ready, f"round {round_}: the child died before it was ready (exit code {proc.exitcode})"
        done = first - 1 if last is None else last
        if finished:
            figures["ran_out"] += 1
        else:
            assert proc.exitcode == -9, f"round {round_}: the child failed with exit code {proc.exitcode}"
            kills += 1
            figures["instrumented" if point else "random"] += 1
        before, cut = harness.model(ops[: done + 1]), (None if finished else ops[done + 1])

        stores = open_stores(root)
        kb = stores.open()  # repairs what the kill left half done
        report = kb.check()
        assert report.ok, (round_, point, report)
        assert set(stores.chunk_store.get_all_chunk_id()) == set(stores.vector_store.get_all_ids())
        after = harness.model(ops[: done + 2]) if cut else before
        for slot, chunks in harness.stored(kb, stores).items():
            version = _version_of(chunks)
            assert version in (before.get(slot), after.get(slot)), (round_, slot, version, before, after)
            assert chunks == _expected_chunks(tmp_path, slot, version, expected), (round_, slot, "not whole")
        for slot in before:  # never neither version: only the cut delete may remove a document
            if not (cut and cut.kind == "delete" and cut.slot == slot):
                assert slot in harness.stored(kb, stores), (round_, point, slot, "lost")
        if cut is not None:
            figures["cut_ops"][cut.kind] += 1  # type: ignore[index]
            harness.apply(kb, stores, harness.loader(), cut)  # the interrupted call re-runs cleanly
            assert kb.check().ok
            got = {slot: _version_of(chunks) for slot, chunks in harness.stored(kb, stores).items()}
            assert got == after, (round_, got, after)
        first = done + 2 if cut else done + 1
        stores.chunk_store.close()
    assert kills >= KILLS // 2, figures  # most rounds end in a kill, not with all their operations done
    print(json.dumps({"test": "knowledge kill harness", "kills": kills, "operations": first, **figures}))
