# SPDX-License-Identifier: Apache-2.0
"""Types shared by the CoRAG modules: retrieved documents and where they come from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class RetrievedDocument:
    """One retrieved passage: its id (``"graph_chunk"`` when the source gives none) and text."""

    id: str
    text: str


@runtime_checkable
class DocumentSource(Protocol):
    """Anything that answers ``retrieve(query, top_k)``: the retrieval-API client, or an adapter
    over a ``Retriever`` / knowledge base. Failures degrade to an empty list (and a warning)."""

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]: ...
