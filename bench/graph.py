# SPDX-License-Identifier: Apache-2.0
"""Benchmark Graph RAG on HotpotQA: graph build time and size, retrieval latency and recall@5.

The corpus is the context paragraphs of the first ``--questions`` HotpotQA (train) questions of
``hotpotqa_train.json`` (100 questions: 994 distinct paragraphs), one text file per paragraph
holding ``"<title>: <paragraph>"`` (the chunk text ``bench/multi_query.py`` uses), split with
``LoaderMng.with_defaults(chunk_size=4000, chunk_overlap=0)``, so every paragraph is one chunk.

``GraphRAGPipeline`` builds the graph with a deterministic extractor plugged in where the LLM goes
(``extractor=``): entities are capitalised name spans ("Two Dollar Radio", "University of
Oslo"; a leading article or sentence-opening function word dropped), relations are
``co-occurs with`` between every two names of one sentence. So no model generates anything and
the build time is our code plus the MiniLM embedding of node names, which is reported
separately (``embed_s``; ``build_s - embed_s`` is the graph work). Node names are embedded once
per run: the second store's build reuses the vectors (``embed_cached``).

Each graph store is measured in turn: ``NetworkxGraphStore`` (the embedded default, a file in the
work folder) and, when a PostgreSQL URL is given (``--postgres-url``, else the environment's
``MXRAG_TEST_POSTGRES_URL``; ``url=$(scripts/ensure_postgres.sh)`` starts a local server),
``PostgresGraphStore`` in tables of a fresh prefix, dropped at the end.

Retrieval, one question at a time after one untimed warm-up, ``k=5``:

* ``dense``: the peer: ``Retriever`` (MiniLM) over ``MindFAISS`` (FLAT, inner product) and
  ``SQLiteDocstore`` holding the same chunk texts;
* ``graph``: ``pipeline.as_retriever(reranker_top_k=5, subgraph_depth=D, **S)`` for ``D`` in
  ``--depths`` (default 1 and 2) and ``S`` in ``SETTINGS``: ``default`` (the retriever's
  defaults: question n-grams and the 40 nearest node embeddings link, at most 200 nodes
  reached) and ``narrow`` (5 nearest nodes, at most 20 nodes reached: the best of a small sweep
  on the first 20 questions, shown to tell the linking width from the graph itself).

Scores: ``recall_at_5`` (share of a question's gold supporting titles among the first 5 chunks,
averaged over questions), ``all_found_at_5`` (share of questions with every supporting title in
the first 5), latency p50/p90/p99 (ms), and ``recall_at_20`` from an untimed pass with k=20.
Both methods embed the question with MiniLM inside the timed call. torch runs
``--torch-threads`` threads (default 1: on a shared 2-core machine two threads were much slower
in ``bench/multi_query.py``). Dense chunk vectors are cached in ``--cache-dir`` between runs.

Output: JSON lines on stdout: the environment, the dense indexing and the ``dense`` line, then
per store a ``build`` line and one ``graph`` line per setting and depth.

Run::

    .venv/bin/python bench/graph.py                    # 100 questions, 994 paragraphs
    .venv/bin/python bench/graph.py --quick            # 20 questions, their 200 paragraphs
    url=$(scripts/ensure_postgres.sh) && .venv/bin/python bench/graph.py --postgres-url "$url"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from mx_rag.document import LoaderMng
from mx_rag.embedding.local import TextEmbedding
from mx_rag.graphrag import Chunk, Entity, Extraction, GraphRAGPipeline, GraphStore, Relation
from mx_rag.retrievers import Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

BENCH = "graph"
K = 5
DEFAULT_DATA = Path("/work/shared/data/multihop")
QUESTIONS_FILE = "hotpotqa_train.json"
EMBEDDING_MODEL = "all-MiniLM-L6-v2"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mxrag" / "bench"
WARMUP_QUESTION = "Which river flows through the capital of the country that hosted the 1936 Olympics?"
WIDE_K = 20  # recall_at_20: an untimed extra pass with k=20
UPLOAD_FILES = 100  # upload_files takes at most 100 files a call
SETTINGS: dict[str, dict[str, Any]] = {"default": {}, "narrow": {"retrieval_top_k": 5, "max_nodes": 20}}


# -- data --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    gold: frozenset[str]  # supporting titles


def load(data_dir: Path, count: int) -> tuple[list[Question], dict[str, str]]:
    """The first ``count`` questions, and their context paragraphs: title -> chunk text."""
    records = json.loads((data_dir / QUESTIONS_FILE).read_text(encoding="utf-8"))[:count]
    questions = [Question(r["question"], frozenset(t for t, _ in r["supporting_facts"])) for r in records]
    passages: dict[str, str] = {}
    for record in records:
        for title, sentences in record["context"]:
            passages.setdefault(title, f"{title}: {''.join(sentences).strip()}")
    return questions, passages


# -- the deterministic extractor ---------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_TOKEN = re.compile(r"[^\W_][\w'’.\-]*|[^\w\s]")
_POSSESSIVE = re.compile(r"['’]s?$")
_JOINERS = frozenset({"of", "the", "de", "da", "di", "du", "del", "della", "von", "van", "der", "den", "la", "le", "y"})
_OPENERS = frozenset({
    "a", "an", "the", "in", "on", "at", "as", "after", "before", "during", "from", "for", "with", "by", "to", "of",
    "into", "his", "her", "its", "their", "he", "she", "it", "they", "this", "that", "these", "those", "there",
    "here", "when", "while", "although", "though", "however", "but", "and", "or", "if", "since", "until",
    "following", "according", "despite", "many", "most", "some", "several", "all", "each", "both",
})  # fmt: skip


def _capitalised(token: str) -> bool:
    return token[:1].isupper()


def _tokens(sentence: str) -> list[str]:
    """Words (a final period and a possessive 's dropped) and punctuation marks."""
    return [_POSSESSIVE.sub("", t.rstrip(".")) or t for t in _TOKEN.findall(sentence)]


def names_in(tokens: list[str], known: set[str]) -> list[str]:
    """The capitalised name spans of a sentence's tokens, in order, each once. A one-word span
    opening the sentence counts only if ``known`` (seen capitalised inside a sentence)."""
    spans: list[tuple[int, list[str]]] = []
    current: list[str] = []
    for i, token in enumerate([*tokens, ""]):
        joins = token in _JOINERS and current and i + 1 < len(tokens) and _capitalised(tokens[i + 1])
        if _capitalised(token) or joins:
            current.append(token)
            continue
        if current:
            spans.append((i - len(current), current))
        current = []
    found: dict[str, None] = {}
    for start, span in spans:
        while span and span[0].lower() in _OPENERS:
            start, span = start + 1, span[1:]
        while span and span[-1] in _JOINERS:
            span = span[:-1]
        if not span or (len(span) == 1 and (len(span[0]) == 1 or (start == 0 and span[0] not in known))):
            continue
        found[" ".join(span)] = None
    return list(found)


class NameCooccurrenceExtractor:
    """An ``Extractor`` without a model: names are entities, names in one sentence are related."""

    relation = "co-occurs with"

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        return [self._one(chunk.text) for chunk in chunks]

    def _one(self, text: str) -> Extraction:
        sentences = [_tokens(sentence) for sentence in _SENTENCE_END.split(text)]
        known = {t for tokens in sentences for t in tokens[1:] if _capitalised(t)}
        entities: dict[str, None] = {}
        relations: dict[tuple[str, str], None] = {}
        for tokens in sentences:
            names = names_in(tokens, known)
            entities.update(dict.fromkeys(names))
            for i, first in enumerate(names):
                for second in names[i + 1 :]:
                    relations[(first, second)] = None
        return Extraction(
            entities=tuple(Entity(name) for name in entities),
            relations=tuple(Relation(a, b, self.relation) for a, b in relations),
        )


# -- embeddings, timed and reused --------------------------------------------------------------


class TimedEmbedding(Embeddings):
    """``TextEmbedding`` with the time spent in ``embed_documents`` counted, and its vectors
    remembered by text (so a second build embeds nothing twice)."""

    def __init__(self, inner: TextEmbedding) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.cache: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            start = time.perf_counter()
            vectors = self.inner.embed_documents(missing, batch_size=batch_size)
            self.seconds += time.perf_counter() - start
            self.cache.update(zip(missing, vectors, strict=True))
        return [self.cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)
    all_found: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)


