# SPDX-License-Identifier: Apache-2.0
"""How the cost of a question grows with the knowledge base: scoped retrievers against unscoped search.

One knowledge base in the seeds' wiring (``KnowledgeStore`` + ``SQLiteDocstore`` in one SQLite
file + ``MindFAISS`` FLAT, inner product), or over Milvus (``MilvusDocstore`` + ``MilvusDB`` in one
milvus-lite file), holds N documents of 4 chunks each (``--sizes``, documents; default 1,000,
10,000, 100,000 and 250,000 = 1M chunks). Chunks are ~40 words drawn (Zipf) from 5,000 synthetic
words; vectors are ``HashEmbedding(--dim)`` vectors (computed in numpy, the same values), so no
model time is involved. Stores are built once with the rows ``KnowledgeDB.add_prepared`` writes, a batch of
500 documents at a time (``bulk_add``), and cached under ``--cache-dir``.

Contenders per (store, size), each timed on the same 30 queries (6 words from the vocabulary,
embedded by ``HashEmbedding`` inside the retrievers), k=5, in rotating order query by query:

* ``store_search``: ``vector_store.search([vector], k)``, the store's own unscoped search (vector given);
* ``dense``: ``Retriever(...).invoke(q)``, unscoped;
* ``scoped_dense``: ``KnowledgeDB.as_retriever(...).invoke(q)``;
* ``hybrid``: ``HybridRetriever(...).invoke(q)``, unscoped (the default chain's retriever);
* ``scoped_hybrid``: ``KnowledgeDB.scoped(HybridRetriever(...)).invoke(q)``.

Output: JSON lines; one per (store, size, contender) with p50/p90 in ms and the load average, and
a ``scoped_over_unscoped`` line per (store, size) against the bar of 10 % + 1 ms.

``--index-recall N ...`` measures the approximate FAISS kinds instead: N chunk vectors of the same
corpus in ``MindFAISS`` FLAT with its quantised copy, IVF and HNSW (``INDEX_CHOICES``, or those of
``--index-kinds``); one ``index_recall`` line per kind and setting with the build time, recall@10
against exact FLAT over ``--queries`` questions (by ids and tie-aware), and the p50 search ms of
both. (On this corpus, bags of hashed words, no IVF or HNSW setting that is faster than FLAT
reaches recall@10 0.98: docs/benchmarks.md.)

``--fts5-shapes`` times the keyword side's SQL on the cached SQLite stores of ``--sizes`` instead
(``FTS5_SHAPES``: counting the matches, reading their rowids, BM25 top 20 as the store ranks,
FTS5's own ``ORDER BY rank``; each plain and with a 2 GiB ``mmap_size``; ``--detail-column`` adds a
``detail=column`` copy of the index), one ``fts5_shape`` line per shape.

``--milvus-uri URI`` runs the ``milvus`` store on a Milvus server instead of milvus-lite, wired as
``mxrag serve`` wires one (``use_milvus_server``: chunks in SQLite, vectors in ``MilvusDB`` with an
HNSW index); the PyPI package ``milvus`` 2.3.5 runs one with ``milvus-server --data DIR``
(127.0.0.1:19530).

Run::

    flock /tmp/mxrag-bench.lock python bench/query_scaling.py --sizes 1000 10000
    flock /tmp/mxrag-bench.lock python bench/query_scaling.py --stores faiss --sizes 250000
    flock /tmp/mxrag-bench.lock python bench/query_scaling.py --stores milvus --milvus-uri http://127.0.0.1:19530
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _harness import emit, environment, loadavg, memory_mb, ms, percentile, positive_int, recall_against, rotated

from mx_rag.knowledge import KnowledgeDB, KnowledgeStore
from mx_rag.knowledge._prepared import PreparedFile
from mx_rag.retrievers import HybridRetriever, Retriever
from mx_rag.testing import HashEmbedding

USER = "Default"
KB = "bench"
CHUNKS_PER_DOC = 4
WORDS_PER_CHUNK = 40
VOCABULARY = 5000
BATCH = 500
K = 5
CONTENDERS = ("store_search", "dense", "scoped_dense", "hybrid", "scoped_hybrid")


def vocabulary() -> list[str]:
    syllables = ["ka", "lo", "mi", "ta", "re", "su", "no", "vi", "pe", "da", "gu", "zo", "fe", "ri", "ba"]
    rng = np.random.default_rng(1)
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 5)))))
    return sorted(words)


def word_vectors(words: list[str], dim: int) -> np.ndarray:
    """Each word's HashEmbedding contribution (one bucket, sign +-1), as HashEmbedding computes it."""
    table = np.zeros((len(words), dim), dtype=np.float32)
    for row, word in enumerate(words):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        table[row, int.from_bytes(digest[:4], "little") % dim] = 1.0 if digest[4] & 1 else -1.0
    return table


