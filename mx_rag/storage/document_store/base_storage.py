# SPDX-License-Identifier: Apache-2.0
"""The chunk record ``MxDocument`` and the ``Docstore`` interface every chunk store implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from mx_rag.utils.checks import check_int, fail
from mx_rag.utils.common import MAX_TOP_K

MAX_PAGE_CONTENT = 16 * 1024 * 1024
MAX_CHUNKS_NUM = 1_000_000
MAX_FILTER_KEYS = 32


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


def document_ids_filter(filter_dict: dict[str, Any] | None) -> list[int] | None:
    """The ``document_id`` list of a filter dict (None when there is no such filter).

    A filter dict has at most 32 keys; ``document_id`` must be a list of at most 1,000,000 ints
    (an empty list matches nothing). Unknown keys are refused rather than silently ignored.
    """
    if not filter_dict:
        return None
    if not isinstance(filter_dict, dict) or len(filter_dict) > MAX_FILTER_KEYS:
        raise fail("filter_dict", filter_dict, f"a dict with at most {MAX_FILTER_KEYS} keys")
    unknown = set(filter_dict) - {"document_id"}
    if unknown:
        raise fail(
            "filter_dict", filter_dict, f"a dict whose only supported key is 'document_id' (got {sorted(unknown)})"
        )
    ids = filter_dict["document_id"]
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise fail("filter_dict['document_id']", ids, "a list of ints")
    if len(ids) > MAX_CHUNKS_NUM:
        raise fail("filter_dict['document_id']", f"<{len(ids)} ids>", f"a list of at most {MAX_CHUNKS_NUM} ids")
    return sorted(set(ids))


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

    @staticmethod
    def _check_top_k(top_k: Any) -> int:
        return check_int("top_k", top_k, 1, MAX_TOP_K)
