"""Read timeouts, connect timeouts and the total deadline, for every HTTP client of the SDK.

Expected behaviour (mx_rag/utils/http.py module doc):

* a server that accepts the request and never answers, or sends the head then stalls:
  ``RemoteTimeoutError`` after ``timeout``; a read timeout is not retried (the server may still
  be working), so the server sees exactly one request;
* a connection that cannot be made in ``connect_timeout`` (TLS handshake never answered, or a
  full accept queue): ``RemoteTimeoutError``, retried ``retries`` times;
* ``deadline`` bounds the whole call, retries included: shorter timeouts, no retry that cannot
  finish in time.
"""

from __future__ import annotations

import logging
import time

import httpx
import pytest
from net_helpers import CLIENTS, RAISING, STREAMING, SilentListener, eventually, failure, ok_reply, param

from mx_rag.errors import RemoteConnectionError, RemoteTimeoutError
from mx_rag.llm import Text2TextLLM
from mx_rag.testing import Reply, ScriptedServer
from mx_rag.testing.scripted_server import Fault


@pytest.mark.parametrize("name", list(CLIENTS))
def test_server_that_never_answers_times_out_once(
    server: ScriptedServer, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(Fault.hang())
    error = failure(name, server.base_url, param(timeout=0.15, retries=2), caplog)
    if error is not None:
        assert isinstance(error, RemoteTimeoutError)
        assert "timed out waiting for the response" in str(error)
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize("name", list(CLIENTS))
def test_head_then_stall_times_out(server: ScriptedServer, name: str, caplog: pytest.LogCaptureFixture) -> None:
    # a JSON answer: the head and 3 body bytes; a stream: the head, the role chunk and "o"
    server.enqueue(Fault.hang(ok_reply(name), after=2 if name in STREAMING else 3))
    error = failure(name, server.base_url, param(timeout=0.15, retries=2), caplog)
    if error is not None:
        assert isinstance(error, RemoteTimeoutError)
        assert "reading the response timed out" in str(error)
    assert len(server.requests) == 1


def test_stream_stall_keeps_what_arrived_and_raises(server: ScriptedServer) -> None:
    server.enqueue(Fault.hang(Reply.stream(["The ", "answer ", "is"]), after=3))
    llm = Text2TextLLM(base_url=server.url("/v1/chat/completions"), model_name="m",
                       client_param=param(timeout=0.2))
    seen = []
    with pytest.raises(RemoteTimeoutError, match="timed out"):
        for text in llm.chat_streamly("q"):
            seen.append(text)
    assert seen == ["The ", "The answer "]


@pytest.mark.parametrize("name", ["chat_streamly", "embed"])
def test_unanswered_tls_handshake_is_a_connect_timeout_and_is_retried(
    silent: SilentListener, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    base = f"https://127.0.0.1:{silent.port}"
    error = failure(name, base, param(use_http=False, connect_timeout=0.15, timeout=5, retries=1), caplog)
    assert isinstance(error, RemoteTimeoutError)
    assert "timed out connecting" in str(error)
    assert eventually(lambda: len(silent.accepted) == 2)  # the first attempt and one retry


def test_connect_timeout_defaults_to_timeout(silent: SilentListener, caplog: pytest.LogCaptureFixture) -> None:
    base = f"https://127.0.0.1:{silent.port}"
    error = failure("chat", base, param(use_http=False, timeout=0.15, retries=0), caplog)
    assert isinstance(error, RemoteTimeoutError) and "connecting" in str(error)
    assert eventually(lambda: len(silent.accepted) == 1)


def test_full_accept_queue_is_a_connect_timeout(full_backlog: int, caplog: pytest.LogCaptureFixture) -> None:
    base = f"http://127.0.0.1:{full_backlog}"
    with caplog.at_level(logging.INFO, logger="mx_rag.utils.http"):
        error = failure("embed", base, param(connect_timeout=0.15, retries=1), caplog)
    assert isinstance(error, RemoteTimeoutError) and "timed out connecting" in str(error)
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 1


def test_deadline_bounds_connect_retries(silent: SilentListener, caplog: pytest.LogCaptureFixture) -> None:
    # without the deadline: 11 attempts of 0.15 s and 0.1 * (2**10 - 1) s of backoff (capped at 30 s each)
    base = f"https://127.0.0.1:{silent.port}"
    started = time.monotonic()
    error = failure("chat_streamly", base, param(use_http=False, connect_timeout=0.15, retries=10, backoff=0.1,
                                                 deadline=0.6), caplog)
    assert time.monotonic() - started < 8.0
    assert isinstance(error, RemoteTimeoutError) and "deadline" in str(error)
    # the cause: the last attempt's connect timeout (ours after a retry, httpx's when the deadline cut it short)
    assert isinstance(error.__cause__, (RemoteTimeoutError, httpx.ConnectTimeout))
    assert 1 <= len(silent.accepted) <= 6


@pytest.mark.parametrize("name", ["chat", "embed"])
def test_deadline_cuts_a_long_read_timeout(server: ScriptedServer, name: str, caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(Fault.hang())
    started = time.monotonic()
    error = failure(name, server.base_url, param(timeout=60, deadline=0.3), caplog)
    assert time.monotonic() - started < 10.0  # instead of the 60 s read timeout
    assert isinstance(error, RemoteTimeoutError) and "deadline" in str(error)


def test_deadline_bounds_a_stalled_stream_body(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(Fault.hang(Reply.stream(["a", "b"]), after=2))
    started = time.monotonic()
    error = failure("stream", server.base_url, param(timeout=60, deadline=0.3), caplog)
    assert time.monotonic() - started < 10.0
    assert isinstance(error, RemoteTimeoutError) and "deadline" in str(error)


@pytest.mark.parametrize("name", RAISING)
def test_deadline_bounds_retries_of_resets(server: ScriptedServer, name: str, caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(*[Fault.reset()] * 12)
    started = time.monotonic()
    error = failure(name, server.base_url, param(retries=10, backoff=0.05, deadline=0.3), caplog)
    assert time.monotonic() - started < 8.0  # 0.05 * (2**10 - 1) s of backoff without the deadline
    assert isinstance(error, RemoteTimeoutError) and "deadline" in str(error)
    assert isinstance(error.__cause__, RemoteConnectionError)
    assert 1 <= len(server.requests) <= 6
