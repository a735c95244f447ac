"""The knowledge-base kill harness: a child process uploads, replaces and deletes real text files
while it is SIGKILLed, at random moments or at instrumented points; the parent checks the stores.

The operations are a deterministic sequence (``operations``): ``put`` writes version ``v`` of file
slot ``i`` and uploads it with ``force=True`` (an add, or a replace of the previous version);
``delete`` removes the slot's document. The child appends ``done <n>`` to a journal after each
finished operation, so the parent knows which operations completed and which one was cut.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mx_rag.document import LoaderMng
from mx_rag.knowledge import KnowledgeDB, delete_files, upload_files
from mx_rag.storage.vectorstore import faiss_npu
from tests.knowledge.conftest import Stores, open_stores

TEXT = Path(__file__).resolve().parents[1] / "data" / "docs" / "norwich-city.txt"
SLOTS = 6
MARKER = re.compile(r"\[d(\d+)v(\d+)\]")
# (object, method) pairs the child can be killed around, before or after the nth call
POINTS = [
    ("chunk_store", "add"), ("vector_store", "add"), ("knowledge_store", "commit_documents"),
    ("knowledge_store", "stage_document"), ("vector_store", "delete"), ("chunk_store", "delete"),
    ("knowledge_store", "remove_document"), ("knowledge_store", "clear_replaces"), ("index", "write_atomic"),
]


@dataclass(frozen=True)
class Op:
    kind: str  # "put" or "delete"
    slot: int
    version: int = 0


def operations(seed: int, count: int) -> list[Op]:
    rng = random.Random(seed)
    versions = [0] * SLOTS
    present = [False] * SLOTS
    ops = []
    for _ in range(count):
        slot = rng.randrange(SLOTS)
        if present[slot] and rng.random() < 0.25:
            ops.append(Op("delete", slot))
            present[slot] = False
        else:
            versions[slot] += 1
            ops.append(Op("put", slot, versions[slot]))
            present[slot] = True
    return ops


def content(slot: int, version: int) -> str:
    lines = [line.strip()[:150] for line in TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = (slot * 37 + version * 11) % (len(lines) - 40)
    return "\n".join(f"[d{slot}v{version}] {line}" for line in lines[start : start + 24 + version % 9]) + "\n"


@functools.cache
def loader() -> LoaderMng:
    """One loader manager per process (building one imports every loader: about 1.5 s)."""
    return LoaderMng.with_defaults(chunk_size=300, chunk_overlap=0)


loader()  # built in the fork server, so each child starts with it


def slot_path(stores: Stores, slot: int) -> Path:
    return stores.docs / f"slot{slot}.txt"


def apply(kb: KnowledgeDB, stores: Stores, mng: LoaderMng, op: Op) -> None:
    path = slot_path(stores, op.slot)
    if op.kind == "put":
        path.write_text(content(op.slot, op.version), encoding="utf-8")
        failed = upload_files(kb, [str(path)], mng, stores.embed, force=True)
        assert failed == [], failed
    else:
        delete_files(kb, [str(path)])


def model(ops: list[Op]) -> dict[int, int]:
    """Slot -> version present after ``ops``."""
    state: dict[int, int] = {}
    for op in ops:
        if op.kind == "put":
            state[op.slot] = op.version
        else:
            state.pop(op.slot, None)
    return state


def stored(kb: KnowledgeDB, stores: Stores) -> dict[int, list[str]]:
    """Slot -> the chunk texts of its document, as stored."""
    out = {}
    for row in kb.get_all_documents():
        slot = int(Path(row.document_file_path).stem.removeprefix("slot"))
        out[slot] = [c.page_content for c in stores.chunk_store.search_by_document_id(row.document_id)]
    return out


# -- the child ---------------------------------------------------------------------------------


def _journal(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _instrument(kb: KnowledgeDB, point: tuple[str, str, str, int]) -> None:
    """Make the nth call of one store method kill this process before or after it runs."""
    owner_name, method, when, nth = point
    calls = [0]

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            hit = calls[0] == nth
            if hit and when == "before":
                _die()
            result = real(*args, **kwargs)
            if hit:
                _die()
            return result

        return wrapper

    if owner_name == "index":  # between the sidecar and the index file of one save, or after it
        faiss_npu.write_atomic = wrap(faiss_npu.write_atomic)  # type: ignore[attr-defined]
        return
    owner = getattr(kb, owner_name)
    setattr(owner, method, wrap(getattr(owner, method)))


def child(root: str, ops: list[Op], first: int, point: tuple[str, str, str, int] | None) -> None:
    """Run ``ops[first:]`` on the folder, journaling each finished one (killed at some point)."""
    stores = open_stores(Path(root))
    kb = stores.open()
    mng = loader()
    journal = Path(root) / "journal"
    if point is not None:
        _instrument(kb, point)
    _journal(journal, "ready")
    for n in range(first, len(ops)):
        apply(kb, stores, mng, ops[n])
        _journal(journal, f"done {n}")
    _journal(journal, "finished")


def read_journal(root: Path) -> tuple[bool, int | None, bool]:
    """(ready, last finished operation, ran to the end)."""
    path = root / "journal"
    lines = path.read_text().split() if path.exists() else []
    done = [int(n) for kind, n in itertools.pairwise(lines) if kind == "done"]
    return "ready" in lines, (max(done) if done else None), "finished" in lines