def run_questions(invoke: Callable[[str], list[Document]], title_of: Callable[[Document], str],
                  questions: Sequence[Question]) -> Result:  # fmt: skip
    invoke(WARMUP_QUESTION)
    result = Result()
    for question in questions:
        start = time.perf_counter()
        docs = invoke(question.text)
        result.latencies.append(time.perf_counter() - start)
        top = {title_of(doc) for doc in docs[:K]}
        result.recalls.append(len(question.gold & top) / len(question.gold))
        result.all_found.append(float(question.gold <= top))
        result.returned.append(len(docs))
    return result


def recall_at(depth: int, invoke: Callable[[str], list[Document]], title_of: Callable[[Document], str],
              questions: Sequence[Question]) -> float:  # fmt: skip
    """Mean recall of the first ``depth`` documents (an untimed extra pass)."""
    found = [len(q.gold & {title_of(d) for d in invoke(q.text)[:depth]}) / len(q.gold) for q in questions]
    return round(mean(found), 4)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def method_line(method: str, result: Result, **extra: Any) -> dict[str, Any]:
    return {
        "bench": BENCH, "method": method, **extra, "questions": len(result.recalls), "k": K,
        "recall_at_5": round(mean(result.recalls), 4), "all_found_at_5": round(mean(result.all_found), 4),
        "p50_ms": ms(percentile(result.latencies, 0.5)), "p90_ms": ms(percentile(result.latencies, 0.9)),
        "p99_ms": ms(percentile(result.latencies, 0.99)), "mean_ms": ms(mean(result.latencies)),
        "avg_docs_returned": round(mean(result.returned), 2), "loadavg_1m": round(os.getloadavg()[0], 2),
    }  # fmt: skip


