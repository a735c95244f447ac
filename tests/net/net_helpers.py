"""Shared pieces of the network-fault tests (imported by name: tests/net is on sys.path).

* ``CLIENTS``: every HTTP client of the SDK, each as a call ``(base_url, ClientParam) -> result``
  through its public API (``"stream"`` is LangChain's ``stream()``, the deltas path);
* ``param(**changes)``: a ClientParam with short timeouts; ``ok_reply``/``is_ok``: a good answer
  per client and the check of what the client made of it;
* ``failure(...)``: runs a client that must fail and checks the error contract;
* ``SilentListener``: a TCP listener that accepts and never speaks (a TLS connect timeout).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mx_rag.corag.retrieval_api import RetrievalApiClient
from mx_rag.embedding.service import TEIEmbedding
from mx_rag.errors import MxRagError, RemoteError, RetrievalError
from mx_rag.llm import Text2TextLLM
from mx_rag.reranker.service import TEIReranker
from mx_rag.testing import Reply
from mx_rag.utils import ClientParam

FAST = {"use_http": True, "timeout": 5.0, "retries": 2, "backoff": 0.0}


def param(**changes: Any) -> ClientParam:
    """A ClientParam for tests: plain http allowed, 5 s timeouts, 2 retries without backoff."""
    return ClientParam(**{**FAST, **changes})


Call = Callable[[str, ClientParam], Any]


def _chat(base: str, p: ClientParam) -> Any:
    return Text2TextLLM(base_url=base + "/v1/chat/completions", model_name="m", client_param=p).chat("q")


def _chat_streamly(base: str, p: ClientParam) -> Any:
    llm = Text2TextLLM(base_url=base + "/v1/chat/completions", model_name="m", client_param=p)
    return list(llm.chat_streamly("q"))


def _stream(base: str, p: ClientParam) -> Any:  # LangChain's stream(): the deltas path
    llm = Text2TextLLM(base_url=base + "/v1/chat/completions", model_name="m", client_param=p)
    return list(llm.stream("q"))


def _embed(base: str, p: ClientParam) -> Any:
    with TEIEmbedding(base + "/embed", client_param=p) as emb:
        return emb.embed_documents(["a", "b"])


def _rerank(base: str, p: ClientParam) -> Any:
    return TEIReranker(url=base + "/rerank", k=2, client_param=p).rerank("q", ["a", "b"])


def _retrieve(base: str, p: ClientParam) -> Any:
    with RetrievalApiClient(base + "/retrieve", client_param=p) as api:
        return api.retrieve("q", top_k=2)


CLIENTS: dict[str, Call] = {
    "chat": _chat,
    "chat_streamly": _chat_streamly,
    "stream": _stream,
    "embed": _embed,
    "rerank": _rerank,
    "retrieve": _retrieve,
}
RAISING = [name for name in CLIENTS if name != "retrieve"]  # RetrievalApiClient wraps its RemoteError
STREAMING = ["chat_streamly", "stream"]


class SilentListener:
    """A TCP listener that accepts connections and never sends a byte (counts what it accepted).

    Over ``https://`` the client's TLS handshake never completes: a connect timeout.
    """

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def ok_reply(name: str) -> Reply:
    """A good answer for client ``name``; ``is_ok(name, result)`` recognises what the client makes of it."""
    if name in ("chat_streamly", "stream"):
        return Reply.stream(["o", "k"])
    return {
        "chat": Reply.chat("ok"),
        "embed": Reply.json([[0.6, 0.8], [1.0, 0.0]]),
        "rerank": Reply.json([{"index": 0, "score": 0.9}, {"index": 1, "score": 0.1}]),
        "retrieve": Reply.json({"chunks": ["doc a", "doc b"]}),
    }[name]


def is_ok(name: str, result: Any) -> bool:
    if name == "chat":
        return bool(result == "ok")
    if name == "chat_streamly":
        return bool(result == ["o", "ok"])
    if name == "stream":
        return [getattr(chunk, "text", chunk) for chunk in result] == ["o", "k"]
    if name == "embed":
        return bool(result == [[0.6, 0.8], [1.0, 0.0]])
    if name == "rerank":
        return [round(float(x), 3) for x in result] == [0.9, 0.1]
    return [doc.text for doc in result] == ["doc a", "doc b"]


def failure(name: str, base: str, p: ClientParam, caplog: pytest.LogCaptureFixture) -> RemoteError | None:
    """Call client ``name``, which must fail the documented way, and return its error.

    Every client must raise a ``RemoteError`` (never an httpx exception) whose message is one
    line naming the URL; ``RetrievalApiClient`` raises a ``RetrievalError`` naming the URL with
    that ``RemoteError`` as its cause (which is returned).
    """
    if name == "retrieve":
        with pytest.raises(RetrievalError) as raised:
            CLIENTS[name](base, p)
        assert "\n" not in str(raised.value) and base in str(raised.value), str(raised.value)
        cause = raised.value.__cause__
        assert isinstance(cause, RemoteError), repr(cause)
        return cause
    with pytest.raises(MxRagError) as info:
        CLIENTS[name](base, p)
    error = info.value
    assert isinstance(error, RemoteError), repr(error)
    assert not isinstance(error, httpx.HTTPError)
    message = str(error)
    assert "\n" not in message and base in message, message
    return error


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether ``condition()`` becomes true within ``timeout`` seconds (for counts kept by threads)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True
