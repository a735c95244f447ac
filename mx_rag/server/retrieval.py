# SPDX-License-Identifier: Apache-2.0
"""The retrieval API that CoRAG's ``retrieve_api_url`` expects, served with FastAPI.

``POST /retrieve`` takes ``{"query": str (1 to 1,000,000 chars), "top_k": int}`` (``top_k``
optional; extra keys such as the original SDK's ``"stream": false`` are ignored) and answers
format 1 of the original documentation::

    {"document_ids": ["3f1c0a9b2d4e5f60", ...], "documents": ["chunk text", ...]}

A malformed body gets 422 (FastAPI's error list, without the offending values), a body
over 16 MiB 413, and a failing retriever 500 (its error is logged, not sent).
``GET /health`` answers ``{"status": "ok"}``.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the endpoint annotations at
# runtime, and the request model is built per app (its ``top_k`` bounds are the app's).

import logging
import os
import socket
import threading
import time
from types import TracebackType
from typing import Any

from mx_rag.corag.retrieval_api import RetrieverSource
from mx_rag.corag.types import DocumentSource
from mx_rag.errors import ExtraNotInstalledError, MxRagError, ParameterError
from mx_rag.utils.checks import check_int, check_number, check_str, fail
from mx_rag.utils.common import MAX_TOP_K, MB, TEXT_MAX_LEN

try:
    from fastapi import FastAPI, HTTPException, Request, Response
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ExtraNotInstalledError(exc.name or "fastapi", "server") from exc

from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

__all__ = ["MAX_BODY_BYTES", "RetrievalServer", "RetrieveResponse", "create_retrieval_app"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * MB
_ERROR_CHARS = 300


class RetrieveResponse(BaseModel):
    """The answer of ``POST /retrieve`` (format 1): parallel lists of ids and texts."""

    document_ids: list[str]
    documents: list[str]


def _request_model(max_top_k: int, default_top_k: int) -> type[BaseModel]:
    class RetrieveRequest(BaseModel):
        """The body of ``POST /retrieve``."""

        model_config = ConfigDict(extra="ignore")

        query: StrictStr = Field(min_length=1, max_length=TEXT_MAX_LEN)
        top_k: StrictInt = Field(default=default_top_k, ge=1, le=max_top_k)

    return RetrieveRequest


def create_retrieval_app(
    source: DocumentSource | BaseRetriever,
    *,
    max_top_k: int = 100,
    default_top_k: int = 5,
) -> FastAPI:
    """A FastAPI app serving ``POST /retrieve`` and ``GET /health`` over ``source``.

    Args:
        source: a LangChain ``BaseRetriever`` (e.g. ``LocalKnowledge.retriever()``), or any
            ``DocumentSource``. A URL is refused (this app is not a proxy).
        max_top_k: largest ``top_k`` a request may ask for (larger gets 422), in [1, 10000].
        default_top_k: ``top_k`` of a request without one, in [1, max_top_k].

    The endpoint is synchronous: FastAPI runs each request in its worker threads, so the source
    must be thread-safe (``Retriever`` over ``MindFAISS`` and ``SQLiteDocstore`` is).

    Example:
        >>> from mx_rag.server import create_retrieval_app                       # doctest: +SKIP
        >>> app = create_retrieval_app(kb.retriever(k=5), max_top_k=50)            # doctest: +SKIP
        >>> # uvicorn.run(app, host="127.0.0.1", port=8000), or RetrievalServer(app)
    """
    check_int("max_top_k", max_top_k, 1, MAX_TOP_K)
    check_int("default_top_k", default_top_k, 1, max_top_k)
    search = _search_function(source)
    body_model: Any = _request_model(max_top_k, default_top_k)

    app = FastAPI(title="mx_rag retrieval API", version="1", docs_url=None, redoc_url=None)

    @app.middleware("http")
    async def _limit_body(request: Request, call_next: Any) -> Response:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return JSONResponse({"detail": f"request body over {MAX_BODY_BYTES} bytes"}, status_code=413)
        response: Response = await call_next(request)
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default echoes each bad value ("input"), up to a megabyte of query back
        errors = [{k: e[k] for k in ("type", "loc", "msg") if k in e} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.post("/retrieve", response_model=RetrieveResponse)
    def retrieve(body: body_model) -> RetrieveResponse:
        try:
            docs = search(body.query, body.top_k)
        except ParameterError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        except Exception as exc:
            text = str(exc)[:_ERROR_CHARS]
            logger.warning("retrieval failed: %s: %s", type(exc).__name__, text)
            raise HTTPException(status_code=500, detail=f"retrieval failed ({type(exc).__name__})") from exc
        return RetrieveResponse(document_ids=[d.id for d in docs], documents=[d.text for d in docs])

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _search_function(source: Any) -> Any:
    """``(query, top_k) -> list[RetrievedDocument]``; a retriever's errors propagate (500)."""
    if isinstance(source, BaseRetriever):
        strict = RetrieverSource(source)
        return strict.retrieve_strict
    if isinstance(source, RetrieverSource):
        return source.retrieve_strict
    if not isinstance(source, str) and isinstance(source, DocumentSource):
        return source.retrieve
    raise fail("source", source, "a LangChain BaseRetriever or a DocumentSource (not a URL)")


