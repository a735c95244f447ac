# SPDX-License-Identifier: Apache-2.0
"""Test helpers shipped for users and our own tests.

``ScriptedServer`` / ``Reply``: a scripted OpenAI-compatible HTTP server (standard library only).
``HashEmbedding``: a deterministic lexical embedder that needs no model (loaded on first access).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mx_rag.testing.replies import TINY_PNG, Reply
from mx_rag.testing.scripted_server import RecordedRequest, ScriptedServer

if TYPE_CHECKING:
    from mx_rag.testing.hash_embedding import HashEmbedding

__all__ = ["TINY_PNG", "HashEmbedding", "RecordedRequest", "Reply", "ScriptedServer"]


def __getattr__(name: str) -> Any:
    if name == "HashEmbedding":
        from mx_rag.testing.hash_embedding import HashEmbedding

        return HashEmbedding
    raise AttributeError(f"module 'mx_rag.testing' has no attribute {name!r}")
