# SPDX-License-Identifier: Apache-2.0
"""``VectorStorageFactory``: build a vector store from a type name and keyword arguments."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from mx_rag.errors import ParameterError
from mx_rag.storage.vectorstore.vectorstore import VectorStore

_BUILTIN = {
    "npu_faiss_db": ("mx_rag.storage.vectorstore.faiss_npu", "MindFAISS"),
    "milvus_db": ("mx_rag.storage.vectorstore.milvus", "MilvusDB"),
    "opengauss_db": ("mx_rag.storage.vectorstore.opengauss", "OpenGaussDB"),
}


class VectorStorageFactory:
    """Creates stores by name: ``"npu_faiss_db"`` (MindFAISS), ``"milvus_db"`` (MilvusDB) or
    ``"opengauss_db"`` (OpenGaussDB).

    Each name maps to the store's static ``create(**kwargs)``; errors are raised, never returned
    as None. Other backends can be added with ``register``.

    Example:
        >>> store = VectorStorageFactory.create_storage(vector_type="npu_faiss_db", x_dim=384, devs=[0],
        ...                                             load_local_index="/data/faiss.index")
    """

    _creators: ClassVar[dict[str, Any]] = {}

    @classmethod
    def register(cls, vector_type: str, creator: Any) -> None:
        """Make ``create_storage(vector_type=...)`` call ``creator(**kwargs)``."""
        if not isinstance(vector_type, str) or not vector_type or not callable(creator):
            raise ParameterError("register needs a non-empty vector_type name and a callable creator")
        cls._creators[vector_type] = creator

    @classmethod
    def create_storage(cls, vector_type: str | None = None, **kwargs: Any) -> VectorStore:
        known = sorted({*_BUILTIN, *cls._creators})
        if vector_type in cls._creators:
            store = cls._creators[vector_type](**kwargs)
        elif isinstance(vector_type, str) and vector_type in _BUILTIN:
            module, name = _BUILTIN[vector_type]
            store = getattr(importlib.import_module(module), name).create(**kwargs)
        else:
            raise ParameterError(f"vector_type must be one of {known}, got {vector_type!r}")
        if not isinstance(store, VectorStore):
            raise ParameterError(f"the creator of {vector_type!r} returned {type(store).__name__}, not a VectorStore")
        return store