# -- dense retrieval (the peer) ----------------------------------------------------------------


def chunk_vectors(embedding: TextEmbedding, texts: list[str], cache_dir: Path | None) -> tuple[np.ndarray, bool]:
    """The chunk vectors, from ``cache_dir`` when an earlier run embedded the same texts."""
    digest = hashlib.sha256(json.dumps([EMBEDDING_MODEL, texts]).encode()).hexdigest()[:16]
    path = cache_dir / f"graph-hotpotqa-{digest}.npy" if cache_dir is not None else None
    if path is not None and path.is_file():
        return np.load(path), True
    vectors = np.asarray(embedding.embed_documents(texts), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors, False


def dense_title(doc: Document) -> str:
    return str(doc.metadata["title"])


def dense_lines(embedding: TextEmbedding, passages: dict[str, str], questions: Sequence[Question],
                folder: Path, cache_dir: Path | None) -> Iterator[dict[str, Any]]:  # fmt: skip
    docs = [MxDocument(page_content=text, metadata={"title": title}, document_name=title)
            for title, text in passages.items()]  # fmt: skip
    start = time.perf_counter()
    vectors, cached = chunk_vectors(embedding, [d.page_content for d in docs], cache_dir)
    embed_s = time.perf_counter() - start
    docstore = SQLiteDocstore(folder / "chunks.db")
    try:
        vector_store = MindFAISS(x_dim=embedding.dimension, devs=None, load_local_index=None)
        start = time.perf_counter()
        ids = docstore.add(docs, document_id=1)
        vector_store.add(ids, vectors, document_id=1)
        yield {"bench": BENCH, "method": "dense_indexing", "chunks": len(ids), "embed_s": round(embed_s, 2),
               "embed_cached": cached, "store_s": round(time.perf_counter() - start, 3)}  # fmt: skip
        retriever = Retriever(vector_store=vector_store, document_store=docstore,
                              embed_func=embedding.embed_documents, k=K)  # fmt: skip
        wide = Retriever(vector_store=vector_store, document_store=docstore, embed_func=embedding.embed_documents,
                         k=WIDE_K)  # fmt: skip
        result = run_questions(retriever.invoke, dense_title, questions)
        yield method_line("dense", result, recall_at_20=recall_at(WIDE_K, wide.invoke, dense_title, questions))
    finally:
        docstore.close()


# -- graph retrieval ---------------------------------------------------------------------------


def write_files(folder: Path, passages: dict[str, str]) -> dict[str, str]:
    """One ``p<n>.txt`` per paragraph; resolved path -> title."""
    folder.mkdir()
    title_of: dict[str, str] = {}
    for n, (title, text) in enumerate(passages.items()):
        path = folder / f"p{n:05d}.txt"
        path.write_text(text, encoding="utf-8")
        title_of[str(path.resolve())] = title
    return title_of


@contextmanager
def postgres_store(url: str) -> Iterator[GraphStore]:
    """A ``PostgresGraphStore`` in tables of a fresh prefix, dropped afterwards."""
    from sqlalchemy import text

    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

    prefix = f"bench_graph_{uuid.uuid4().hex[:8]}"
    store = PostgresGraphStore(url, graph_name="hotpotqa", table_prefix=prefix)
    try:
        yield store
    finally:
        with store.engine.begin() as conn:
            for table in ("edge_sources", "node_sources", "edges", "nodes", "graphs"):
                conn.execute(text(f"DROP TABLE IF EXISTS {prefix}_{table} CASCADE"))
        store.close()


def graph_lines(store_name: str, store: GraphStore | None, embedding: TimedEmbedding, files: dict[str, str],
                questions: Sequence[Question], folder: Path, depths: Sequence[int]
                ) -> Iterator[dict[str, Any]]:  # fmt: skip
    work_dir = folder / f"work_{store_name}"
    work_dir.mkdir()
    kwargs: dict[str, Any] = {"graph_store": store} if store is not None else {}
    graph_type = "postgres" if store_name == "postgres" else "networkx"
    pipeline = GraphRAGPipeline(work_dir, None, embedding, embedding.inner.dimension, graph_type=graph_type,
                                extractor=NameCooccurrenceExtractor(), **kwargs)  # fmt: skip
    loader = LoaderMng.with_defaults(chunk_size=4000, chunk_overlap=0)
    paths = list(files)
    embedded_before, cached_before = embedding.seconds, len(embedding.cache)
    start = time.perf_counter()
    for first in range(0, len(paths), UPLOAD_FILES):
        pipeline.upload_files(paths[first : first + UPLOAD_FILES], loader)
    upload_s = time.perf_counter() - start
    chunks = pipeline.estimate_build().chunks
    start = time.perf_counter()
    pipeline.build_graph()
    build_s = time.perf_counter() - start
    embed_s = embedding.seconds - embedded_before
    graph = pipeline.graph
    yield {
        "bench": BENCH, "method": "build", "store": store_name, "files": len(paths),
        "chunks": chunks,
        "nodes": graph.count_nodes(), "edges": graph.count_edges(),
        "upload_s": round(upload_s, 2), "build_s": round(build_s, 2), "embed_s": round(embed_s, 2),
        "build_without_embed_s": round(build_s - embed_s, 2),
        "node_names_embedded": len(embedding.cache) - cached_before, "embed_cached": cached_before > 0,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }  # fmt: skip
    for setting, options in SETTINGS.items():
        for depth in depths:
            retriever = pipeline.as_retriever(reranker_top_k=K, subgraph_depth=depth, **options)
            result = run_questions(retriever.invoke, lambda d: files[d.metadata["source"]], questions)
            wide = pipeline.as_retriever(reranker_top_k=WIDE_K, subgraph_depth=depth, **options).invoke
            recall_20 = recall_at(WIDE_K, wide, lambda d: files[d.metadata["source"]], questions)
            yield method_line("graph", result, store=store_name, settings=setting, subgraph_depth=depth,
                              **options, recall_at_20=recall_20)  # fmt: skip


# -- main --------------------------------------------------------------------------------------


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def environment_line(args: argparse.Namespace, passages: int, questions: int) -> dict[str, Any]:
    return {
        "bench": BENCH, "method": "environment", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2), "mxrag": package_version("mxrag"),
        "torch": package_version("torch"), "faiss": package_version("faiss-cpu"),
        "networkx": package_version("networkx"), "sqlalchemy": package_version("sqlalchemy"),
        "psycopg": package_version("psycopg"), "questions": questions, "paragraphs": passages,
        "embedding": EMBEDDING_MODEL, "torch_threads": args.torch_threads,
        "extractor": "NameCooccurrenceExtractor (capitalised names; co-occurrence in a sentence)",
        "postgres": bool(args.postgres_url),
    }  # fmt: skip


