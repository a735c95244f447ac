# SPDX-License-Identifier: Apache-2.0
"""A scripted OpenAI-compatible HTTP(S) server for tests, built on the standard library only."""

from __future__ import annotations

import contextlib
import dataclasses
import json as _json
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from mx_rag.testing.faults import Fault
from mx_rag.testing.replies import Reply, default_reply
from mx_rag.utils.lifecycle import Startable

__all__ = ["Fault", "RecordedRequest", "ScriptedServer"]

_MAX_LINE = 65536
_FLOOD_BLOCK = b"x" * 65536


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (``headers`` keys are lower-cased).

    ``path`` is the raw request target, query string included. ``json`` is the parsed body or None.
    ``client_cert`` is ``getpeercert()`` when TLS asked for and got a client certificate::

        assert srv.requests[0].json["stream"] is False
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test"
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    client_cert: dict[str, Any] | None = None


def _parse_json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return _json.loads(body)
    except ValueError:
        return None


def _reason(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10.0)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # client went away (reset, broken pipe, TLS EOF): not worth a traceback
            self.close_connection = True

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    # -- request -------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline(_MAX_LINE).split(b";", 1)[0].strip(), 16)
                if size == 0:
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(_MAX_LINE)
            while self.rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError(f"negative Content-Length {length}")
        return self.rfile.read(length) if length else b""

    def _peer_cert(self) -> dict[str, Any] | None:
        conn = self.connection
        if not isinstance(conn, ssl.SSLSocket) or conn.context.verify_mode == ssl.CERT_NONE:
            return None
        return cast("dict[str, Any] | None", conn.getpeercert() or None)

    def _serve(self) -> None:
        try:
            body = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._write(Reply.status(400, {"error": {"message": f"bad request body: {exc}", "code": 400}}))
            return
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        parsed = _parse_json(body)
        record = RecordedRequest(self.command, self.path, headers, body, parsed, self._peer_cert())
        reply = self.server.owner._take(record)
        try:
            if reply is None and self.server.owner.responder is not None:
                reply = self.server.owner.responder(record)
            if reply is None:
                reply = default_reply(self.command, self.path, parsed)
                if self.server.owner.default_delay > 0:
                    reply = dataclasses.replace(reply, delay=self.server.owner.default_delay)
            self._write(reply)
        except Exception:
            self.close_connection = True
            raise

    # -- response ------------------------------------------------------------------------------

    def _write(self, reply: Reply) -> None:
        if reply.delay > 0:
            time.sleep(reply.delay)
        if reply.close_without_reply:
            self.close_connection = True
            return
        fault = reply if isinstance(reply, Fault) else None
        if fault is not None and not fault.send_head:
            self._break(fault)
            return
        lines = [f"HTTP/1.1 {reply.code} {_reason(reply.code)}", f"Date: {self.date_time_string()}",
                 "Server: mx-rag-scripted"]
        lines += [f"{name}: {value}" for name, value in reply.headers]
        if self.close_connection:
            lines.append("Connection: close")
        if fault is not None and fault.flood_size is not None:
            self._flood(lines, fault.flood_size, chunked=reply.chunks is not None)
            return
        if reply.chunks is None:
            has_body = reply.code >= 200 and reply.code not in (204, 304)
            if has_body:
                lines.append(f"Content-Length: {len(reply.body)}")
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
            if fault is not None:
                self.wfile.write(head + reply.body[: fault.after])
                self._break(fault)
                return
            self.wfile.write(head + reply.body if has_body else head)
            return
        lines.append("Transfer-Encoding: chunked")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        for index, chunk in enumerate(reply.chunks):
            if fault is not None and index >= fault.after:
                break
            if index and reply.chunk_delay > 0:
                time.sleep(reply.chunk_delay)
            if reply.cut_after is not None and index >= reply.cut_after:
                self._cut()
                return
            if chunk:
                self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
        if fault is not None:
            self._break(fault)
            return
        if reply.cut_after is not None:
            self._cut()
            return
        self.wfile.write(b"0\r\n\r\n")

    def _flood(self, lines: list[str], size: int, *, chunked: bool) -> None:
        lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        left = size
        while left > 0:  # an OSError (the client gave up) ends the handler quietly
            block = _FLOOD_BLOCK[: min(left, len(_FLOOD_BLOCK))]
            self.wfile.write(b"%x\r\n%b\r\n" % (len(block), block) if chunked else block)
            left -= len(block)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def _break(self, fault: Fault) -> None:
        self.close_connection = True
        if fault.then == "reset":
            self._reset()
        else:
            self.server.stopping.wait(fault.hold)

    def _cut(self) -> None:
        """Close the connection mid-body: no terminating chunk (and no TLS close_notify)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.connection, socket.SHUT_WR)

    def _reset(self) -> None:
        """Close the socket with SO_LINGER 0, so the kernel sends RST instead of FIN."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.rfile.close()  # the socket really closes only once no makefile() uses it
        with contextlib.suppress(OSError):
            self.connection.close()  # SSLSocket.close sends no close_notify either


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's listen backlog of 5 overflows when 16 client threads connect at once on a busy
    # machine, and the kernel then resets connections ("Connection reset by peer").
    request_queue_size = 128

    def __init__(
        self, host: str, port: int, owner: ScriptedServer, ssl_context: ssl.SSLContext | None
    ) -> None:
        self.owner = owner
        self.ssl_context = ssl_context
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.stopping = threading.Event()  # wakes handlers held by Fault.hang
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # skip HTTPServer's getfqdn(): a slow DNS lookup
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)

    def server_activate(self) -> None:
        super().server_activate()
        if self.ssl_context is not None:  # handshakes happen in the handler threads, not in accept()
            self.socket = self.ssl_context.wrap_socket(self.socket, server_side=True,
                                                       do_handshake_on_connect=False)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        self.owner._count_connection()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # disconnects and failed TLS handshakes
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.connections_lock:
            open_connections = list(self.connections)
        for conn in open_connections:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(conn, socket.SHUT_RDWR)


