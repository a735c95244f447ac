# SPDX-License-Identifier: Apache-2.0
"""The failure policy of ``HttpClient`` (described in the module doc of ``mx_rag.utils.http``):
which failures are retried, how long ``Retry-After`` asks to wait, and which ``RemoteError`` each
transport failure becomes, with its one-line message."""

from __future__ import annotations

import email.utils
import math
import ssl
from datetime import datetime, timezone

import httpx

from mx_rag.errors import RemoteConnectionError, RemoteResponseError, RemoteTimeoutError

__all__ = ["MAX_BACKOFF", "MESSAGE_EXCERPT_CHARS", "RETRY_STATUSES", "parse_retry_after"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF = 30.0
MESSAGE_EXCERPT_CHARS = 200

# Transport failures that mean "the server did not answer": retried (TLS failures excepted).
_RETRIED_TRANSPORT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadError, httpx.WriteError,
                      httpx.RemoteProtocolError)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date.

    None when absent or unreadable; a date in the past is 0.

    Example:
        >>> parse_retry_after("2"), parse_retry_after("soon")
        (2.0, None)
        >>> parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT",
        ...                   now=datetime(2015, 10, 21, 7, 28, tzinfo=timezone.utc))
        10.0
    """
    text = (value or "").strip()
    if not text:
        return None
    if text.isascii() and text.replace(".", "", 1).isdigit():
        seconds = float(text)
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(text.split())


def _describe(exc: BaseException) -> str:
    """A one-line description of a transport exception: its type and, shortened, its text."""
    text = _one_line(str(exc))
    if len(text) > MESSAGE_EXCERPT_CHARS:
        text = text[:MESSAGE_EXCERPT_CHARS] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc`` (certificate, host name, alert), if any; a bare TLS EOF is not one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLError) and not isinstance(current, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return current
        current = current.__cause__ or current.__context__
    return None


def _is_cut(exc: RemoteResponseError) -> bool:
    """Whether ``exc`` is a body broken off by the network (not a malformed or too large one)."""
    return isinstance(exc.__cause__, _RETRIED_TRANSPORT) and _tls_failure(exc.__cause__) is None


def _transport_error(exc: httpx.TransportError, url: str) -> RemoteConnectionError | RemoteTimeoutError:
    """Our error for an httpx transport failure, with ``exc`` as its ``__cause__``."""
    error: RemoteConnectionError | RemoteTimeoutError
    if isinstance(exc, httpx.TimeoutException):
        phase = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for the response"
        if isinstance(exc, httpx.PoolTimeout):
            phase = "waiting for a free pooled connection"
        error = RemoteTimeoutError(f"timed out {phase}: {_describe(exc)}", url=url)
    elif _tls_failure(exc) is not None:
        error = RemoteConnectionError(f"TLS failed: {_describe(exc)}", url=url)
    else:
        error = RemoteConnectionError(f"connection failed: {_describe(exc)}", url=url)
    error.__cause__ = exc
    return error
