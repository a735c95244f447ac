# SPDX-License-Identifier: Apache-2.0
"""The one pooled HTTP layer under every service client.

``HttpClient`` wraps one ``httpx.Client`` per owning object: connections are kept alive and
reused across calls and threads. It adds what model services need and httpx leaves to callers:
TLS built from ``ClientParam`` (CA pinning, CRL, client certificates), a total deadline, retries
with exponential backoff on connection errors, 429 and 5xx, and response size caps that hold
whether or not the server sends ``Content-Length``.

Failure policy (every failure is an ``mx_rag.errors.RemoteError`` whose one-line message names
the URL; the httpx exception is only its ``__cause__``):

* Retried, at most ``ClientParam.retries`` times: connection failures (refused, reset, closed
  without a response, connect timeout) and HTTP 429, 500, 502, 503 and 504; for ``post_json``
  also a body cut off mid-way. The wait is ``backoff * 2**attempt`` seconds, or the server's
  ``Retry-After`` (seconds or an HTTP date), each at most 30 s.
* Not retried: read timeouts (the server may still be working on the request), TLS failures
  (certificate, host name, revocation, client certificate refused: a retry fails the same way),
  other statuses (400, 401, 404, 501...) and oversized bodies; a stream once it has started.
* ``ClientParam.deadline`` bounds the whole call: each attempt's connect and read timeouts are
  cut to the time left, it is checked between body chunks, and a retry whose wait (backoff or
  ``Retry-After``) would pass it ends the call at once with ``RemoteTimeoutError`` instead of
  sleeping. A call can outlast the deadline by at most one read (itself cut to the time left
  when the attempt began).
* Status errors are ``RemoteStatusError`` (``status_code``, ``body``: the first 500 characters);
  timeouts ``RemoteTimeoutError``; refused, reset and TLS failures ``RemoteConnectionError``; a
  body cut off, undecodable or malformed ``RemoteResponseError``; a body, streamed line or
  streamed event over ``response_limit_size`` ``ResponseTooLargeError``, raised as soon as the
  excess is seen (a too large ``Content-Length`` before any of the body is read).
* Bodies are asked for as gzip or deflate (unless ``ClientParam.headers`` sets its own
  Accept-Encoding) and decoded 64 KiB at a time, so the size cap also holds against a
  compression bomb; an encoding that was not asked for is a ``RemoteResponseError``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from mx_rag.errors import (
    BODY_EXCERPT_CHARS,
    ParameterError,
    RemoteError,
    RemoteResponseError,
    RemoteStatusError,
    RemoteTimeoutError,
    ResponseTooLargeError,
)
from mx_rag.utils import bounded_json
from mx_rag.utils._http_body import DECODED_PIECE, _BoundedDecoder, split_lines
from mx_rag.utils._http_policy import (
    _RETRIED_TRANSPORT,
    MAX_BACKOFF,
    MESSAGE_EXCERPT_CHARS,
    RETRY_STATUSES,
    _describe,
    _is_cut,
    _one_line,
    _tls_failure,
    _transport_error,
    parse_retry_after,
)
from mx_rag.utils._http_tls import build_ssl_context
from mx_rag.utils.checks import check_str, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import MAX_URL_LENGTH
from mx_rag.utils.lifecycle import Closable

# the names this module has always offered, some of them now defined in its private siblings
__all__ = [
    "DECODED_PIECE",
    "MAX_BACKOFF",
    "MESSAGE_EXCERPT_CHARS",
    "RETRY_STATUSES",
    "HttpClient",
    "HttpResponse",
    "build_ssl_context",
    "check_url",
    "parse_retry_after",
    "split_lines",
]

logger = logging.getLogger(__name__)

ERROR_BODY_BYTES = 4096


@dataclass(frozen=True)
class HttpResponse:
    """A fully read response body (within the size cap)."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    url: str

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The parsed body; ``RemoteResponseError`` when it is not JSON (or nested too deeply)."""
        try:
            return bounded_json.loads(self.content)
        except ValueError as exc:
            excerpt = self.text[:MESSAGE_EXCERPT_CHARS]
            raise RemoteResponseError(f"response is not valid JSON: {excerpt!r}", url=self.url) from exc


def check_url(name: str, url: Any, param: ClientParam) -> str:
    """Check a service URL against ``param``: http only when ``use_http``; https always allowed."""
    check_str(name, url, 1, MAX_URL_LENGTH)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise fail(name, url, "an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise fail(name, url, "a URL without user:password (use ClientParam.api_key or headers)")
    if parts.scheme == "http" and not param.use_http:
        raise ParameterError(
            f"{name} {url!r} uses plain http, but ClientParam.use_http is False: "
            "pass ClientParam(use_http=True) or use an https:// URL"
        )
    return url


class _Call:
    """One call: its deadline, its attempts, and the waits between them."""

    def __init__(self, param: ClientParam, url: str) -> None:
        self.param = param
        self.url = url
        self.end = None if param.deadline is None else time.monotonic() + param.deadline
        self.attempt = 0
        self.last: tuple[RemoteError, str] | None = None  # the failure that led to the current retry

    def remaining(self) -> float | None:
        """Seconds left before the deadline; ``RemoteTimeoutError`` when it has passed."""
        if self.end is None:
            return None
        left = self.end - time.monotonic()
        if left <= 0:
            after = f" in attempt {self.attempt + 1} (the one before failed with {self.last[1]})" if self.last else ""
            error = RemoteTimeoutError(
                f"the total deadline (ClientParam.deadline={self.param.deadline:g} s) ran out{after}", url=self.url
            )
            raise error from (self.last[0] if self.last else None)
        return left

    def deadline_error(self, exc: httpx.TransportError) -> RemoteTimeoutError | None:
        """The deadline's error when ``exc`` is a timeout that was cut short by it, else None."""
        if not isinstance(exc, httpx.TimeoutException) or self.end is None or time.monotonic() < self.end - 0.01:
            return None
        error = RemoteTimeoutError(
            f"the total deadline (ClientParam.deadline={self.param.deadline:g} s) ran out: {_describe(exc)}",
            url=self.url,
        )
        error.__cause__ = exc
        return error

    def timeout(self) -> httpx.Timeout:
        remaining = self.remaining()
        read = self.param.timeout
        connect = self.param.connect_timeout or self.param.timeout
        if remaining is not None:
            read, connect = min(read, remaining), min(connect, remaining)
        return httpx.Timeout(read, connect=connect)

    def retry(self, error: RemoteError, reason: str, retry_after: str | None = None) -> None:
        """Wait before the next attempt, or raise ``error`` when no retry is left or fits."""
        if self.attempt >= self.param.retries:
            raise error
        delay = min(self.param.backoff * (2**self.attempt), MAX_BACKOFF)
        asked = parse_retry_after(retry_after)
        if asked is not None:
            delay = min(asked, MAX_BACKOFF)
        self.last = (error, reason)
        remaining = self.remaining()
        if remaining is not None and delay >= remaining:
            raise RemoteTimeoutError(
                f"gave up after {reason}: the retry in {delay:.2f} s would pass the deadline "
                f"(ClientParam.deadline={self.param.deadline:g} s, {remaining:.2f} s left)",
                url=self.url,
            ) from error
        self.attempt += 1
        logger.info("retrying %s after %s in %.2f s (attempt %d)", self.url, reason, delay, self.attempt + 1)
        time.sleep(delay)