class ScriptedServer(Startable):
    """An OpenAI-compatible HTTP(S) server on 127.0.0.1 that answers from a FIFO of scripted replies.

    Each request consumes one queued :class:`Reply` (or :class:`Fault`, which breaks the
    connection); with the queue empty it echoes chat completions and serves ``/models``,
    ``text2img`` and ``img2img`` defaults::

        with ScriptedServer() as srv:
            srv.enqueue(Reply.chat("hi"), Reply.status(500))
            httpx.post(srv.url("/v1/chat/completions"), json={"messages": []})
            assert srv.requests[0].method == "POST"

    ``default_delay`` (seconds, default 0) makes every default reply (one sent with the queue
    empty) wait that long before it is sent, as queued replies do with their own ``delay``: a
    stand-in for an LLM of fixed latency under load (``bench/server.py``)::

        with ScriptedServer(default_delay=0.2) as srv:  # every echo answers after 200 ms
            ...

    ``responder`` (optional) answers a request when the queue is empty, from the request itself
    (None: the default reply): a stand-in LLM whose answer depends on the prompt, for code that
    sends many requests concurrently::

        def answer(req: RecordedRequest) -> Reply | None:
            return Reply.chat("0.9") if "score" in req.json["messages"][-1]["content"] else None
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None,
        *, default_delay: float = 0.0, responder: Callable[[RecordedRequest], Reply | None] | None = None,
    ) -> None:
        if not default_delay >= 0:
            raise ValueError(f"default_delay must be >= 0 seconds, got {default_delay}")
        self.default_delay = float(default_delay)
        self.responder = responder
        self._host = host
        self._port = port
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._lifecycle = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._connection_count = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind and serve in a daemon thread; a restart after stop() reuses the same port."""
        with self._lifecycle:
            if self._server is not None:
                return self
            server = _Server(self._host, self._port, self, self._ssl_context)
            self._port = server.server_port
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                                      name=f"ScriptedServer:{self._port}", daemon=True)
            thread.start()
            self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving, close the listening socket and open connections; idempotent."""
        with self._lifecycle:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        server.stopping.set()
        server.shutdown()
        server.server_close()
        server.close_connections()
        if thread is not None:
            thread.join(timeout=5)


    # -- addresses -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https://`` with an SSL context)."""
        if self._port == 0:
            raise RuntimeError("ScriptedServer is not started: call start() or use it as a context manager")
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://{host}:{self._port}"

    def url(self, path: str) -> str:
        """``base_url`` + ``path``."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- script and record ---------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the FIFO; each incoming request consumes one."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"enqueue() takes Reply objects, got {type(reply).__name__}")
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """The recorded requests in arrival order (the live list, appended to under a lock)."""
        return self._requests

    @property
    def pending(self) -> int:
        """How many queued replies are not consumed yet."""
        with self._lock:
            return len(self._queue)

    @property
    def connection_count(self) -> int:
        """TCP connections accepted so far, failed TLS handshakes included (0 after ``reset()``)."""
        with self._lock:
            return self._connection_count

    def reset(self) -> None:
        """Clear the reply queue, the recorded requests and the connection count."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._connection_count = 0

    def _count_connection(self) -> None:
        with self._lock:
            self._connection_count += 1

    def _take(self, record: RecordedRequest) -> Reply | None:
        with self._lock:
            self._requests.append(record)
            return self._queue.popleft() if self._queue else None
