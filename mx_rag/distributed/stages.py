# SPDX-License-Identifier: Apache-2.0
"""The stages of scale-out ingestion as Ray runs them: load and split (tasks), embed (an actor
pool), write (a few actors). A task returns its chunks as plain dicts of ints and strings; a batch
is a dict of numpy columns. Nothing here imports Ray, so each stage is an ordinary function or
class (``mx_rag.distributed.pool`` makes the tasks and actors of them). What the stages use is
imported with this module, so a worker process pays for the imports when it starts (the pool
waits for that), not on its first batch.

Every chunk's id is ``chunk_id(knowledge base, document path, content hash, chunk index)``, and
the writers upsert by it into PostgreSQL (``PostgresDocstore.upsert``) and Milvus
(``MilvusDB.upsert``): a batch that Ray runs twice (a restarted actor, a retried task) is written
once. A document's chunks are tagged with its registry row, which turns ``ready`` only when all of
them are written (``mx_rag.distributed.ingest``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mx_rag.errors import DocumentError, MxRagError
from mx_rag.knowledge.knowledge import embed_texts
from mx_rag.storage.document_store.base_storage import MxDocument

__all__ = ["Embedder", "Writer", "chunk_id", "columns", "load_and_split", "warm_loader"]

MAX_ID = 2**63 - 1
_LOADERS: dict[str, Any] = {}  # loader managers of this worker process, by their factory (its repr)


def chunk_id(knowledge_id: int, path: str, content_hash: str, index: int) -> int:
    """The id of chunk ``index`` of the version ``content_hash`` of document ``path``: the same on
    every machine and every run, in [0, 2**63 - 1] (a Milvus INT64 and a PostgreSQL BIGINT)."""
    key = f"{knowledge_id}\0{path}\0{content_hash}\0{index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") & MAX_ID


def _failure(row: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [{"doc_id": row["doc_id"], "chunk_id": -1, "total": 0, "text": "", "metadata": "{}", "name": "",
             "error": reason or "failed"}]


def _loader(loader_factory: Callable[[], Any]) -> Any:
    key = repr(loader_factory)
    if key not in _LOADERS:
        _LOADERS[key] = loader_factory()
    return _LOADERS[key]


def warm_loader(loader_factory: Callable[[], Any]) -> bool:
    """Make this worker process's loader manager (the one ``load_and_split`` uses) before the
    first file comes: a pool's start runs it, so that the first files wait for no imports."""
    _loader(loader_factory)
    return True


def load_and_split(row: dict[str, Any], loader_factory: Callable[[], Any]) -> list[dict[str, Any]]:
    """The chunks of one planned document (``doc_id``, ``path``, ``digest``, ``knowledge_id``), as
    the in-process ingestion makes them (the loader manager's ``load_and_split``, blank chunks
    dropped); one row with ``error`` set when the file cannot be read."""
    path = Path(row["path"])
    try:
        docs = [d for d in _split(row, path, loader_factory) if d.page_content.strip()]
        if not docs:
            raise DocumentError(f"{path.name}: no text could be extracted")
        metadatas = [json.dumps(dict(d.metadata), allow_nan=False) for d in docs]
    except (MxRagError, OSError) as exc:
        return _failure(row, str(exc))
    except (TypeError, ValueError) as exc:  # metadata that is not JSON (the chunk store would refuse it)
        return _failure(row, f"cannot store it: chunk metadata is not JSON-serialisable: {exc}")
    return [
        {"doc_id": row["doc_id"], "chunk_id": chunk_id(row["knowledge_id"], str(path), row["digest"], i),
         "total": len(docs), "text": doc.page_content, "metadata": meta, "name": path.name, "error": ""}
        for i, (doc, meta) in enumerate(zip(docs, metadatas, strict=True))
    ]


def _split(row: dict[str, Any], path: Path, loader_factory: Callable[[], Any]) -> list[Any]:
    """The file's chunks: read from ``path``, or from the bytes the driver sent (``data``: a file on
    the driver's disk only), written under its name into a temporary folder, ``source`` set back."""
    if row.get("data") is None:
        return list(_loader(loader_factory).load_and_split(str(path)))
    with tempfile.TemporaryDirectory(prefix="mxrag-ray-") as folder:
        local = Path(folder) / path.name
        local.write_bytes(row["data"])
        docs = list(_loader(loader_factory).load_and_split(str(local)))
    for doc in docs:
        doc.metadata.update({k: str(path) for k, v in doc.metadata.items() if v == str(local.resolve())})
    return docs


def columns(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Chunk rows (``load_and_split``'s) as one batch: a numpy column per field."""
    return {name: np.asarray([row[name] for row in rows]) for name in rows[0]}


class Embedder:
    """An embedding actor: the model is loaded once, in ``__init__``; ``embed`` embeds a batch.

    Args:
        factory: makes the embedding function (``texts -> vectors``); called once per actor.
        dimension: the vectors' dimension (rows of failed documents get zeros).
        threads: torch threads of this actor (at most the CPUs Ray gave it), set when the
            embedding function uses torch.
    """

    def __init__(self, factory: Callable[[], Callable[[list[str]], Any]], dimension: int, threads: int = 1) -> None:
        self.model = factory()
        self.dimension, self.threads = dimension, max(1, threads)
        self._bound = False
        self._bound_threads()

    def _bound_threads(self) -> None:
        """Torch's threads set to ``threads`` once the model has imported torch (a sleeping or
        remote embedder never does)."""
        if not self._bound and "torch" in sys.modules:
            with contextlib.suppress(RuntimeError):
                sys.modules["torch"].set_num_threads(self.threads)
            self._bound = True

    def ready(self) -> bool:
        """True once the model is loaded (what the pool waits for)."""
        return True

    def embed(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._bound_threads()
        ok = np.flatnonzero(batch["error"] == "")
        vectors = np.zeros((len(batch["error"]), self.dimension), dtype=np.float32)
        if len(ok):
            dense, _ = embed_texts(self.model, [str(t) for t in batch["text"][ok]])
            vectors[ok] = dense
        return {**batch, "vector": vectors}


class Writer:
    """A writer actor: upserts each batch's chunks into the chunk store, then their vectors into
    the vector store (so no vector is ever without its chunk), and passes on what it wrote.

    Args:
        stores: makes ``(chunk_store, vector_store)``; a ``PostgresDocstore`` and a ``MilvusDB``.
    """

    def __init__(self, stores: Callable[[], tuple[Any, Any]]) -> None:
        self.chunks, self.vectors = stores()

    def ready(self) -> bool:
        """True once the stores are open (what the pool waits for)."""
        return True

    def write(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ok = np.flatnonzero(batch["error"] == "")
        if len(ok):
            doc_ids = batch["doc_id"][ok].astype(np.int64)
            ids = [int(i) for i in batch["chunk_id"][ok]]
            for doc_id in sorted(set(doc_ids.tolist())):
                rows = ok[doc_ids == doc_id]
                documents = [MxDocument(str(batch["text"][r]), json.loads(str(batch["metadata"][r])),
                                        document_name=str(batch["name"][r])) for r in rows]
                self.chunks.upsert(documents, doc_id, [int(batch["chunk_id"][r]) for r in rows])
            self.vectors.upsert(ids, batch["vector"][ok], document_id=doc_ids.tolist())
        return {name: batch[name] for name in ("doc_id", "chunk_id", "total", "error")}
