# SPDX-License-Identifier: Apache-2.0
"""``MilvusCollection``: what the stores kept in one Milvus collection share (``MilvusDB``,
``MilvusDocstore``): the client, the collection's name and ``_call``, which turns Milvus's errors
into ``StorageError`` and serialises milvus-lite's writes."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from mx_rag.errors import StorageError
from mx_rag.storage.vectorstore import _milvus_schema as schema_

__all__ = ["MilvusCollection"]


class MilvusCollection(ABC):
    """A base for stores kept in one Milvus collection; the subclass sets ``_client``,
    ``_collection`` and ``_error`` (``pymilvus.MilvusException``) and says the server's version."""

    _client: Any
    _collection: str
    _error: type[Exception]

    @property
    def client(self) -> Any:
        """The ``pymilvus.MilvusClient``."""
        return self._client

    @property
    def collection_name(self) -> str:
        return self._collection

    @abstractmethod
    def _server_version(self) -> str:
        """The server's version string (``get_server_version``)."""

    @contextlib.contextmanager
    def _call(self, action: str, *, write: bool = False) -> Iterator[None]:
        lite = write and schema_.is_lite(self._server_version())
        try:
            with schema_.lite_write_lock(self._client) if lite else contextlib.nullcontext():
                yield
        except self._error as exc:
            raise StorageError(f"Milvus {action} on collection {self._collection!r} failed: {exc}") from exc
