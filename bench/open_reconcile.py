# SPDX-License-Identifier: Apache-2.0
"""What opening a knowledge base costs, now that open compares chunk ids with vector ids.

A ``KnowledgeDB`` over ``--chunks`` chunks (documents of 100 chunks, 64-d vectors) in SQLite, with
the vectors in FAISS (a file) or in milvus-lite, is opened ``--rounds`` times; each figure is a
median in milliseconds. Beside the whole open (``open_ms``) the run times, on the same stores:
``counts_ms`` (a chunk count and a vector count: the whole check before the fix),
``reconcile_ms`` (the check open makes now, when the code has it: all ids on FAISS, counts and one
bounded query on the highest id on Milvus) and ``all_ids_ms`` (both id sets read in full, what an
unconditional comparison would cost). Run it on the code before the fix too (``PYTHONPATH`` at an
export of that commit) for the before figures. Output: JSON lines (the environment first).

Run::

    .venv/bin/python bench/open_reconcile.py            # about a minute
    .venv/bin/python bench/open_reconcile.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit, environment, timed

BENCH = "open_reconcile"
DIM = 64
PER_DOC = 100
USER = "benchuser"


def median_ms(fn: Callable[[], Any], rounds: int) -> float:
    return round(statistics.median(timed(fn)[0] * 1e3 for _ in range(rounds)), 3)


def bench_backend(work: Path, backend: str, chunks: int, rounds: int) -> dict[str, Any]:
    from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MilvusDB, MindFAISS

    db = str(work / "sql.db")
    docs = work / "docs"
    docs.mkdir()
    registry = KnowledgeStore(db_path=db)
    registry.add_knowledge("bench", USER)
    chunk_store = SQLiteDocstore(db_path=db)
    client = None
    if backend == "faiss":
        vectors: Any = MindFAISS(x_dim=DIM, load_local_index=str(work / "faiss.index"))
    else:
        from pymilvus import MilvusClient

        client = MilvusClient(str(work / "milvus.db"))
        vectors = MilvusDB.create(client=client, collection_name="bench", x_dim=DIM, metric_type="IP",
                                  index_type="FLAT")

    def open_kb() -> Any:
        return KnowledgeDB(knowledge_store=registry, chunk_store=chunk_store, vector_store=vectors,
                           knowledge_name="bench", white_paths=[str(docs)], user_id=USER)

    kb = open_kb()
    rng = np.random.default_rng(0)
    texts = [f"chunk {j} of a document about reconciling stores" for j in range(PER_DOC)]
    for d in range(chunks // PER_DOC):
        matrix = rng.standard_normal((PER_DOC, DIM)).astype(np.float32)
        path = docs / f"d{d}.txt"
        path.write_text("x")
        kb.add_file(path, texts, lambda _texts, m=matrix: m)
    assert vectors.count() == chunk_store.count() == chunks
    figures = {
        "open_ms": median_ms(open_kb, rounds),
        "counts_ms": median_ms(lambda: (vectors.count(), chunk_store.count()), rounds),
        "all_ids_ms": median_ms(lambda: (set(chunk_store.get_all_chunk_id()), set(vectors.get_all_ids())), rounds),
    }
    if hasattr(kb, "_differing_ids"):
        figures["reconcile_ms"] = median_ms(kb._differing_ids, rounds)
    if client is not None:
        client.close()
    return {"bench": BENCH, "backend": backend, "chunks": chunks, "rounds": rounds, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--backends", default="faiss,milvus-lite")
    parser.add_argument("--quick", action="store_true", help="2,000 chunks, 3 rounds")
    args = parser.parse_args()
    chunks, rounds = (2_000, 3) if args.quick else (args.chunks, args.rounds)
    import mx_rag

    emit(environment(BENCH, mx_rag_path=mx_rag.__file__))
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            emit(bench_backend(Path(tmp), backend, chunks, rounds))


if __name__ == "__main__":
    main()
