# SPDX-License-Identifier: Apache-2.0
"""What each error of ``mx_rag.errors`` means to a client: the one table, by type.

The server answers with ``status`` and ``code``; MCP refuses a tool call with the message of any
``expected`` error (the rest are logged, their text not sent); the command line prints one line
and exits with ``exit_code``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mx_rag.errors import (
    ExtraNotInstalledError,
    KnowledgeConflict,
    KnowledgeError,
    KnowledgeNotFound,
    MxRagError,
    ParameterError,
    PermissionDenied,
    RemoteError,
)

__all__ = ["ErrorKind", "kind_of"]


@dataclass(frozen=True)
class ErrorKind:
    status: int
    code: str
    exit_code: int = 1
    expected: bool = True  # the caller's input or the world, not a fault of ours: its message is shown


# most specific first: the first type that matches decides
_KINDS: tuple[tuple[type[BaseException], ErrorKind], ...] = (
    (ParameterError, ErrorKind(400, "invalid_argument")),
    (KnowledgeNotFound, ErrorKind(404, "not_found")),
    (KnowledgeConflict, ErrorKind(409, "conflict")),
    (PermissionDenied, ErrorKind(403, "forbidden")),
    (KnowledgeError, ErrorKind(400, "knowledge_error")),
    (RemoteError, ErrorKind(502, "upstream_error")),
    (ExtraNotInstalledError, ErrorKind(501, "not_installed")),
    (MxRagError, ErrorKind(500, "internal_error", expected=False)),
)
_UNEXPECTED = ErrorKind(500, "internal_error", expected=False)


def kind_of(exc: BaseException) -> ErrorKind:
    """The kind of ``exc`` (an internal error for anything not in ``mx_rag.errors``)."""
    return next((kind for cls, kind in _KINDS if isinstance(exc, cls)), _UNEXPECTED)
