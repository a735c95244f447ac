# SPDX-License-Identifier: Apache-2.0
"""Vector stores: ``MindFAISS`` (a FAISS index file), ``MilvusDB`` (a Milvus collection) and
``OpenGaussDB`` (an openGauss table, or PostgreSQL with pgvector).

Importing this package imports neither faiss nor pymilvus nor a database driver: the stores are
loaded on first access, and a missing library raises ``ExtraNotInstalledError`` when a store is
built (``pip install "mxrag[faiss]"`` / ``"mxrag[milvus]"`` / ``"mxrag[postgres]"``).

Example:
    >>> from mx_rag.storage.vectorstore import MindFAISS
    >>> store = MindFAISS(x_dim=384, devs=[0], load_local_index="/data/faiss.index")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mx_rag.storage.vectorstore.vector_storage_factory import VectorStorageFactory
from mx_rag.storage.vectorstore.vectorstore import SCORE_SCALE, SearchMode, VectorStore
from mx_rag.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from mx_rag.storage.vectorstore.faiss_npu import MindFAISS
    from mx_rag.storage.vectorstore.milvus import MilvusDB
    from mx_rag.storage.vectorstore.opengauss import OpenGaussDB

__all__ = [
    "SCORE_SCALE",
    "MilvusDB",
    "MindFAISS",
    "OpenGaussDB",
    "SearchMode",
    "VectorStorageFactory",
    "VectorStore",
]

_LAZY = {
    "MindFAISS": "mx_rag.storage.vectorstore.faiss_npu",
    "MilvusDB": "mx_rag.storage.vectorstore.milvus",
    "OpenGaussDB": "mx_rag.storage.vectorstore.opengauss",
}

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