def run(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.torch_threads)
    questions, passages = load(args.data_dir, args.questions)
    emit(environment_line(args, len(passages), len(questions)))
    model = TextEmbedding()
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-graph-") as tmp:
        folder = Path(tmp)
        for line in dense_lines(model, passages, questions, folder, args.cache_dir):
            emit(line)
        files = write_files(folder / "paragraphs", passages)
        embedding = TimedEmbedding(model)
        for line in graph_lines("networkx", None, embedding, files, questions, folder, args.depths):
            emit(line)
        if args.postgres_url:
            with postgres_store(args.postgres_url) as store:
                for line in graph_lines("postgres", store, embedding, files, questions, folder, args.depths):
                    emit(line)
        else:
            emit({"bench": BENCH, "method": "build", "store": "postgres", "skipped":
                  "no PostgreSQL URL: pass --postgres-url or set MXRAG_TEST_POSTGRES_URL"})  # fmt: skip


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, ensure_ascii=False), flush=True)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def depth_list(text: str) -> list[int]:
    depths = [int(part) for part in text.split(",") if part.strip()]
    if not depths or not all(1 <= d <= 5 for d in depths):
        raise argparse.ArgumentTypeError(f"must be a comma-separated list of depths in [1, 5], got {text!r}")
    return depths


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder of the HotpotQA files")
    parser.add_argument("--questions", type=positive_int, default=100, help="questions asked (the first N)")
    parser.add_argument("--quick", action="store_true", help="20 questions, their paragraphs (overrides --questions)")
    parser.add_argument("--depths", type=depth_list, default=[1, 2], help="subgraph depths measured, e.g. 1,2")
    parser.add_argument("--postgres-url", default=os.environ.get("MXRAG_TEST_POSTGRES_URL", ""),
                        help="also measure PostgresGraphStore on this database (default: $MXRAG_TEST_POSTGRES_URL)")
    parser.add_argument("--torch-threads", type=positive_int, default=1, help="torch CPU threads")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where dense chunk vectors are kept")
    parser.add_argument("--no-cache", dest="cache_dir", action="store_const", const=None,
                        help="embed the chunks afresh, keep nothing")
    args = parser.parse_args(argv)
    if args.quick:
        args.questions = 20
    return args


def main(argv: Sequence[str] | None = None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
