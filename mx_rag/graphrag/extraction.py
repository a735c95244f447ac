# SPDX-License-Identifier: Apache-2.0
"""What an extractor returns for a chunk, and the ``Extractor`` plug-in protocol.

``GraphRAGPipeline`` extracts with ``LLMExtractor`` unless it is given ``extractor=``: any object
with an ``extract(chunks)`` method (a rule-based extractor for tests and benchmarks, a spaCy
pipeline, another LLM recipe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Chunk", "Entity", "Extraction", "Extractor", "Relation"]


@dataclass(frozen=True)
class Chunk:
    """A piece of a document to extract from: ``id`` is unique in the pipeline."""

    id: str
    text: str


@dataclass(frozen=True)
class Entity:
    """An entity a chunk mentions, as written there (the pipeline normalises names)."""

    name: str
    type: str = ""
    description: str = ""


@dataclass(frozen=True)
class Relation:
    """``source -relation-> target`` as stated by a chunk; unknown ends become entities."""

    source: str
    target: str
    relation: str = ""
    description: str = ""


@dataclass(frozen=True)
class Extraction:
    """Everything extracted from one chunk."""

    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Turns chunks into entities and relations.

    ``extract`` gets a batch of chunks and returns one ``Extraction`` per chunk, in the same
    order. It may be called from one thread at a time; it may run its own work concurrently.
    An exception aborts the build, with nothing written to the graph.

    Example:
        >>> class Capitalised:
        ...     def extract(self, chunks):
        ...         return [Extraction(tuple(Entity(w) for w in c.text.split() if w.istitle()))
        ...                 for c in chunks]
        >>> pipeline = GraphRAGPipeline(work_dir, None, embedding, 384, extractor=Capitalised())
    """

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One ``Extraction`` per chunk, in order."""
        ...