class Corpus:
    def __init__(self, dim: int) -> None:
        self.words = vocabulary()
        self.table = word_vectors(self.words, dim)
        weights = 1.0 / np.arange(1, VOCABULARY + 1)
        self.p = weights / weights.sum()

    def chunks(self, rng: np.random.Generator, count: int) -> tuple[list[str], np.ndarray]:
        picks = rng.choice(VOCABULARY, size=(count, WORDS_PER_CHUNK), p=self.p)
        texts = [" ".join(self.words[i] for i in row) for row in picks]
        vectors = self.table[picks].sum(axis=1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return texts, np.ascontiguousarray(vectors / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def queries(self, count: int) -> list[str]:
        rng = np.random.default_rng(7)
        return [" ".join(self.words[i] for i in rng.choice(VOCABULARY // 5, size=6)) for _ in range(count)]


def open_faiss(folder: Path, dim: int, auto_save: bool) -> tuple[Any, Any, Any, Callable[[], None]]:
    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MindFAISS

    db = str(folder / "sql.db")
    registry, chunks = KnowledgeStore(db_path=db), SQLiteDocstore(db_path=db)
    vectors = MindFAISS(x_dim=dim, devs=[0], load_local_index=str(folder / "faiss.index"), auto_save=auto_save)
    return registry, chunks, vectors, vectors.save_local


def open_milvus(folder: Path, dim: int, auto_save: bool) -> tuple[Any, Any, Any, Callable[[], None]]:
    from pymilvus import MilvusClient

    from mx_rag.storage.document_store import MilvusDocstore
    from mx_rag.storage.vectorstore import MilvusDB

    client = MilvusClient(str(folder / "milvus.db"))
    registry = KnowledgeStore(db_path=str(folder / "registry.db"))
    vectors = MilvusDB.create(client=client, x_dim=dim, metric_type="IP", auto_flush=auto_save)
    return registry, MilvusDocstore(client), vectors, lambda: None


OPENERS = {"faiss": open_faiss, "milvus": open_milvus}


def use_milvus_server(uri: str, cache_dir: Path, consistency: str = "Session") -> None:
    """``--milvus-uri``: the ``milvus`` store becomes the server's own wiring (``mx_rag.app.workspace``)
    on the Milvus server at ``uri``: registry and chunks in one SQLite file (Milvus 2.3 has no BM25, so
    the keyword side stays in SQLite FTS5), vectors in ``MilvusDB`` with an HNSW index, one collection
    per size (``bench_<documents>_d<dim>``, kept on the server as the cache folder
    ``milvus_server-<documents>-d<dim>`` keeps the rest), searched with ``consistency`` as the
    server's workspace does ("Session"). A build flushes and waits until every row is indexed."""
    from pymilvus import MilvusClient

    from mx_rag.storage.document_store import SQLiteDocstore
    from mx_rag.storage.vectorstore import MilvusDB

    client = MilvusClient(uri=uri)

    def collection(folder: Path) -> str:
        return "bench_" + folder.name.split("-", 1)[1].replace("-", "_")

    for folder in cache_dir.glob("milvus_server-*"):  # another server: its builds are gone
        if not client.has_collection(collection(folder)):
            (folder / "done").unlink(missing_ok=True)

    def open_server(folder: Path, dim: int, auto_save: bool) -> tuple[Any, Any, Any, Callable[[], None]]:
        name = collection(folder)
        if not auto_save and client.has_collection(name):  # a build starts afresh
            client.drop_collection(name)
        db = str(folder / "sql.db")
        vectors = MilvusDB.create(client=client, collection_name=name, x_dim=dim, metric_type="IP",
                                  auto_flush=False, index_type="HNSW", consistency_level=consistency)
        return KnowledgeStore(db_path=db), SQLiteDocstore(db_path=db), vectors, lambda: indexed(client, name)

    OPENERS["milvus"] = open_server


def indexed(client: Any, name: str, timeout_s: float = 3600.0) -> None:
    """Flush ``name`` and wait until its vector index covers every row."""
    client.flush(name)
    deadline = time.monotonic() + timeout_s
    while True:
        info = client.describe_index(name, client.list_indexes(name, field_name="vector")[0])
        if info["state"] == "Finished" and int(info["indexed_rows"]) >= int(info["total_rows"]):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: index not built after {timeout_s:.0f} s: {info}")
        time.sleep(2.0)


def bulk_add(kb: KnowledgeDB, files: list[PreparedFile]) -> None:
    """What ``add_prepared`` writes for ready documents, in one transaction per store for the batch:
    registry rows (ready), chunk rows with their full-text rows (Milvus: in a few insert requests), vectors.
    ``add_prepared`` spends ~12 ms a document in per-document transactions and lookups (milvus-lite:
    ~50 ms), which makes 250,000 take an hour."""
    from mx_rag.knowledge.models import READY, DocumentModel
    from mx_rag.storage.document_store.base_storage import MxDocument
    from mx_rag.storage.document_store.text_tokens import index_tokens

    registry, chunks = kb.knowledge_store, kb.chunk_store
    with registry._session() as session:
        rows = [DocumentModel(knowledge_id=kb.knowledge_id, knowledge_name=KB, document_name=f.path.name,
                              document_file_path=str(f.path), status=READY) for f in files]
        session.add_all(rows)
        session.flush()
        doc_ids = [row.document_id for row in rows]
    if hasattr(chunks, "_write"):  # SQLiteDocstore: one transaction, chunk rows and their FTS5 rows
        params = [
            chunks._row_params(i, MxDocument(t, dict(m), document_name=f.path.name), d)  # type: ignore[attr-defined]
            for f, d in zip(files, doc_ids, strict=True)
            for i, (t, m) in enumerate(zip(f.texts, f.metadatas, strict=True))
        ]
        separate = chunks._indexing and not chunks._full_text.binds_tokens  # type: ignore[attr-defined]
        with chunks._write() as conn:  # type: ignore[attr-defined]
            ids = chunks._insert(conn, params)  # type: ignore[attr-defined]
            if separate:
                chunks._full_text.on_insert(conn, ids, [index_tokens(t) for f in files for t in f.texts])  # type: ignore[attr-defined]
    else:  # MilvusDocstore: the rows of every document in a few insert requests
        ids = milvus_insert(chunks, files, doc_ids)
    owners = [d for d in doc_ids for _ in range(CHUNKS_PER_DOC)]
    kb.vector_store.add(ids, np.concatenate([f.dense for f in files]), document_id=owners)


def milvus_insert(chunks: Any, files: list[PreparedFile], doc_ids: list[int]) -> list[int]:
    """What ``MilvusDocstore.add`` writes for each document, in insert requests of many documents."""
    from mx_rag.storage.document_store import _milvus_docs as layout
    from mx_rag.storage.document_store.base_storage import MxDocument
    from mx_rag.storage.document_store.milvus_storage import _batches

    rows = [
        row
        for f, d in zip(files, doc_ids, strict=True)
        for row in layout.make_rows(chunks._codec, [MxDocument(t, dict(m), document_name=f.path.name)
                                                    for t, m in zip(f.texts, f.metadatas, strict=True)],
                                    d, chunks._bm25, chunks._dense)
    ]  # fmt: skip
    if chunks._manual_ids:
        for row, chunk_id in zip(rows, chunks._allocate(len(rows)), strict=True):
            row["id"] = chunk_id
    ids: list[int] = []
    for batch in _batches(rows):
        ids.extend(int(i) for i in chunks.client.insert(chunks.collection_name, batch)["ids"])
    return ids


def build(store: str, folder: Path, documents: int, dim: int, corpus: Corpus) -> dict[str, Any]:
    """Fill ``folder`` with ``documents`` documents (``bulk_add``) unless a finished build is there."""
    done = folder / "done"
    if done.exists():
        return {"cached": True}
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "docs").mkdir()
    start = time.perf_counter()
    registry, chunks, vectors, save = OPENERS[store](folder, dim, False)
    registry.add_knowledge(KB, USER, "admin")
    kb = KnowledgeDB(knowledge_store=registry, chunk_store=chunks, vector_store=vectors, knowledge_name=KB,
                     white_paths=[str(folder / "docs")], user_id=USER, max_file_count=BATCH)
    rng = np.random.default_rng(documents)
    for first in range(0, documents, BATCH):
        count = min(BATCH, documents - first)
        texts, matrix = corpus.chunks(rng, count * CHUNKS_PER_DOC)
        files = [
            PreparedFile(folder / "docs" / f"doc{first + i}.txt", texts[i * 4 : i * 4 + 4],
                         [{"source": f"doc{first + i}.txt"}] * 4, matrix[i * 4 : i * 4 + 4], None)
            for i in range(count)
        ]  # fmt: skip
        bulk_add(kb, files)
    save()
    done.write_text("ok")
    return {"cached": False, "build_s": round(time.perf_counter() - start, 1)}


def measure(store: str, folder: Path, dim: int, corpus: Corpus, queries: int) -> dict[str, list[float]]:
    registry, chunks, vectors, _ = OPENERS[store](folder, dim, True)
    kb = KnowledgeDB(knowledge_store=registry, chunk_store=chunks, vector_store=vectors, knowledge_name=KB,
                     white_paths=[str(folder / "docs")], user_id=USER)
    embed = HashEmbedding(dim).embed_documents
    dense = Retriever(vector_store=vectors, document_store=chunks, embed_func=embed, k=K)
    hybrid = HybridRetriever(vector_store=vectors, document_store=chunks, embed_func=embed, k=K)
    scoped_dense = kb.as_retriever(embed, k=K)
    scoped_hybrid = kb.scoped(HybridRetriever(vector_store=vectors, document_store=chunks, embed_func=embed, k=K))
    texts = corpus.queries(queries)
    query_vectors = embed(texts)
    runs: dict[str, Callable[[int], Any]] = {
        "store_search": lambda i: vectors.search([query_vectors[i]], k=K),
        "dense": lambda i: dense.invoke(texts[i]),
        "scoped_dense": lambda i: scoped_dense.invoke(texts[i]),
        "hybrid": lambda i: hybrid.invoke(texts[i]),
        "scoped_hybrid": lambda i: scoped_hybrid.invoke(texts[i]),
    }
    for name in CONTENDERS:  # warm caches (index file, SQLite pages, per-filter arrays)
        runs[name](0)
        runs[name](1)
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for i in range(queries):
        for name in rotated(CONTENDERS, i):
            start = time.perf_counter()
            hits = runs[name](i)
            times[name].append(time.perf_counter() - start)
            if name.endswith("dense") or name.endswith("hybrid"):
                assert len(hits) == K, f"{name} returned {len(hits)} hits"
    return times


def chunk_vectors(corpus: Corpus, count: int) -> np.ndarray:
    """``count`` chunk vectors as ``Corpus.chunks`` makes them, without the texts, 50,000 at a time."""
    rng = np.random.default_rng(3)
    parts = []
    for start in range(0, count, 50_000):
        picks = rng.choice(VOCABULARY, size=(min(50_000, count - start), WORDS_PER_CHUNK), p=corpus.p)
        vectors = corpus.table[picks].sum(axis=1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        parts.append((vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32))
    return np.ascontiguousarray(np.vstack(parts))


# (kind, knob, settings): FLAT's quantised copy (REFINE_FACTOR * k candidates scored exactly) on
# from the first vector, IVF with 1/16 and 1/4 of its lists probed, HNSW at two efSearch
INDEX_CHOICES = (("FLAT", "quantize_from", (1,)), ("IVF", "nprobe", (16, 4)), ("HNSW", "efSearch", (64, 256)))


def index_recall_lines(corpus: Corpus, count: int, dim: int, queries: int, kinds: list[str]) -> list[dict[str, Any]]:
    """Exact FLAT against ``kinds`` of ``INDEX_CHOICES`` on the same ``count`` vectors: build
    seconds (the first search, for the quantised copy), recall@10 by ids and tie-aware (a hit
    counts when it scores at least FLAT's 10th: hash vectors tie), p50 ms in rotating order."""
    from mx_rag.storage.vectorstore import MindFAISS

    vectors = chunk_vectors(corpus, count)
    ids = list(range(count))
    asked = HashEmbedding(dim).embed_documents(corpus.queries(queries))
    nlist = max(1, int(4 * count**0.5))
    stores: dict[str, tuple[dict[str, Any], Any, float]] = {}
    flat = MindFAISS(x_dim=dim, load_local_index=None, index_params={"quantize_from": count + 1})
    flat.add(ids, vectors, document_id=1)
    for kind, knob, settings in INDEX_CHOICES:
        for setting in settings if kind in kinds else ():
            value = max(1, nlist // setting) if kind == "IVF" else setting
            params = {"nlist": nlist, "nprobe": value, "train_size": count} if kind == "IVF" else {knob: value}
            store = MindFAISS(x_dim=dim, load_local_index=None, index_type=kind, index_params=params)
            start = time.perf_counter()
            store.add(ids, vectors, document_id=1)
            store.search([asked[0]], k=10)
            stores[f"{kind} {knob}={value}"] = ({"kind": kind, **params}, store, time.perf_counter() - start)
    runs = {"exact": flat, **{name: store for name, (_, store, _) in stores.items()}}
    times: dict[str, list[float]] = {name: [] for name in runs}
    hits: dict[str, list[tuple[list[float], list[int]]]] = {name: [] for name in runs}
    for i, vector in enumerate(asked):
        for name in rotated(tuple(runs), i):
            begin = time.perf_counter()
            scores, found = runs[name].search([vector], k=10)
            times[name].append(time.perf_counter() - begin)
            hits[name].append((scores[0], found[0]))
    lines = []
    for name, (params, _, build_s) in stores.items():
        recall = recall_against(hits["exact"], hits[name])
        lines.append({"bench": "query_scaling", "scenario": "index_recall", "vectors": count, "dim": dim,
                      **params, "build_s": round(build_s, 1), "recall_at_10": recall["recall"],
                      "tie_aware_recall_at_10": recall["tie_aware_recall"],
                      "flat_p50_ms": ms(percentile(times["exact"], 0.5)), "p50_ms": ms(percentile(times[name], 0.5)),
                      "queries": len(asked), **memory_mb(), "loadavg": loadavg()})
    return lines


FTS5_SHAPES = {  # name -> SQL over the chunk store's FTS5 table {t}, one bound MATCH expression
    "count_only": "SELECT count(*) FROM {t} WHERE {t} MATCH ?",
    "rowids_only": "SELECT rowid FROM {t} WHERE {t} MATCH ?",
    "bm25_top20": "SELECT rowid AS id, -bm25({t}) AS score FROM {t} WHERE {t} MATCH ? ORDER BY score DESC, id LIMIT 20",
    "rank_top20": "SELECT rowid, rank FROM {t} WHERE {t} MATCH ? ORDER BY rank LIMIT 20",
}


def fts5_shape_lines(folder: Path, corpus: Corpus, queries: int, detail_column: bool) -> list[dict[str, Any]]:
    """Where the keyword side's time goes: the same questions' MATCH expressions (as
    ``SQLiteDocstore.full_text_search`` makes them) run in ``FTS5_SHAPES`` on the cached store, on
    a plain connection and on one with ``mmap_size`` 2 GiB, in rotating order; with
    ``detail_column`` also on a copy of the index made with ``detail=column`` (rebuilt, optimised)."""
    import sqlite3
    import tempfile

    from mx_rag.storage.document_store.text_tokens import FTS5_TOKENIZER, fts5_match, query_tokens

    db = folder / "sql.db"
    matches = [fts5_match(query_tokens(q)) for q in corpus.queries(queries)]
    plain = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    mapped = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    mapped.execute("PRAGMA mmap_size=2147418112")
    runs: dict[str, tuple[sqlite3.Connection, str]] = {}
    for name, sql in FTS5_SHAPES.items():
        runs[name] = (plain, sql.format(t="chunks_table_fts"))
        runs[f"{name}_mmap"] = (mapped, sql.format(t="chunks_table_fts"))
    scratch = None
    if detail_column:
        scratch = tempfile.TemporaryDirectory(prefix="mxrag-fts5-")
        column = sqlite3.connect(str(Path(scratch.name) / "column.db"))
        column.execute("ATTACH ? AS src", (str(db),))
        column.execute(f"CREATE VIRTUAL TABLE f USING fts5(tokens, tokenize = '{FTS5_TOKENIZER}', detail=column)")
        column.execute("INSERT INTO f (rowid, tokens) SELECT id, c0 FROM src.chunks_table_fts_content")
        column.execute("INSERT INTO f (f) VALUES ('optimize')")
        column.commit()
        runs["bm25_top20_detail_column"] = (column, FTS5_SHAPES["bm25_top20"].format(t="f"))
    for connection, sql in runs.values():  # warm the caches
        connection.execute(sql, (matches[0],)).fetchall()
    times: dict[str, list[float]] = {name: [] for name in runs}
    tops: dict[str, list[list[int]]] = {name: [] for name in runs}
    for i, match in enumerate(matches):
        for name in rotated(tuple(runs), i):
            connection, sql = runs[name]
            start = time.perf_counter()
            rows = connection.execute(sql, (match,)).fetchall()
            times[name].append(time.perf_counter() - start)
            tops[name].append([row[0] for row in rows[:20]])
    matched = [plain.execute(FTS5_SHAPES["count_only"].format(t="chunks_table_fts"), (m,)).fetchone()[0]
               for m in matches]  # fmt: skip
    lines = []
    for name, values in times.items():
        line = {"bench": "query_scaling", "scenario": "fts5_shape", "shape": name, "chunks": plain.execute(
            "SELECT count(*) FROM chunks_table_fts_docsize").fetchone()[0], "p50_ms": ms(percentile(values, 0.5)),
            "p90_ms": ms(percentile(values, 0.9)), "matches_p50": int(np.median(matched)),
            "matches_max": max(matched), "queries": len(matches), "loadavg": loadavg()}  # fmt: skip
        if name.endswith("detail_column"):
            line["same_top20_sets"] = sum(set(a) == set(b) for a, b in zip(tops[name], tops["bm25_top20"], strict=True))
        lines.append(line)
    if scratch is not None:
        scratch.cleanup()
    return lines


def tracing_off_line() -> dict[str, Any]:
    """What the tracing stages cost with tracing off: a question passes through at most 9 (see
    mx_rag.utils.tracing), each one ``with stage(...)``, timed here 200,000 times."""
    from mx_rag.utils import tracing

    assert not tracing.enabled(), "unset MXRAG_OTLP_ENDPOINT to measure tracing off"
    rounds = 200_000
    start = time.perf_counter()
    for _ in range(rounds):
        with tracing.stage("query.embed"):
            pass
    per_stage = (time.perf_counter() - start) / rounds
    return {"bench": "query_scaling", "scenario": "tracing_off", "ns_per_stage": round(per_stage * 1e9, 1),
            "us_per_question_9_stages": round(per_stage * 9 * 1e6, 3), "loadavg": loadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[1000, 10_000, 100_000, 250_000],
                        help="documents per knowledge base (4 chunks each)")
    parser.add_argument("--stores", nargs="+", choices=sorted(OPENERS), default=["faiss", "milvus"])
    parser.add_argument("--dim", type=positive_int, default=128)
    parser.add_argument("--queries", type=positive_int, default=30)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/mxrag-query-scaling"))
    parser.add_argument("--label", default="", help="a tag for this run (before/after)")
    parser.add_argument("--index-recall", type=positive_int, nargs="+", default=None, metavar="VECTORS",
                        help="measure FLAT against IVF and HNSW at these vector counts instead")
    parser.add_argument("--index-kinds", nargs="+", choices=[kind for kind, _, _ in INDEX_CHOICES],
                        default=[kind for kind, _, _ in INDEX_CHOICES],
                        help="with --index-recall: the kinds to measure")
    parser.add_argument("--fts5-shapes", action="store_true",
                        help="time FTS5 query shapes on the cached SQLite stores of --sizes instead (needs them built)")
    parser.add_argument("--detail-column", action="store_true", help="with --fts5-shapes: also a detail=column copy")
    parser.add_argument("--milvus-uri", default=None,
                        help="run the milvus store on this Milvus server (HNSW; chunks in SQLite), not milvus-lite")
    parser.add_argument("--milvus-consistency", default="Session", choices=("Strong", "Session"),
                        help="with --milvus-uri: the searches' consistency level (the server's workspace: Session)")
    parser.add_argument("--omp-threads", type=positive_int, default=1,
                        help="faiss threads (2 on a shared 2-core machine make one query's search many times slower)")
    args = parser.parse_args()
    import faiss

    faiss.omp_set_num_threads(args.omp_threads)
    if args.milvus_uri:
        use_milvus_server(args.milvus_uri, args.cache_dir, args.milvus_consistency)
    emit(environment("query_scaling", dim=args.dim, k=K, queries=args.queries, label=args.label,
                     omp_threads=args.omp_threads, milvus_uri=args.milvus_uri,
                     milvus_consistency=args.milvus_consistency, loadavg=loadavg()))
    corpus = Corpus(args.dim)
    if args.index_recall:
        for count in args.index_recall:
            for measured in index_recall_lines(corpus, count, args.dim, args.queries, args.index_kinds):
                emit(measured)
        return
    if args.fts5_shapes:
        for documents in args.sizes:
            for measured in fts5_shape_lines(args.cache_dir / f"faiss-{documents}-d{args.dim}", corpus, args.queries,
                                             args.detail_column):
                emit(measured)
        return
    emit(tracing_off_line())
    for store in args.stores:
        for documents in args.sizes:
            served = "milvus_server" if store == "milvus" and args.milvus_uri else store
            folder = args.cache_dir / f"{served}-{documents}-d{args.dim}"
            built = build(store, folder, documents, args.dim, corpus)
            emit({"bench": "query_scaling", "scenario": "build", "store": served, "documents": documents,
                  "chunks": documents * CHUNKS_PER_DOC, **built, **memory_mb(), "loadavg": loadavg()})
            times = measure(store, folder, args.dim, corpus, args.queries)
            p50 = {name: percentile(values, 0.5) for name, values in times.items()}
            for name, values in times.items():
                emit({"bench": "query_scaling", "scenario": name, "store": served, "documents": documents,
                      "chunks": documents * CHUNKS_PER_DOC, "label": args.label, "p50_ms": ms(p50[name]),
                      "p90_ms": ms(percentile(values, 0.9)), "loadavg": loadavg()})
            line: dict[str, Any] = {"bench": "query_scaling", "scenario": "scoped_over_unscoped", "store": served,
                                    "documents": documents, "label": args.label}
            for kind in ("dense", "hybrid"):
                bar = 1.1 * p50[kind] + 0.001
                line[f"{kind}_extra_ms"] = ms(p50[f"scoped_{kind}"] - p50[kind])
                line[f"{kind}_within_bar"] = p50[f"scoped_{kind}"] <= bar
            emit(line)


if __name__ == "__main__":
    main()
