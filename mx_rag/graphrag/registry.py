# SPDX-License-Identifier: Apache-2.0
"""``ChunkRegistry``: the documents built into the graph, their chunks, and cached extractions;
``ChangeJournal``: the change of the graph in progress.

The registry is one JSON file (``<graph_name>_chunks.json``), saved atomically and optionally
encrypted. The extraction cache is keyed by a hash of the chunk text, so a chunk already extracted
(in this or another document) is never sent to the LLM again; entries no chunk uses any more are
dropped.

A change of the graph touches three stores that cannot commit together (the graph, this registry,
the node vectors). ``GraphRAGPipeline`` writes the change to the journal
(``<graph_name>_journal.json``) before it touches any of them and removes the journal once all
three have it; a pipeline opened over a journal left by a killed process applies the change
again (every step of it can be repeated), so an interrupted build or deletion is finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mx_rag.errors import StorageError
from mx_rag.graphrag.extraction import Entity, Extraction, Relation
from mx_rag.graphrag.merge import normalise_name
from mx_rag.utils.atomic import fsync_dir, remove_stale_temps, write_atomic

__all__ = ["ChangeJournal", "ChunkRecord", "ChunkRegistry", "GraphChange", "chunk_id", "chunk_number", "content_hash"]

REGISTRY_FORMAT = "mxrag-graph-chunks"
REGISTRY_VERSION = 1
JOURNAL_FORMAT = "mxrag-graph-journal"
JOURNAL_VERSION = 1


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_number(chunk: str) -> int:
    """The positive 60-bit integer that keys a chunk's vector (derived from its id)."""
    return int(hashlib.sha256(chunk.encode()).hexdigest()[:15], 16) or 1


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


class _SealedJson:
    """A JSON file written atomically, through ``encrypt_fn`` / ``decrypt_fn`` when given."""

    FORMAT = ""
    VERSION = 0
    WHAT = ""

    def __init__(
        self,
        path: Path,
        encrypt_fn: Callable[[str], str] | None = None,
        decrypt_fn: Callable[[str], str] | None = None,
    ) -> None:
        self._path = path
        self._encrypt_fn = encrypt_fn
        self._decrypt_fn = decrypt_fn
        remove_stale_temps(path)
        self._opened()

    def _opened(self) -> None:
        """What a subclass does once its file is known (nothing here)."""

    def _save(self, data: dict[str, Any]) -> None:
        text = json.dumps({"format": self.FORMAT, "version": self.VERSION, **data}, ensure_ascii=False,
                          separators=(",", ":"), default=str)
        _write(self._path, text, self._encrypt_fn, self.WHAT)

    def _data(self) -> dict[str, Any]:
        return _read(self._path, self._decrypt_fn, self.FORMAT, self.VERSION)


