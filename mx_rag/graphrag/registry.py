# SPDX-License-Identifier: Apache-2.0
"""``ChunkRegistry``: the documents built into the graph, their chunks, and cached extractions.

One JSON file (``<graph_name>_chunks.json``), saved atomically and optionally encrypted. The
extraction cache is keyed by a hash of the chunk text, so a chunk already extracted (in this or
another document) is never sent to the LLM again; entries no chunk uses any more are dropped.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mx_rag.errors import StorageError
from mx_rag.graphrag.extraction import Entity, Extraction, Relation
from mx_rag.storage.vectorstore._atomic import remove_stale_temps, write_atomic

__all__ = ["ChunkRecord", "ChunkRegistry", "chunk_id", "content_hash"]

FORMAT = "mxrag-graph-chunks"
VERSION = 1


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id(document: str, index: int, text: str) -> str:
    """A chunk's id: stable for the same text at the same place of the same document."""
    return hashlib.sha256(f"{document}\0{index}\0{text}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk of a document: its text, the hash of that text and the loader's metadata."""

    id: str
    document: str
    text: str
    hash: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _extraction_to_json(extraction: Extraction) -> dict[str, Any]:
    return {"entities": [list(asdict(e).values()) for e in extraction.entities],
            "relations": [list(asdict(r).values()) for r in extraction.relations]}


def _extraction_from_json(data: dict[str, Any]) -> Extraction:
    return Extraction(tuple(Entity(*map(str, e)) for e in data["entities"]),
                      tuple(Relation(*map(str, r)) for r in data["relations"]))


class ChunkRegistry:
    """Documents -> chunks -> texts, and text hash -> extraction. Thread-safe."""

    def __init__(
        self,
        path: Path,
        encrypt_fn: Callable[[str], str] | None = None,
        decrypt_fn: Callable[[str], str] | None = None,
    ) -> None:
        self._path = path
        self._encrypt_fn = encrypt_fn
        self._decrypt_fn = decrypt_fn
        self._lock = threading.RLock()
        self._documents: dict[str, list[str]] = {}
        self._chunks: dict[str, ChunkRecord] = {}
        self._extractions: dict[str, Extraction] = {}
        remove_stale_temps(path)
        if path.exists():
            self._load()

    # -- documents -------------------------------------------------------------------------------

    def documents(self) -> list[str]:
        with self._lock:
            return sorted(self._documents)

    def chunk_ids(self, document: str) -> list[str]:
        with self._lock:
            return list(self._documents.get(document, []))

    def chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]:
        with self._lock:
            return {i: self._chunks[i] for i in ids if i in self._chunks}

    def put_document(self, document: str, chunks: list[ChunkRecord]) -> None:
        """Add a document, or replace its earlier chunks."""
        with self._lock:
            freed = self._drop(document)
            self._documents[document] = [c.id for c in chunks]
            self._chunks.update((c.id, c) for c in chunks)
            self._prune(freed)

    def remove_document(self, document: str) -> list[str]:
        """Forget a document and its chunks; return the chunk ids."""
        with self._lock:
            ids = self._documents.get(document, [])
            self._prune(self._drop(document))
            return ids

    def _drop(self, document: str) -> set[str]:
        """Forget the document's chunks; return their text hashes."""
        chunks = [self._chunks.pop(i) for i in self._documents.pop(document, []) if i in self._chunks]
        return {c.hash for c in chunks}

    def _prune(self, freed: set[str]) -> None:
        """Drop the cached extractions of ``freed`` hashes that no chunk uses any more (other
        cached extractions may belong to a build still in progress)."""
        if freed:
            freed -= {c.hash for c in self._chunks.values()}
            for text_hash in freed:
                self._extractions.pop(text_hash, None)

    # -- extraction cache ------------------------------------------------------------------------

    def cached(self, text_hash: str) -> Extraction | None:
        with self._lock:
            return self._extractions.get(text_hash)

    def cache(self, extractions: dict[str, Extraction]) -> None:
        with self._lock:
            self._extractions.update(extractions)

    # -- file ------------------------------------------------------------------------------------

    def save(self) -> None:
        with self._lock:
            data = {
                "format": FORMAT, "version": VERSION, "documents": self._documents,
                "chunks": {i: [c.document, c.text, c.hash, c.metadata] for i, c in self._chunks.items()},
                "extractions": {h: _extraction_to_json(e) for h, e in self._extractions.items()},
            }
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
        if self._encrypt_fn is not None:
            text = self._encrypt_fn(text)
        payload = text.encode("utf-8")

        def write(tmp: str) -> None:
            Path(tmp).write_bytes(payload)

        try:
            write_atomic(self._path, write)
        except OSError as exc:
            raise StorageError(f"cannot save the chunk registry {str(self._path)!r}: {exc}") from exc

    def _load(self) -> None:
        where = f"the chunk registry {str(self._path)!r}"
        try:
            text = self._path.read_bytes().decode("utf-8")
            if self._decrypt_fn is not None:
                text = self._decrypt_fn(text)
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
                raise ValueError(f"not an mx_rag chunk registry of version {VERSION}")
            self._documents = {str(d): [str(i) for i in ids] for d, ids in data["documents"].items()}
            self._chunks = {
                str(i): ChunkRecord(str(i), str(doc), str(text), str(h), dict(meta))
                for i, (doc, text, h, meta) in data["chunks"].items()
            }
            self._extractions = {str(h): _extraction_from_json(e) for h, e in data["extractions"].items()}
        except Exception as exc:
            raise StorageError(f"cannot read {where} (damaged, or the wrong decrypt_fn): {exc}") from exc