class HttpClient(Closable):
    """A pooled, thread-safe JSON-over-HTTP client configured by ``ClientParam``.

    See the module documentation for what is retried and which error each failure raises.

    Example:
        >>> from mx_rag.utils import ClientParam
        >>> client = HttpClient(ClientParam(use_http=True))
        >>> client.close()
    """

    def __init__(self, param: ClientParam) -> None:
        self.param = param
        self._headers = param.request_headers()
        # only the encodings decoded here with a bounded output (a compression bomb then costs no memory)
        self._own_accept_encoding = any(name.lower() == "accept-encoding" for name in self._headers)
        if not self._own_accept_encoding:
            self._headers["Accept-Encoding"] = "gzip, deflate"
        self._client = httpx.Client(
            verify=build_ssl_context(param),
            timeout=httpx.Timeout(param.timeout, connect=param.connect_timeout or param.timeout),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            trust_env=False,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()


    def post_json(self, url: str, payload: Any) -> HttpResponse:
        """POST ``payload`` as JSON and read the whole body (at most ``response_limit_size``).

        A body cut off mid-way is retried like a connection failure: nothing was returned yet.
        """
        call = _Call(self.param, url)
        while True:
            response = self._open(call, payload)
            try:
                content = b"".join(self._capped_chunks(response, call))
            except RemoteResponseError as exc:
                if not _is_cut(exc):
                    raise
                call.retry(exc, "a body cut off")
                continue
            finally:
                response.close()
            return HttpResponse(response.status_code, response.headers, content, url)

    def stream_lines(self, url: str, payload: Any) -> Iterator[str]:
        """POST ``payload`` and yield the response body line by line.

        Each line, and each event (the lines up to a blank one), is at most
        ``response_limit_size`` bytes. Retries happen only before the response starts; a body
        that ends in a broken transfer raises ``RemoteResponseError``.
        """
        call = _Call(self.param, url)
        response = self._open(call, payload)
        try:
            yield from split_lines(self._chunks(response, call), self.param.response_limit_size, url)
        finally:
            response.close()

    # -- internals -------------------------------------------------------------------------

    def _open(self, call: _Call, payload: Any) -> httpx.Response:
        """Send until a 2xx response starts (its body unread), retrying what the policy allows."""
        while True:
            request = self._client.build_request(
                "POST", call.url, json=payload, headers=self._headers, timeout=call.timeout()
            )
            try:
                response = self._client.send(request, stream=True)
            except httpx.TransportError as exc:
                error = call.deadline_error(exc) or _transport_error(exc, call.url)
                if not isinstance(exc, _RETRIED_TRANSPORT) or _tls_failure(exc) is not None:
                    raise error from exc
                call.retry(error, _describe(exc))
                continue
            if response.is_success:
                return response
            status_error = self._status_error(response, call.url)
            if response.status_code not in RETRY_STATUSES:
                raise status_error
            call.retry(status_error, f"HTTP {response.status_code}", response.headers.get("retry-after"))

    def _status_error(self, response: httpx.Response, url: str) -> RemoteStatusError:
        """The error for a non-2xx response: its first bytes are read, then it is closed."""
        body = b""
        try:
            for chunk in self._decoded(response, url):
                body += chunk
                if len(body) >= ERROR_BODY_BYTES:
                    break
        except (httpx.HTTPError, RemoteResponseError):
            pass
        finally:
            response.close()
        text = body.decode("utf-8", errors="replace")
        error = RemoteStatusError(response.status_code, _one_line(text), url=url)  # a one-line message
        error.body = text[:BODY_EXCERPT_CHARS]  # ... and the body as sent
        return error

    def _decoded(self, response: httpx.Response, url: str) -> Iterator[bytes]:
        """The body, decoded in pieces of at most 64 KiB whatever the compression ratio.

        identity, gzip and deflate are decoded here; another encoding is accepted (and decoded
        by httpx) only when ``ClientParam.headers`` asked for it with its own Accept-Encoding.
        """
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding in ("", "identity"):
            yield from response.iter_raw()
        elif encoding in ("gzip", "x-gzip", "deflate"):
            decoder = _BoundedDecoder(encoding, url)
            for raw in response.iter_raw():
                yield from decoder.decode(raw)
            yield from decoder.flush()
        elif self._own_accept_encoding:
            yield from response.iter_bytes()
        else:
            raise RemoteResponseError(
                f"the server sent Content-Encoding {encoding!r}, which was not asked for (gzip or deflate)", url=url
            )

    def _chunks(self, response: httpx.Response, call: _Call) -> Iterator[bytes]:
        try:
            for chunk in self._decoded(response, call.url):
                call.remaining()
                yield chunk
        except httpx.TimeoutException as exc:
            raise call.deadline_error(exc) or RemoteTimeoutError(
                f"reading the response timed out: {_describe(exc)}", url=call.url
            ) from exc
        except httpx.TransportError as exc:
            raise RemoteResponseError(f"the response was cut off: {_describe(exc)}", url=call.url) from exc
        except httpx.DecodingError as exc:
            encoding = response.headers.get("content-encoding", "")
            raise RemoteResponseError(
                f"the response body could not be decoded (Content-Encoding {encoding!r}): {_describe(exc)}",
                url=call.url,
            ) from exc

    def _capped_chunks(self, response: httpx.Response, call: _Call) -> Iterator[bytes]:
        limit = self.param.response_limit_size
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > limit:
            raise ResponseTooLargeError(
                f"response of {declared} bytes exceeds response_limit_size={limit}", url=call.url
            )
        total = 0
        for chunk in self._chunks(response, call):
            total += len(chunk)
            if total > limit:
                raise ResponseTooLargeError(f"response exceeds response_limit_size={limit} bytes", url=call.url)
            yield chunk
