# SPDX-License-Identifier: Apache-2.0
"""The semantic store: questions and answers in SQLite, question vectors in a vector store.

SQLite (``<folder>/<name>.db``) is the source of truth: each row keeps its question's embedding,
so the vector store (a FAISS file beside it, or a Milvus collection) can be rebuilt from it. Every
change holds ``<folder>/<name>.lock`` across both stores; row ids are never reused (AUTOINCREMENT),
so a vector left behind by a crash can never point at another question, and opening the cache
puts the two stores back in step. A lookup embeds the question, takes ``retrieval_top_k``
neighbours, keeps those of the same kind (question word) naming the same numbers, and compares
their questions with a reranker (or by cosine similarity); the best one at or above
``similarity_threshold`` is a hit.
"""

from __future__ import annotations

import importlib
import logging
import random
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mx_rag.cache.config import EvictPolicy, SimilarityCacheConfig
from mx_rag.errors import ParameterError, StorageError
from mx_rag.reranker.reranker import Reranker
from mx_rag.utils.process_lock import ProcessLock

__all__ = ["SimilarityStore", "build_embedding", "build_reranker"]

logger = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, question TEXT NOT NULL, answer TEXT NOT NULL,
    embedding BLOB NOT NULL, created REAL NOT NULL, accessed REAL NOT NULL, hits INTEGER NOT NULL DEFAULT 0)"""
# A similar question only hits when it asks the same kind of thing about the same numbers: embeddings
# put "When was X born?" next to "Where was X born?" (cosine 0.97 with MiniLM, above its paraphrases).
_KINDS = (
    ("how-many", r"\bhow (?:many|much)\b|多少|几"),
    ("when", r"\bwhen\b|\bwhat (?:year|date|time|day|month)\b|\bin which year\b|什么时候|何时|哪一?年|几时"),
    ("where", r"\bwhere\b|\bin which (?:town|city|country|place|village|region)\b|哪里|哪儿|在哪"),
    ("who", r"\bwho(?:m|se)?\b|\bwhat(?:'s| is| was) (?:his|her|their|its|the) name\b|谁|叫什么|什么名字"),
    ("why", r"\bwhy\b|为什么|为何"),
    ("how", r"\bhow\b|怎么|如何|怎样"),
    ("what", r"\bwhat\b|\bwhich\b|什么|哪"),
)
_KIND_PATTERNS = [(kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _KINDS]
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def question_signature(text: str) -> tuple[str, frozenset[str]]:
    """The kind of question (its first question word's class) and the numbers it names."""
    kind = next((name for name, pattern in _KIND_PATTERNS if pattern.search(text)), "")
    return kind, frozenset(_NUMBER.findall(text))


_ORDER = {
    EvictPolicy.LRU: "accessed, created",
    EvictPolicy.LFU: "hits, accessed",
    EvictPolicy.FIFO: "created, id",
}


_EMBEDDINGS = {
    "local_text_embedding": "mx_rag.embedding.local.text_embedding:TextEmbedding",
    "tei_embedding": "mx_rag.embedding.service.tei_embedding:TEIEmbedding",
}
_RERANKERS = {
    "local_reranker": "mx_rag.reranker.local.reranker:LocalReranker",
    "tei_reranker": "mx_rag.reranker.service.tei_reranker:TEIReranker",
}


def build_embedding(config: dict[str, Any]) -> Embeddings:
    """An embedder from ``emb_config``: a given object, or one built by ``embedding_type``."""
    options = dict(config)
    options.pop("x_dim", None)
    options.pop("skip_emb", None)
    embedder: Embeddings = _given_or_built("emb_config", options, ("embedding", Embeddings, "an Embeddings"),
                                          "embedding_type", _EMBEDDINGS)
    return embedder


def build_reranker(config: dict[str, Any]) -> Reranker | None:
    """A reranker from ``similarity_config`` (its score range already taken out), or None for cosine."""
    options = dict(config)
    named = options.get("reranker") is not None or options.get("similarity_type") is not None
    if not named and not options.keys() - {"reranker", "similarity_type"}:
        return None  # no reranker: cosine similarity
    reranker: Reranker = _given_or_built("similarity_config", options, ("reranker", Reranker, "a Reranker"),
                                         "similarity_type", _RERANKERS)
    return reranker


def _given_or_built(section: str, options: dict[str, Any], given: tuple[str, type, str], kind_key: str,
                    registry: dict[str, str]) -> Any:
    """``options[given_key]`` when set (an instance of its class), else the class ``registry`` names
    by ``options[kind_key]``, built from the other options."""
    given_key, cls, what = given
    value = options.pop(given_key, None)
    if value is not None:
        if not isinstance(value, cls):
            raise ParameterError(f"{section}[{given_key!r}] must be {what}, got {type(value).__name__}")
        return value
    kind = options.pop(kind_key, None)
    if kind not in registry:
        raise ParameterError(f"{section}[{kind_key!r}] must be one of {sorted(registry)} "
                             f"(or pass {section}[{given_key!r}]), got {kind!r}")
    module_name, _, class_name = registry[kind].partition(":")
    return getattr(importlib.import_module(module_name), class_name)(**options)


class SimilarityStore:
    """Semantic question -> answer entries (see the module docstring)."""

    def __init__(self, name: str, config: SimilarityCacheConfig) -> None:
        assert config.vector_config is not None
        self.config = config
        self.folder = config.data_save_folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._name = name
        self.embedding = build_embedding(config.emb_config)
        self.reranker = build_reranker(config.similarity_config)
        self._thread_lock = threading.RLock()
        self._file_lock = ProcessLock(self.folder / f"{name}.lock", outer=config.lock)
        self._db = sqlite3.connect(self.folder / f"{name}.db", timeout=60, check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._vectors: Any = None
        self._dim = int(config.vector_config.get("x_dim") or 0)
        if self._dim:
            with self._locked():
                self._open_vectors()

    # -- public ------------------------------------------------------------------------------

    def get(self, query: str) -> str | None:
        vector = self.embedding.embed_query(query)
        with self._thread_lock:
            store = self._store(len(vector))
            scores, ids = store.search([vector], k=self.config.retrieval_top_k)
            rows = self._rows(ids[0])
        if not rows:
            return None
        signature = question_signature(query)
        candidates = [(rows[i], score) for score, i in zip(scores[0], ids[0], strict=True)
                      if i in rows and question_signature(rows[i][1]) == signature]
        if not candidates:
            return None
        similarities = self._similarities(query, [row[1] for row, _ in candidates], [s for _, s in candidates])
        best = int(np.argmax(similarities))
        if similarities[best] < self.config.similarity_threshold:
            return None
        row_id, _, answer = candidates[best][0]
        with self._thread_lock:
            self._db.execute("UPDATE entries SET hits = hits + 1, accessed = ? WHERE id = ?", (time.time(), row_id))
        return str(answer)

    def put(self, query: str, answer: str) -> None:
        vector = np.asarray(self.embedding.embed_query(query), dtype=np.float32)
        with self._locked():
            store = self._store(vector.size)
            now = time.time()
            found = self._db.execute("SELECT id FROM entries WHERE question = ?", (query,)).fetchone()
            if found is not None:
                self._db.execute("UPDATE entries SET answer = ?, accessed = ? WHERE id = ?", (answer, now, found[0]))
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursor = self._db.execute(
                    "INSERT INTO entries (question, answer, embedding, created, accessed) VALUES (?, ?, ?, ?, ?)",
                    (query, answer, vector.tobytes(), now, now))
                store.add([int(cursor.lastrowid or 0)], vector.reshape(1, -1))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._evict(store)

    def flush(self) -> None:
        """Everything is written through; this puts the vector store in step with SQLite."""
        with self._locked():
            if self._vectors is not None:
                self._reconcile(self._vectors)

    def clear(self) -> None:
        with self._locked():
            ids = [row[0] for row in self._db.execute("SELECT id FROM entries")]
            if self._vectors is not None and ids:
                self._vectors.delete(ids)
            self._db.execute("DELETE FROM entries")

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    # -- internals ---------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock, self._file_lock:
            yield

    def _store(self, dim: int) -> Any:
        if self._vectors is None:
            with self._locked():
                self._dim = self._dim or dim
                self._open_vectors()
        if dim != self._dim:
            raise ParameterError(f"the embedding gives {dim} dimensions, the cache's vector store holds {self._dim}")
        return self._vectors

    def _open_vectors(self) -> None:
        if self._vectors is not None:
            return
        from mx_rag.storage.vectorstore.vector_storage_factory import VectorStorageFactory

        options = dict(self.config.vector_config or {})
        kind = options.pop("vector_type", None)
        save_file = options.pop("vector_save_file", None)
        options.pop("top_k", None)
        options["x_dim"] = self._dim
        if kind == "npu_faiss_db":
            options["load_local_index"] = save_file or str(self.folder / f"{self._name}.index")
            options["auto_save"] = True
            options.setdefault("metric_type", "COSINE")
        elif kind == "milvus_db":
            options.pop("use_http", None)  # the reference's examples pass it; the client already holds the URL
            if "param" in options:
                options["params"] = options.pop("param")
        self._vectors = VectorStorageFactory.create_storage(vector_type=kind, **options)
        self._reconcile(self._vectors)

    def _reconcile(self, store: Any) -> None:
        """Add the rows' vectors the store lacks; delete vectors without a row (a crash between the two)."""
        rows = {row[0]: row[1] for row in self._db.execute("SELECT id, embedding FROM entries")}
        held = set(store.get_all_ids())
        orphans = sorted(held - set(rows))
        missing = sorted(set(rows) - held)
        if orphans:
            store.delete(orphans)
        if missing:
            vectors = np.stack([np.frombuffer(rows[i], dtype=np.float32) for i in missing])
            store.add(missing, vectors)
        if orphans or missing:
            logger.info("cache %s: %d vector(s) added, %d removed to match its rows", self._name,
                        len(missing), len(orphans))

    def _rows(self, ids: list[int]) -> dict[int, tuple[int, str, str]]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        found = self._db.execute(f"SELECT id, question, answer FROM entries WHERE id IN ({marks})", ids)
        return {row[0]: (row[0], row[1], row[2]) for row in found}

    def _similarities(self, query: str, questions: list[str], vector_scores: list[float]) -> list[float]:
        if self.reranker is None:
            return [min(max(float(score), 0.0), 1.0) for score in vector_scores]
        raw = np.asarray(self.reranker.rerank(query, questions), dtype=np.float64)
        low, high = self.config.score_min, self.config.score_max
        scaled = np.clip((raw - low) / ((high - low) or 1.0), 0.0, 1.0)
        return [float(1.0 - s if self.config.reverse else s) for s in scaled]

    def _evict(self, store: Any) -> None:
        count = len(self)
        if count <= self.config.cache_size:
            return
        number = max(self.config.clean_size, count - self.config.cache_size)
        policy = self.config.eviction_policy
        if policy is EvictPolicy.RR:
            ids = [row[0] for row in self._db.execute("SELECT id FROM entries")]
            doomed = random.sample(ids, min(number, len(ids)))
        else:
            query = f"SELECT id FROM entries ORDER BY {_ORDER[policy]} LIMIT ?"
            doomed = [row[0] for row in self._db.execute(query, (number,))]
        try:
            store.delete(doomed)
        except Exception as exc:  # the rows go anyway; the next open removes the vectors
            raise StorageError(f"cache {self._name}: could not delete evicted vectors: {exc}") from exc
        finally:
            marks = ",".join("?" * len(doomed))
            self._db.execute(f"DELETE FROM entries WHERE id IN ({marks})", doomed)