class RetrievalServer:
    """Runs an ASGI app (normally ``create_retrieval_app(...)``) with uvicorn in a daemon thread.

    Args:
        app: the ASGI application; may be set later (``server.app = ...``), before ``start()``.
        host: address to listen on. Default 127.0.0.1 (this machine only).
        port: TCP port; 0 picks a free one (read it back from ``port`` or ``url``).
        startup_timeout: seconds ``start()`` waits for the server to accept connections.

    ``bind()`` reserves the address (a busy port fails there, with a clear error, before any
    slow setup such as ingesting documents); connections made between ``bind()`` and
    ``start()`` wait in the listen queue and are answered once serving. ``start()`` binds if
    needed and serves. uvicorn
    touches neither the logging configuration nor the signal handlers of the process (it runs
    outside the main thread); stop it with ``stop()`` or by leaving the ``with`` block.

    Example:
        >>> with RetrievalServer(create_retrieval_app(retriever)) as srv:           # doctest: +SKIP
        ...     api = RetrievalApiClient(srv.url, client_param=ClientParam(use_http=True))
        ...     api.retrieve("Who founded YouTube?", top_k=3)
    """

    def __init__(
        self, app: Any = None, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0
    ) -> None:
        self.app = app
        self.host = check_str("host", host, 1, 255)
        self.port = check_int("port", port, 0, 65535)
        self.startup_timeout = check_number("startup_timeout", startup_timeout, 0, 600, low_open=True)
        self._socket: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (IPv6 hosts in brackets), once bound."""
        if self._server is None and self._socket is None:
            raise RuntimeError("RetrievalServer is not bound: call bind() or start()")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The retrieve endpoint, ``base_url + "/retrieve"`` (what CoRAG's retrieve_api_url takes)."""
        return self.base_url + "/retrieve"

    def bind(self) -> "RetrievalServer":
        """Reserve ``host:port`` now (connections queue until ``start()``); idempotent.

        Raises:
            MxRagError: the address could not be bound (busy port, unknown host, no permission).
        """
        if self._socket is None and self._server is None:
            self._socket = _bind(self.host, self.port)
            self.port = int(self._socket.getsockname()[1])
        return self

    def start(self) -> "RetrievalServer":
        """Bind if needed, serve in a daemon thread, and return once connections are accepted.

        Raises:
            ParameterError: no ``app`` was given.
            MxRagError: the address could not be bound, or the server did not start in time.
        """
        if self._server is not None:
            return self
        if self.app is None:
            raise ParameterError("RetrievalServer.app must be set before start()")
        try:
            import uvicorn
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ExtraNotInstalledError(exc.name or "uvicorn", "server") from exc
        self.bind()
        sock, self._socket = self._socket, None
        config = uvicorn.Config(
            self.app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=5
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"RetrievalServer:{self.port}", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                if sock is not None:
                    sock.close()
                raise MxRagError(f"the retrieval server on {self.host}:{self.port} did not start (see the log)")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop accepting, finish open requests (at most 5 s), join the thread, release the
        address; idempotent."""
        sock, server, thread = self._socket, self._server, self._thread
        self._socket = self._server = self._thread = None
        if sock is not None:
            sock.close()
        if server is None:
            return
        server.should_exit = True
        if thread is not None:
            thread.join(timeout=15)

    def wait(self, stop: threading.Event, poll: float = 0.5) -> None:
        """Block until ``stop`` is set or the server thread ends."""
        while not stop.wait(poll):
            if self._thread is None or not self._thread.is_alive():
                return

    def __enter__(self) -> "RetrievalServer":
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise MxRagError(f"cannot listen on {host}:{port}: {exc}") from exc
    try:
        if os.name != "nt":  # on Windows SO_REUSEADDR would let two servers share a port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)  # without listen(), Linux lets another SO_REUSEADDR socket bind the same port
    except OSError as exc:
        sock.close()
        raise MxRagError(f"cannot listen on {host}:{port}: {exc}") from exc
    return sock

