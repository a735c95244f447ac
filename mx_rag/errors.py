# SPDX-License-Identifier: Apache-2.0
"""The one exception tree of mx_rag.

::

    MxRagError
    ├── ParameterError            (also ValueError)   an argument is out of its documented range
    ├── ExtraNotInstalledError    (also ImportError)  an optional dependency is missing
    ├── DocumentError                                 a file could not be loaded (malformed,
    │   │                                             encrypted, zip bomb)
    │   ├── OcrUnavailableError                       a scan, and no OCR engine (mxrag[ocr])
    │   └── UnsupportedFileTypeError (also KeyError)  no loader or splitter for a suffix
    ├── StorageError                                  a vector, document or graph store failed
    ├── KnowledgeError                                a knowledge-base rule was broken (unknown
    │                                                 knowledge base, not an admin, duplicate file)
    ├── RetrievalError                                a document source (CoRAG, the retrieval
    │                                                 API) could not answer; the cause is chained
    └── RemoteError                                   a model or retrieval service failed
        ├── RemoteConnectionError                     could not connect (after retries)
        ├── RemoteTimeoutError    (also TimeoutError) a timeout or the total deadline ran out
        ├── RemoteStatusError                         the server answered a non-2xx status
        └── RemoteResponseError                       the answer is malformed, too large, an
            │                                         error event, or cut off mid-way
            └── ResponseTooLargeError

Every error says what failed, the value involved, and, where there is one, the fix.
"""

from __future__ import annotations

__all__ = [
    "DocumentError",
    "ExtraNotInstalledError",
    "KnowledgeConflict",
    "KnowledgeError",
    "KnowledgeNotFound",
    "MxRagError",
    "OcrUnavailableError",
    "ParameterError",
    "PermissionDenied",
    "RemoteConnectionError",
    "RemoteError",
    "RemoteResponseError",
    "RemoteStatusError",
    "RemoteTimeoutError",
    "ResponseTooLargeError",
    "RetrievalError",
    "StorageError",
    "UnsupportedFileTypeError",
]

BODY_EXCERPT_CHARS = 500


class MxRagError(Exception):
    """Root of every error raised by mx_rag."""


class ParameterError(MxRagError, ValueError):
    """An argument is invalid; the message names the parameter, the value and the allowed range."""


class ExtraNotInstalledError(MxRagError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"this feature needs the Python module {module!r}, which is not installed: "
            f'run pip install "mxrag[{extra}]"'
        )
        self.module = module
        self.extra = extra


class DocumentError(MxRagError):
    """A file could not be turned into documents; nothing was stored."""


class OcrUnavailableError(DocumentError):
    """A file has text only in images (a scan) and the OCR engine is not installed (``mxrag[ocr]``)."""


class UnsupportedFileTypeError(DocumentError, KeyError):
    """No loader or splitter is registered for a file suffix."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class StorageError(MxRagError):
    """A store (vector index, database, graph file) failed or was found inconsistent."""


class KnowledgeError(MxRagError):
    """A knowledge-base operation was refused (unknown base, missing role, duplicate document)."""


class KnowledgeNotFound(KnowledgeError):
    """No such knowledge base (for this user), document, job or graph entity."""


class KnowledgeConflict(KnowledgeError):
    """A name or document is already taken (another user's knowledge base, a stored document)."""


class PermissionDenied(KnowledgeError):
    """The user lacks the role the operation needs (only a knowledge base's admins may change it)."""


class RetrievalError(MxRagError):
    """A document source could not answer: its retriever, store or retrieval API failed.

    The message names the failure (``"<ErrorType>: <message>"`` for a wrapped error, never the
    query or a response body); the original exception is chained as ``__cause__``.
    """


class RemoteError(MxRagError):
    """A remote service (LLM, embedding, reranker, retrieval API) failed.

    Attributes:
        url: the URL that was called.
    """

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(f"{message} (url: {url})" if url else message)
        self.url = url


class RemoteConnectionError(RemoteError):
    """The connection could not be made (refused, DNS, TLS handshake), after any retries."""


class RemoteTimeoutError(RemoteError, TimeoutError):
    """A connect or read timeout, or the total deadline of the call, ran out."""


class RemoteStatusError(RemoteError):
    """The server answered with a non-success HTTP status.

    Attributes:
        status_code: the HTTP status.
        body: the first characters of the response body.
    """

    def __init__(self, status_code: int, body: str, *, url: str = "") -> None:
        self.status_code = status_code
        self.body = body[:BODY_EXCERPT_CHARS]
        super().__init__(f"HTTP {status_code}: {self.body or '<empty body>'}", url=url)


class RemoteResponseError(RemoteError):
    """The response could not be used: malformed JSON, an error event, or a stream cut mid-way."""


class ResponseTooLargeError(RemoteResponseError):
    """The response exceeded ``ClientParam.response_limit_size``."""
