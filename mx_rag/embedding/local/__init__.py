# SPDX-License-Identifier: Apache-2.0
"""Local embedding models: ``TextEmbedding`` (transformers text encoders), ``ImageEmbedding`` (CLIP),
``SparseEmbedding`` (BGE-M3 lexical weights).

Names are resolved on first access and models load on first use, so importing this package
imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.utils.lazy import lazy_package

if TYPE_CHECKING:
    from mx_rag.embedding.local.img_embedding import ImageEmbedding
    from mx_rag.embedding.local.sparse_embedding import SparseEmbedding
    from mx_rag.embedding.local.text_embedding import TextEmbedding

__all__ = ["ImageEmbedding", "SparseEmbedding", "TextEmbedding"]

__getattr__, __dir__ = lazy_package(globals())
