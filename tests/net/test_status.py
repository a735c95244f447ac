"""HTTP statuses, Retry-After and the error contract, for every HTTP client.

Expected behaviour (mx_rag/utils/http.py module doc): 429, 500, 502, 503 and 504 are retried
``retries`` times with ``backoff * 2**attempt`` between tries, or the server's ``Retry-After``
(seconds or an HTTP date); a ``Retry-After`` that would pass the deadline ends the call at once
with ``RemoteTimeoutError`` (its cause: the ``RemoteStatusError``); other statuses fail at once
with ``RemoteStatusError``. Every error is ours, its message one line naming the URL.
"""

from __future__ import annotations

import logging
import re
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from net_helpers import CLIENTS, RAISING, failure, is_ok, ok_reply, param

from mx_rag.errors import RemoteResponseError, RemoteStatusError, RemoteTimeoutError
from mx_rag.testing import Reply, ScriptedServer


def http_date(offset_seconds: float) -> str:
    return format_datetime(datetime.now(timezone.utc) + timedelta(seconds=offset_seconds), usegmt=True)


@pytest.mark.parametrize("name", list(CLIENTS))
def test_503_is_retried_with_doubling_backoff_then_fails(
    server: ScriptedServer, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(*[Reply.status(503, "overloaded")] * 4)
    with caplog.at_level(logging.INFO, logger="mx_rag.utils.http"):
        error = failure(name, server.base_url, param(retries=3, backoff=0.01), caplog)
    if error is not None:
        assert isinstance(error, RemoteStatusError) and error.status_code == 503
        assert str(error).startswith("HTTP 503: overloaded")
    assert len(server.requests) == 4
    waits = [float(m) for r in caplog.records for m in re.findall(r"in ([\d.]+) s", r.getMessage())
             if r.name == "mx_rag.utils.http"]
    assert waits == [0.01, 0.02, 0.04]


@pytest.mark.parametrize("status", [429, 500, 502, 504])
@pytest.mark.parametrize("name", ["chat", "chat_streamly", "embed"])
def test_transient_statuses_are_retried(server: ScriptedServer, name: str, status: int) -> None:
    server.enqueue(Reply.status(status), ok_reply(name))
    assert is_ok(name, CLIENTS[name](server.base_url, param(retries=1)))
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 404, 413, 501, 505])
@pytest.mark.parametrize("name", list(CLIENTS))
def test_other_statuses_are_not_retried(
    server: ScriptedServer, name: str, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(Reply.status(status, {"error": {"message": "no such thing"}}), ok_reply(name))
    error = failure(name, server.base_url, param(retries=3), caplog)
    if error is not None:
        assert isinstance(error, RemoteStatusError) and error.status_code == status
        assert "no such thing" in str(error)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", RAISING)
def test_status_message_is_one_line_and_body_is_kept(server: ScriptedServer, name: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    page = "<html>\n<body>\n  <h1>502 Bad Gateway</h1>\n</body>\n</html>\n"
    server.enqueue(Reply.status(502, page, headers={"Content-Type": "text/html"}))
    error = failure(name, server.base_url, param(retries=0), caplog)
    assert isinstance(error, RemoteStatusError)
    assert str(error) == (f"HTTP 502: <html> <body> <h1>502 Bad Gateway</h1> </body> </html> "
                          f"(url: {error.url})")
    assert error.body == page


@pytest.mark.parametrize("form", ["seconds", "past-date", "fraction"])
@pytest.mark.parametrize("name", ["chat", "chat_streamly", "rerank"])
def test_retry_after_is_honoured(server: ScriptedServer, name: str, form: str) -> None:
    # backoff=30 s could not fit in the 5 s deadline: only the honoured Retry-After lets the retry happen
    value = {"seconds": "0", "past-date": http_date(-3600), "fraction": "0.05"}[form]
    server.enqueue(Reply.status(429, headers={"Retry-After": value}), ok_reply(name))
    assert is_ok(name, CLIENTS[name](server.base_url, param(retries=1, backoff=30, deadline=5)))
    assert len(server.requests) == 2


def test_retry_after_date_in_the_near_future_is_waited_for(server: ScriptedServer) -> None:
    server.enqueue(Reply.status(503, headers={"Retry-After": http_date(1)}), ok_reply("chat"))
    assert is_ok("chat", CLIENTS["chat"](server.base_url, param(retries=1, backoff=30, deadline=8)))
    assert len(server.requests) == 2


@pytest.mark.parametrize("form", ["seconds", "date"])
@pytest.mark.parametrize("name", RAISING)
def test_huge_retry_after_is_capped_by_the_deadline(
    server: ScriptedServer, name: str, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    value = "3600" if form == "seconds" else http_date(3600)
    server.enqueue(Reply.status(429, "slow down", headers={"Retry-After": value}), ok_reply(name))
    started = time.monotonic()
    error = failure(name, server.base_url, param(retries=3, deadline=3), caplog)
    assert time.monotonic() - started < 10.0  # instead of sleeping for an hour (or 30 s)
    assert isinstance(error, RemoteTimeoutError)
    assert "gave up after HTTP 429" in str(error) and "deadline" in str(error)
    assert isinstance(error.__cause__, RemoteStatusError) and error.__cause__.status_code == 429
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", list(CLIENTS))
def test_undecodable_body_is_a_response_error(server: ScriptedServer, name: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(Reply.raw(b"this is not gzip", content_type="application/json",
                             headers={"Content-Encoding": "gzip"}))
    error = failure(name, server.base_url, param(retries=2), caplog)
    if error is not None:
        assert isinstance(error, RemoteResponseError) and "could not be decoded" in str(error)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ["chat", "embed", "rerank", "retrieve"])
def test_deeply_nested_json_is_a_response_error(server: ScriptedServer, name: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(Reply.raw(b"[" * 100_000 + b"]" * 100_000, content_type="application/json"))
    error = failure(name, server.base_url, param(), caplog)
    if error is not None:
        assert isinstance(error, RemoteResponseError) and "not valid JSON" in str(error)
