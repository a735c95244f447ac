# SPDX-License-Identifier: Apache-2.0
"""Embedding services over HTTP: ``TEIEmbedding`` (Hugging Face TEI and OpenAI-style endpoints).

Names are resolved on first access, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.embedding.service.tei_embedding import TEIEmbedding

_LAZY = {"TEIEmbedding": "mx_rag.embedding.service.tei_embedding"}

__all__ = ["TEIEmbedding"]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
