# SPDX-License-Identifier: Apache-2.0
"""Embedding services over HTTP: ``TEIEmbedding`` (Hugging Face TEI and OpenAI-style endpoints),
``CLIPEmbedding`` (a CLIP service: texts and images).

Names are resolved on first access, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.embedding.service.clip_embedding import CLIPEmbedding
    from mx_rag.embedding.service.tei_embedding import TEIEmbedding

__all__ = ["CLIPEmbedding", "TEIEmbedding"]

__getattr__, __dir__ = lazy_package(globals())
