# SPDX-License-Identifier: Apache-2.0
"""The chunk record ``MxDocument`` and the ``Docstore`` interface every chunk store implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from mx_rag.storage.validation import MAX_IDS, check_filter
from mx_rag.utils.checks import fail

MAX_PAGE_CONTENT = 16 * 1024 * 1024
MAX_CHUNKS_NUM = MAX_IDS  # chunks per add, ids per call: the one id-list limit of mx_rag.storage.validation


@dataclass
class MxDocument:
    """One stored chunk.

    Args:
        page_content: the chunk text (at most 16 MiB).
        metadata: JSON-serialisable metadata (source path, page, type, image base64...).
        document_name: name of the document the chunk came from.
        chunk_id: set by the store when the chunk is read back.
        document_id: set by the store when the chunk is read back.
    """

    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    document_name: str = ""
    chunk_id: int | None = None
    document_id: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.page_content, str) or len(self.page_content) > MAX_PAGE_CONTENT:
            raise fail("page_content", self.page_content, f"a str of at most {MAX_PAGE_CONTENT} characters")
        if not isinstance(self.metadata, dict):
            raise fail("metadata", self.metadata, "a dict")

    def to_langchain(self, **extra_metadata: Any) -> Document:
        """A LangChain Document with a copy of the metadata plus ``extra_metadata``."""
        return Document(page_content=self.page_content, metadata={**self.metadata, **extra_metadata})


# The filter check every store shares; the name is the one ``mx_rag.retrievers`` imports.
document_ids_filter = check_filter


class Docstore(ABC):
    """A store of text chunks keyed by integer chunk ids, grouped by integer document ids.

    Implementations: ``SQLiteDocstore`` and ``PostgresDocstore`` (one SQLAlchemy code base).
    Every method is safe to call from several threads.
    """

    @abstractmethod
    def add(self, documents: Sequence[MxDocument], document_id: int) -> list[int]:
        """Insert all chunks in one transaction; return their new ids, in input order."""

    @abstractmethod
    def delete(self, document_id: int) -> list[int]:
        """Delete every chunk of ``document_id``; return the deleted chunk ids."""

    @abstractmethod
    def search(self, chunk_id: int) -> MxDocument | None:
        """One chunk by id, or None."""

    @abstractmethod
    def search_many(self, chunk_ids: Sequence[int]) -> dict[int, MxDocument]:
        """Chunks by id in one query; ids not found are absent from the result."""

    @abstractmethod
    def get_all_chunk_id(self) -> list[int]:
        """Every chunk id, ascending."""

    @abstractmethod
    def get_all_document_id(self) -> list[int]:
        """Every document id that has chunks, ascending."""

    @abstractmethod
    def search_by_document_id(self, document_id: int) -> list[MxDocument]:
        """The chunks of one document, in insertion order."""

    @abstractmethod
    def update(self, chunk_ids: Sequence[int], texts: Sequence[str]) -> None:
        """Replace the text of existing chunks (same length lists)."""

    @abstractmethod
    def full_text_search(
        self, query: str, top_k: int = 3, filter_dict: dict[str, Any] | None = None
    ) -> list[MxDocument]:
        """Keyword search; best first, each with ``metadata["score"]`` (higher is better)."""

    def count(self) -> int:
        """Number of chunks."""
        return len(self.get_all_chunk_id())

    def max_chunk_id(self) -> int | None:
        """The highest chunk id, ``None`` when there are no chunks."""
        return max(self.get_all_chunk_id(), default=None)
