# SPDX-License-Identifier: Apache-2.0
"""``AppServer``: runs any ASGI app (the retrieval API, ``mxrag serve``'s app) with uvicorn in a
daemon thread of this process, on an address reserved up front."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from mx_rag.errors import MxRagError, ParameterError
from mx_rag.utils.checks import check_int, check_number, check_str
from mx_rag.utils.lazy import extra_import
from mx_rag.utils.lifecycle import Startable

__all__ = ["AppServer", "bind_socket"]


class AppServer(Startable):
    """Runs an ASGI app with uvicorn in a daemon thread.

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
            raise RuntimeError("AppServer is not bound: call bind() or start()")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The retrieve endpoint, ``base_url + "/retrieve"`` (what CoRAG's retrieve_api_url takes)."""
        return self.base_url + "/retrieve"

    def bind(self) -> AppServer:
        """Reserve ``host:port`` now (connections queue until ``start()``); idempotent.

        Raises:
            MxRagError: the address could not be bound (busy port, unknown host, no permission).
        """
        if self._socket is None and self._server is None:
            self._socket = bind_socket(self.host, self.port)
            self.port = int(self._socket.getsockname()[1])
        return self

    def start(self) -> AppServer:
        """Bind if needed, serve in a daemon thread, and return once connections are accepted.

        Raises:
            ParameterError: no ``app`` was given.
            MxRagError: the address could not be bound, or the server did not start in time.
        """
        if self._server is not None:
            return self
        if self.app is None:
            raise ParameterError("AppServer.app must be set before start()")
        with extra_import("server", "uvicorn"):
            import uvicorn
        self.bind()
        sock, self._socket = self._socket, None
        from mx_rag.server.slow_clients import HeaderTimeoutH11

        config = uvicorn.Config(
            self.app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=5,
            http=HeaderTimeoutH11,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"AppServer:{self.port}", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                if sock is not None:
                    sock.close()
                raise MxRagError(f"the server on {self.host}:{self.port} did not start (see the log)")
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



def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (MxRagError naming the address if it cannot be had)."""
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