class ChunkRegistry(_SealedJson):
    """Documents -> chunks -> texts, and text hash -> extraction. Thread-safe."""

    FORMAT, VERSION, WHAT = REGISTRY_FORMAT, REGISTRY_VERSION, "the chunk registry"

    def _opened(self) -> None:
        self._lock = threading.RLock()
        self._documents: dict[str, list[str]] = {}
        self._chunks: dict[str, ChunkRecord] = {}
        self._extractions: dict[str, Extraction] = {}
        self._numbers: dict[int, str] = {}
        if self._path.exists():
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

    def chunk_numbers(self) -> dict[int, str]:
        """``chunk_number(id)`` -> id, for every chunk."""
        with self._lock:
            return dict(self._numbers)

    def by_number(self, numbers: Iterable[int]) -> dict[int, str]:
        """The chunk ids of these ``chunk_number``s (unknown numbers are left out)."""
        with self._lock:
            return {n: self._numbers[n] for n in numbers if n in self._numbers}

    def entities_of(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """Chunk id -> the normalised names of the entities its extraction names, in order."""
        with self._lock:
            found: dict[str, list[str]] = {}
            for chunk in ids:
                record = self._chunks.get(chunk)
                extraction = self._extractions.get(record.hash) if record is not None else None
                if extraction is None:
                    continue
                names = [e.name for e in extraction.entities]
                names += [n for r in extraction.relations for n in (r.source, r.target)]
                found[chunk] = [n for n in dict.fromkeys(normalise_name(x) for x in names) if n]
            return found

    def put_document(self, document: str, chunks: list[ChunkRecord]) -> None:
        """Add a document, or replace its earlier chunks."""
        self.replace_documents({document: chunks})

    def remove_document(self, document: str) -> list[str]:
        """Forget a document and its chunks; return the chunk ids."""
        with self._lock:
            ids = list(self._documents.get(document, []))
            self.replace_documents({}, [document])
            return ids

    def replace_documents(self, put: Mapping[str, list[ChunkRecord]], remove: Iterable[str] = ()) -> None:
        """Add or replace the documents of ``put`` and forget those of ``remove``, together: an
        extraction is dropped only if no chunk uses it once all of them are done (a text that moves
        from one document to another keeps its cached extraction)."""
        with self._lock:
            freed: set[str] = set()
            for document in [*put, *remove]:
                freed |= self._drop(document)
            for document, chunks in put.items():
                self._documents[document] = [c.id for c in chunks]
                self._chunks.update((c.id, c) for c in chunks)
                self._numbers.update((chunk_number(c.id), c.id) for c in chunks)
            self._prune(freed)

    def _drop(self, document: str) -> set[str]:
        """Forget the document's chunks; return their text hashes."""
        chunks = [self._chunks.pop(i) for i in self._documents.pop(document, []) if i in self._chunks]
        for chunk in chunks:
            self._numbers.pop(chunk_number(chunk.id), None)
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
            self._save({
                "documents": self._documents,
                "chunks": {i: _chunk_to_json(c) for i, c in self._chunks.items()},
                "extractions": {h: _extraction_to_json(e) for h, e in self._extractions.items()},
            })

    def _load(self) -> None:
        where = f"the chunk registry {str(self._path)!r}"
        try:
            data = self._data()
            self._documents = {str(d): [str(i) for i in ids] for d, ids in data["documents"].items()}
            self._chunks = {str(i): _chunk_from_json(i, row) for i, row in data["chunks"].items()}
            self._extractions = {str(h): _extraction_from_json(e) for h, e in data["extractions"].items()}
            self._numbers = {chunk_number(i): i for i in self._chunks}
        except Exception as exc:
            raise StorageError(f"cannot read {where} (damaged, or the wrong decrypt_fn): {exc}") from exc


def _chunk_to_json(chunk: ChunkRecord) -> list[Any]:
    return [chunk.document, chunk.text, chunk.hash, chunk.metadata]


def _chunk_from_json(chunk_id: Any, row: list[Any]) -> ChunkRecord:
    document, text, text_hash, metadata = row
    return ChunkRecord(str(chunk_id), str(document), str(text), str(text_hash), dict(metadata))


def _write(path: Path, text: str, encrypt_fn: Callable[[str], str] | None, what: str) -> None:
    if encrypt_fn is not None:
        text = encrypt_fn(text)
    payload = text.encode("utf-8")

    def write(tmp: str) -> None:
        Path(tmp).write_bytes(payload)

    try:
        write_atomic(path, write)
    except OSError as exc:
        raise StorageError(f"cannot save {what} {str(path)!r}: {exc}") from exc


def _read(path: Path, decrypt_fn: Callable[[str], str] | None, kind: str, version: int) -> dict[str, Any]:
    text = path.read_bytes().decode("utf-8")
    if decrypt_fn is not None:
        text = decrypt_fn(text)
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != kind or data.get("version") != version:
        raise ValueError(f"not an mx_rag {kind} of version {version}")
    return data


# -- the journal ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphChange:
    """One change of the graph: documents added or replaced, and documents removed.

    Attributes:
        put: document -> its new chunks.
        drop: document -> the chunk ids it had before the change (documents of ``put`` that were
            built before, and the documents removed).
        extractions: text hash -> the extraction of every chunk of ``put``.
    """

    put: Mapping[str, list[ChunkRecord]] = field(default_factory=dict)
    drop: Mapping[str, list[str]] = field(default_factory=dict)
    extractions: Mapping[str, Extraction] = field(default_factory=dict)

    @property
    def removed(self) -> list[str]:
        """The documents the change removes (those of ``drop`` that it does not put back)."""
        return [d for d in self.drop if d not in self.put]

    def stale_chunks(self) -> list[str]:
        """The chunk ids that leave the graph: those dropped that no document puts back."""
        kept = {c.id for chunks in self.put.values() for c in chunks}
        return list(dict.fromkeys(i for ids in self.drop.values() for i in ids if i not in kept))


class ChangeJournal(_SealedJson):
    """The file holding the ``GraphChange`` in progress (absent when none is)."""

    FORMAT, VERSION, WHAT = JOURNAL_FORMAT, JOURNAL_VERSION, "the graph journal"

    @property
    def path(self) -> Path:
        return self._path

    def write(self, change: GraphChange) -> None:
        """Record ``change`` durably (atomically replacing any earlier one)."""
        self._save({
            "put": {d: [[c.id, *_chunk_to_json(c)] for c in chunks] for d, chunks in change.put.items()},
            "drop": {d: list(ids) for d, ids in change.drop.items()},
            "extractions": {h: _extraction_to_json(e) for h, e in change.extractions.items()},
        })  # fmt: skip

    def read(self) -> GraphChange | None:
        """The change recorded, or None when there is none.

        Raises:
            StorageError: the journal cannot be read (it is never ignored: the change it holds
                may be half applied).
        """
        if not self._path.exists():
            return None
        try:
            data = self._data()
            put = {str(d): [_chunk_from_json(row[0], row[1:]) for row in rows] for d, rows in data["put"].items()}
            drop = {str(d): [str(i) for i in ids] for d, ids in data["drop"].items()}
            extractions = {str(h): _extraction_from_json(e) for h, e in data["extractions"].items()}
        except Exception as exc:
            raise StorageError(f"cannot read the graph journal {str(self._path)!r} (damaged, or the wrong "
                               f"decrypt_fn): {exc}") from exc  # fmt: skip
        return GraphChange(put, drop, extractions)

    def clear(self) -> None:
        """Remove the journal (durably: the directory is fsynced)."""
        try:
            self._path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"cannot remove the graph journal {str(self._path)!r}: {exc}") from exc
        with contextlib.suppress(OSError):
            fsync_dir(self._path.parent)
