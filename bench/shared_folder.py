# SPDX-License-Identifier: Apache-2.0
"""What sharing a knowledge-base folder between processes costs, per query and per upload.

Since several processes may share one folder, every ``MindFAISS`` read first compares the index
file's ``stat`` with the one it loaded, and every ``KnowledgeDB`` write holds ``<registry>.lock``
(and the index's ``<file>.lock``) and first looks for work a crashed process left. This script
measures those costs next to the plain library in the same run:

* ``query``: ``MindFAISS.search`` (k=5, FLAT, 384-d, ``--vectors`` vectors) on a store saved to a
  file (the stat check on every call) and on an in-memory store (no check), and bare faiss
  ``index.search`` on the same index object; ``check_us`` is file minus memory (noisy: it is a
  difference of two searches), ``stat_check_alone_us`` the check itself timed 10,000 times.
* ``upload``: ``KnowledgeDB.add_file`` of one 20-chunk document (embeddings precomputed, so the
  stores are what is timed) next to LangChain's ``FAISS.add_embeddings`` + ``save_local`` (how a
  LangChain user persists an index) on the same vectors; and the lock alone (``ProcessLock``
  acquire + release) and the crash-leftover look-up alone (three registry queries).

The systems take turns call by call; each figure is the median of ``--rounds`` rounds of the
per-round median. Output: JSON lines (the environment first).

Run::

    .venv/bin/python bench/shared_folder.py            # about 1 minute
    .venv/bin/python bench/shared_folder.py --quick    # seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit, environment, timed

BENCH = "shared_folder"
DIM = 384
CHUNKS = 20


def timed_us(fn: Callable[[], Any], calls: int) -> list[float]:
    return [timed(fn)[0] * 1e6 for _ in range(calls)]


def take_turns(systems: dict[str, Callable[[], Any]], calls: int, rounds: int) -> list[dict[str, list[float]]]:
    """Per round, each system's microseconds per call; the systems take turns call by call."""
    results = []
    for _ in range(rounds):
        per: dict[str, list[float]] = {name: [] for name in systems}
        for _ in range(calls):
            for name, fn in systems.items():
                per[name].append(timed(fn)[0] * 1e6)
        results.append(per)
    return results


def median_of_rounds(rounds: list[dict[str, list[float]]]) -> dict[str, float]:
    return {name: round(statistics.median(statistics.median(r[name]) for r in rounds), 2) for name in rounds[0]}


def bench_query(work: Path, vectors: int, calls: int, rounds: int) -> dict[str, Any]:
    from mx_rag.storage.vectorstore import MindFAISS

    rng = np.random.default_rng(0)
    data = rng.standard_normal((vectors, DIM)).astype(np.float32)
    ids = list(range(vectors))
    on_file = MindFAISS(x_dim=DIM, load_local_index=str(work / "q.index"))
    in_memory = MindFAISS(x_dim=DIM, load_local_index=None)
    for store in (on_file, in_memory):
        store.add(ids, data, document_id=1)
    bare = in_memory._index.index  # the faiss object inside the in-memory store
    query = data[:1] + 0.1
    systems = {
        "file_us": lambda: on_file.search(query, k=5),
        "memory_us": lambda: in_memory.search(query, k=5),
        "faiss_us": lambda: bare.search(query, 5),
    }
    figures = median_of_rounds(take_turns(systems, calls, rounds))
    figures["check_us"] = round(figures["file_us"] - figures["memory_us"], 2)
    from mx_rag.storage.vectorstore.faiss_npu import _signature

    index_file = work / "q.index"
    figures["stat_check_alone_us"] = round(statistics.median(timed_us(lambda: _signature(index_file), 10_000)), 3)
    return {"bench": BENCH, "scenario": "query", "vectors": vectors, "k": 5, **figures}


def bench_upload(work: Path, uploads: int, rounds: int) -> dict[str, Any]:
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS
    from langchain_core.embeddings import Embeddings

    from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS
    from mx_rag.utils.process_lock import ProcessLock

    rng = np.random.default_rng(1)
    texts = [f"chunk {j} of a document about shared folders " * 4 for j in range(CHUNKS)]
    matrix = rng.standard_normal((CHUNKS, DIM)).astype(np.float32)
    docs = work / "docs"
    docs.mkdir()
    store = KnowledgeStore(db_path=str(work / "sql.db"))
    store.add_knowledge("bench", "benchuser")
    kb = KnowledgeDB(knowledge_store=store, chunk_store=SQLiteDocstore(db_path=str(work / "sql.db")),
                     vector_store=MindFAISS(x_dim=DIM, load_local_index=str(work / "faiss.index")),
                     knowledge_name="bench", white_paths=[str(docs)], user_id="benchuser")

    class Fixed(Embeddings):  # LangChain's FAISS needs an Embeddings object; it is not called here
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("not used")

        def embed_query(self, text: str) -> list[float]:
            raise AssertionError("not used")

    peer = FAISS(embedding_function=Fixed(), index=__import__("faiss").IndexFlatIP(DIM),
                 docstore=InMemoryDocstore(), index_to_docstore_id={})
    pairs = list(zip(texts, matrix.tolist(), strict=True))
    counter = [0]

    def ours() -> None:
        counter[0] += 1
        path = docs / f"d{counter[0]}.txt"
        path.write_text("x")
        kb.add_file(path, texts, lambda _texts: matrix)

    def langchain() -> None:
        peer.add_embeddings(pairs)
        peer.save_local(str(work / "lc"))

    lock = ProcessLock(work / "bench.lock")

    def lock_only() -> None:
        with lock:
            pass

    systems = {"mxrag_add_file_us": ours, "langchain_add_save_us": langchain, "lock_us": lock_only,
               "leftover_check_us": lambda: kb._finish_interrupted()}
    figures = median_of_rounds(take_turns(systems, uploads, rounds))
    share = (figures["lock_us"] * 2 + figures["leftover_check_us"]) / figures["mxrag_add_file_us"]
    return {"bench": BENCH, "scenario": "upload", "chunks": CHUNKS, **figures,
            "sharing_share_of_upload": round(share, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--uploads", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10k vectors, few calls")
    args = parser.parse_args()
    if args.quick:
        args.vectors, args.calls, args.uploads, args.rounds = 10_000, 50, 10, 1
    emit(environment(BENCH, mxrag=version("mxrag"), faiss=version("faiss-cpu"), filelock=version("filelock"),
                     cpu_count=os.cpu_count(), platform=platform.platform()))
    __import__("faiss").omp_set_num_threads(1)  # single-query searches: threads only add barrier waits
    with tempfile.TemporaryDirectory() as tmp:
        emit(bench_query(Path(tmp), args.vectors, args.calls, args.rounds))
        upload_dir = Path(tmp) / "upload"
        upload_dir.mkdir()
        emit(bench_upload(upload_dir, args.uploads, args.rounds))


if __name__ == "__main__":
    main()
