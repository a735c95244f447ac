# SPDX-License-Identifier: Apache-2.0
"""Retrieval defaults by measurement: embedding model x retrieval method, recall and latency.

Issue 14 asks for retrieval defaults chosen by measurement and a default recall@5 of at least
0.90 on HotpotQA-100. This script measures, in one run, for each embedding model
(``all-MiniLM-L6-v2``, the library default, and ``multilingual-e5-small``; e5 gets its
``"query: "`` / ``"passage: "`` prompts from ``TextEmbedding``: the retrievers embed the question
with ``embed_query``):

* ``dense``: ``Retriever``;
* ``hybrid_f{10,20,50}``: ``HybridRetriever`` (dense + SQLite FTS5, reciprocal rank fusion,
  ``rrf_k=60``) with ``fetch_k`` candidates from each side (``mxrag ask --chain hybrid`` uses
  ``fetch_k = 2k``: 10 at k=5);
* ``hybrid_w{2,3}_f20``: dense-weighted RRF (``w/(60+rank_dense) + 1/(60+rank_keyword)``,
  ``HybridRetriever(dense_weight=w)``);
* ``dense_links1``, ``hybrid_f10_links1``: ``subject_links=1`` (the capitalised names of the first
  result followed to the chunks that open with them: ``mx_rag.retrievers.subject_links``);
  ``hybrid_w{2,3}_f{10,20}_links1``: dense-weighted RRF with them;
* ``full_text``: ``FullTextRetriever`` alone (embedding-independent, once per dataset);
* ``default``: what the product answers with: ``mxrag ask`` / ``mxrag chat`` without options,
  the server and ``LocalKnowledge.retriever()`` use ``HybridRetriever`` with its own defaults
  (``dense_weight=2``, ``fetch_k=4k``, ``subject_links=1``) at ``[chain] k`` (5) over the
  default embedding (multilingual-e5-small); measured at k=5 itself, so its recall@10 is
  recall@5.

Datasets (``--data-dir``, default /work/shared/data/multihop), one chunk per paragraph, text
``"<title>: <paragraph>"`` (bench/_harness.py's loading, imported from it):

* ``hotpotqa``: the first ``--questions`` questions of hotpotqa_train.json over the 994
  paragraphs of hotpotqa_train_corpus.json; gold = the supporting titles;
* ``musique``: the first ``--questions`` of musique_train.json over the 1890 paragraphs of
  musique_train_corpus.json; gold = the question's ``is_supporting`` paragraphs (2 to 4; titles
  repeat in MuSiQue, so a paragraph is identified by title and text).

Each method is asked for 10 documents; recall@3/@5/@10 and all-found@5/@10 are read off that list
(the dense search is exact, and the hybrid's candidates depend on ``fetch_k`` only, so its first
5 are what k=5 returns). Latency: per question, sequential, after one untimed warm-up (p50/p90
ms, query embedding included). The corpus is embedded afresh in the run (unless
``--cache-dir``) and timed: ``ingest`` lines give the seconds and chunks/s of ``embed_documents``
per model and dataset (model load excluded, reported apart).

``--chinese`` (on by default) adds the 30 Chinese questions of bench/answers.py (the first 10 until
2026-12-01 evening) over the Chinese Debian Reference (debian-reference.zh-cn.txt), split as a
knowledge base splits it (``LoaderMng.with_defaults()``: 750 characters, 150 overlap): a question is
found at k when one of the first k chunks holds its answer passage's anchor string (answers.py's
``CHINESE``).

A model name may end in ``@int8`` or ``@fp32`` (``TextEmbedding(int8=...)``; without either, the
library's choice: int8 on a CPU for multilingual-e5-small when the ``int8`` extra is installed), so
``--models multilingual-e5-small@fp32,multilingual-e5-small@int8 --default-only`` compares the two
variants' recall on the default retrieval, and the ``vectors`` lines give the cosine of each
model's vectors to the first model's (median, minimum) where the models are variants of one model.

torch runs on ``--torch-threads`` (default 1: the machine is shared). Output: JSON lines on
stdout: an environment line, an ``ingest`` line per model and dataset, one line per config.

Run::

    .venv/bin/python bench/retrieval_defaults.py                 # 100 + 100 + 30 questions: 35 min at load 5-11
    .venv/bin/python bench/retrieval_defaults.py --questions 10 --no-chinese --models all-MiniLM-L6-v2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (
    MULTIHOP,
    WARMUP_QUESTION,
    Question,
    cached_vectors,
    emit,
    environment,
    load_corpus,
    load_questions,
    loadavg_1m,
    ms,
    package_version,
    percentile,
    pin_torch_threads,
    positive_int,
)
from answers import CHINESE, ZH_TEXT
from multi_query import mean

from mx_rag.embedding.local import TextEmbedding
from mx_rag.embedding.local.text_embedding import INT8_SUFFIX
from mx_rag.knowledge.retriever import KnowledgeRetriever
from mx_rag.knowledge.store import DEFAULT_EMBEDDING, embedding_id
from mx_rag.retrievers import FullTextRetriever, HybridRetriever, Retriever
from mx_rag.storage.document_store import MxDocument, SQLiteDocstore
from mx_rag.storage.vectorstore import MindFAISS

BENCH = "retrieval_defaults"
DEPTH = 10  # documents asked of every method
DEFAULT_K = 3  # recall@3 is reported too
CHAIN_K = 5  # [chain] k, LocalKnowledge.retriever()
DEFAULT_DATA = MULTIHOP
MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
FETCH_KS = (10, 20, 50)
DENSE_WEIGHTS = (2, 3)
WEIGHTED_FETCH_K = 20


# -- data --------------------------------------------------------------------------------------


def hotpotqa(data_dir: Path, count: int) -> tuple[list[MxDocument], list[Question]]:
    return load_corpus(data_dir, "title_text"), load_questions(data_dir, count)


def musique(data_dir: Path, count: int) -> tuple[list[MxDocument], list[Question]]:
    """Chunks keyed ``"<title> #<index>"`` in metadata ``title`` (what the scoring reads)."""
    paragraphs = json.loads((data_dir / "musique_train_corpus.json").read_text(encoding="utf-8"))
    key = {(p["title"], p["text"]): f"{p['title']} #{i}" for i, p in enumerate(paragraphs)}
    corpus = [MxDocument(page_content=f"{p['title']}: {p['text']}", metadata={"title": key[p["title"], p["text"]]},
                         document_name=p["title"]) for p in paragraphs]
    records = json.loads((data_dir / "musique_train.json").read_text(encoding="utf-8"))[:count]
    questions = [Question(r["question"], frozenset(key[p["title"], p["paragraph_text"]]
                                                   for p in r["paragraphs"] if p["is_supporting"])) for r in records]
    return corpus, questions


def chinese(count: int | None = None) -> tuple[list[MxDocument], list[Question]]:
    """The Chinese Debian Reference as knowledge-base chunks; gold: the chunks holding each anchor."""
    from mx_rag.document import LoaderMng

    chunks = [d for d in LoaderMng.with_defaults().load_and_split(ZH_TEXT) if d.page_content.strip()]
    corpus = [MxDocument(page_content=d.page_content, metadata={"title": f"chunk #{i}"}, document_name=ZH_TEXT.name)
              for i, d in enumerate(chunks)]
    questions = []
    for question, anchor, _ in CHINESE[:count]:
        gold = frozenset(doc.metadata["title"] for doc in corpus if anchor in doc.page_content)
        if not gold:
            raise SystemExit(f"bench/retrieval_defaults.py: no chunk holds {anchor!r}")
        questions.append(Question(question, gold))
    return corpus, questions


# -- measuring ---------------------------------------------------------------------------------


def measure(invoke: Callable[[str], list[Document]], questions: Sequence[Question], gold_any: bool) -> dict[str, Any]:
    """recall@3/5/10, all-found@5/10 and latency of ``invoke`` (which returns ``DEPTH`` documents).

    ``gold_any``: a question is found when any gold chunk is there (Chinese: the anchor's chunks),
    else recall is the share of gold items found.
    """
    invoke(WARMUP_QUESTION)
    seconds, found = [], []
    for question in questions:
        start = time.perf_counter()
        docs = invoke(question.text)
        seconds.append(time.perf_counter() - start)
        keys = [doc.metadata["title"] for doc in docs]
        found.append({depth: len(question.gold & set(keys[:depth])) for depth in (DEFAULT_K, 5, DEPTH)})

    def recall(depth: int) -> float:
        if gold_any:
            return round(mean([float(f[depth] > 0) for f in found]), 4)
        return round(mean([f[depth] / len(q.gold) for f, q in zip(found, questions, strict=True)]), 4)

    line = {"recall_at_3": recall(DEFAULT_K), "recall_at_5": recall(5), "recall_at_10": recall(DEPTH)}
    if not gold_any:
        for depth in (5, DEPTH):
            line[f"all_found_at_{depth}"] = round(
                mean([float(f[depth] == len(q.gold)) for f, q in zip(found, questions, strict=True)]), 4)
    line.update(p50_ms=ms(percentile(seconds, 0.5), 1), p90_ms=ms(percentile(seconds, 0.9), 1),
                loadavg_1m=loadavg_1m())
    return line


def methods(common: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(name, parameters, retriever) of every embedding-dependent method, each returning DEPTH documents."""
    out: list[tuple[str, dict[str, Any], Any]] = [("dense", {}, Retriever(**common))]
    out += [(f"hybrid_f{fk}", {"fetch_k": fk, "rrf_k": 60}, HybridRetriever(**common, fetch_k=fk)) for fk in FETCH_KS]
    out += [(f"hybrid_w{w}_f{WEIGHTED_FETCH_K}", {"fetch_k": WEIGHTED_FETCH_K, "rrf_k": 60, "dense_weight": w},
             HybridRetriever(**common, fetch_k=WEIGHTED_FETCH_K, dense_weight=w)) for w in DENSE_WEIGHTS]
    out += [("dense_links1", {"subject_links": 1}, Retriever(**common, subject_links=1)),
            ("hybrid_f10_links1", {"fetch_k": 10, "rrf_k": 60, "subject_links": 1},
             HybridRetriever(**common, fetch_k=10, subject_links=1))]  # fmt: skip
    out += [(f"hybrid_w{w}_f{fk}_links1", {"fetch_k": fk, "rrf_k": 60, "dense_weight": w, "subject_links": 1},
             HybridRetriever(**common, fetch_k=fk, dense_weight=w, subject_links=1))
            for w in DENSE_WEIGHTS for fk in (10, WEIGHTED_FETCH_K)]
    return out


def open_embedding(model: str) -> TextEmbedding:
    """``TextEmbedding`` for a ``--models`` entry: a name or path, optionally ending in @int8 / @fp32."""
    for suffix, int8 in ((INT8_SUFFIX, True), ("@fp32", False)):
        if model.endswith(suffix):
            return TextEmbedding(model[: -len(suffix)], int8=int8)
    return TextEmbedding(model)


def base_model(model: str) -> str:
    return embedding_id(model.rsplit("@", 1)[0])


def cosine_line(base: dict[str, Any], model: str, first: tuple[str, Any] | None, vectors: Any) -> dict[str, Any] | None:
    """Cosine of ``vectors`` to the first model's, when both are variants of one model."""
    if first is None or first[0] == model or base_model(first[0]) != base_model(model):
        return None
    import numpy as np

    cos = (np.asarray(first[1]) * np.asarray(vectors)).sum(axis=1)
    return {**base, "embedding": model, "method": "vectors", "versus": first[0],
            "cosine_median": round(float(np.median(cos)), 4), "cosine_min": round(float(cos.min()), 4)}


def run_dataset(name: str, corpus: list[MxDocument], questions: list[Question], embeddings: dict[str, TextEmbedding],
                args: argparse.Namespace, workdir: Path) -> None:
    gold_any = name == "chinese"
    docstore = SQLiteDocstore(workdir / f"{name}.db")
    try:
        ids = docstore.add(corpus, document_id=1)
        base = {"bench": BENCH, "dataset": name, "questions": len(questions), "corpus_chunks": len(ids)}
        if not args.default_only:
            emit({**base, "embedding": None, "method": "full_text",
                  **measure(FullTextRetriever(document_store=docstore, k=DEPTH).invoke, questions, gold_any)})
        first: tuple[str, Any] | None = None
        for model, embedding in embeddings.items():
            texts = [doc.page_content for doc in corpus]
            vectors, seconds = cached_vectors(embedding.embed_documents, model, texts, args.cache_dir,
                                              "retrieval-defaults")
            chars = sum(len(text) for text in texts)
            emit({**base, "embedding": model, "method": "ingest",
                  "embed_s": None if seconds is None else round(seconds, 2),
                  "chunks_per_s": None if seconds is None else round(len(corpus) / seconds, 1),
                  "avg_chunk_chars": round(chars / len(corpus)), "cached": seconds is None,
                  "loadavg_1m": loadavg_1m()})
            cosine = cosine_line(base, model, first, vectors)
            if cosine is not None:
                emit(cosine)
            first = first or (model, vectors)
            vector_store = MindFAISS(x_dim=embedding.dimension, devs=None, load_local_index=None)
            vector_store.add(ids, vectors, document_id=1)
            common = {"vector_store": vector_store, "document_store": docstore,
                      "embed_func": embedding.embed_documents, "k": DEPTH}
            for method, params, retriever in [] if args.default_only else methods(common):
                emit({**base, "embedding": model, "method": method, "k": DEPTH, **params,
                      **measure(retriever.invoke, questions, gold_any)})
            if base_model(model) == embedding_id(DEFAULT_EMBEDDING):
                default = HybridRetriever(**{**common, "k": CHAIN_K})
                emit({**base, "embedding": model, "method": "default", "k": CHAIN_K,
                      "note": "mxrag ask/chat, the server and LocalKnowledge.retriever(): HybridRetriever's defaults",
                      **measure(default.invoke, questions, gold_any)})
                scoped = KnowledgeRetriever(retriever=default, document_ids=lambda: [1], generation=lambda: 0)
                emit({**base, "embedding": model, "method": "default_scoped", "k": CHAIN_K,
                      "note": "the default through KnowledgeRetriever (a knowledge base holding the whole corpus)",
                      **measure(scoped.invoke, questions, gold_any)})
    finally:
        docstore.close()


def environment_line(args: argparse.Namespace) -> dict[str, Any]:
    return environment(
        BENCH, "method", platform=platform.platform(), cpu_count=os.cpu_count(), loadavg_1m=loadavg_1m(),
        sqlite=sqlite3.sqlite_version, mxrag=package_version("mxrag"), torch=package_version("torch"),
        transformers=package_version("transformers"), faiss=package_version("faiss-cpu"),
        models=list(args.models), torch_threads=args.torch_threads, questions=args.questions,
        vector_index="MindFAISS FLAT IP (CPU)", chunk_text="title: paragraph",
    )


def run(args: argparse.Namespace) -> None:
    pin_torch_threads(args.torch_threads)
    emit(environment_line(args))
    embeddings: dict[str, TextEmbedding] = {}
    for model in args.models:
        embedding = open_embedding(model)
        start = time.perf_counter()
        embedding.embed_documents(["warm-up"])
        emit({"bench": BENCH, "method": "model_load", "embedding": model, "embedding_id": embedding.embedding_id,
              "load_s": round(time.perf_counter() - start, 2)})
        embeddings[model] = embedding
    datasets: list[tuple[str, Callable[[], tuple[list[MxDocument], list[Question]]]]] = [
        ("hotpotqa", lambda: hotpotqa(args.data_dir, args.questions)),
        ("musique", lambda: musique(args.data_dir, args.questions)),
    ]
    if args.chinese:
        datasets.append(("chinese", lambda: chinese(min(args.questions, len(CHINESE)))))
    with tempfile.TemporaryDirectory(prefix="mxrag-bench-rd-") as workdir:
        for name, load in datasets:
            corpus, questions = load()
            run_dataset(name, corpus, questions, embeddings, args, Path(workdir))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder of the HotpotQA/MuSiQue files")
    parser.add_argument("--questions", type=positive_int, default=100, help="questions per dataset (the first N)")
    parser.add_argument("--models", type=lambda s: tuple(filter(None, s.split(","))), default=MODELS,
                        help="comma-separated embedding models (built-in names or paths)")
    parser.add_argument("--torch-threads", type=positive_int, default=1, help="torch CPU threads")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="keep corpus vectors here between runs (then no ingest timing); default: embed afresh")
    parser.add_argument("--default-only", action="store_true",
                        help="measure only the default retrieval (and the vectors' cosine between variants)")
    parser.add_argument("--no-chinese", dest="chinese", action="store_false",
                        help="skip the Chinese Debian Reference questions")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
