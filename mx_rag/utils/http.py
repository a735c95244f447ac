# SPDX-License-Identifier: Apache-2.0
"""The one pooled HTTP layer under every service client.

``HttpClient`` wraps one ``httpx.Client`` per owning object: connections are kept alive and
reused across calls and threads. It adds what model services need and httpx leaves to callers:
TLS built from ``ClientParam`` (CA pinning, CRL, client certificates), a total deadline, retries
with exponential backoff on connection errors, 429 and 5xx, and response size caps that hold
whether or not the server sends ``Content-Length``.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from mx_rag.errors import (
    ParameterError,
    RemoteConnectionError,
    RemoteResponseError,
    RemoteStatusError,
    RemoteTimeoutError,
    ResponseTooLargeError,
)
from mx_rag.utils.checks import check_str, fail
from mx_rag.utils.client_param import ClientParam
from mx_rag.utils.common import MAX_URL_LENGTH

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF = 30.0
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
        try:
            return json.loads(self.content)
        except ValueError as exc:
            excerpt = self.text[:200]
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


def build_ssl_context(param: ClientParam) -> ssl.SSLContext:
    """TLS 1.2+, certificate and host name verified; ``ca_file`` pins trust to that CA."""
    for name in ("ca_file", "crl_file", "cert_file", "key_file"):
        path = getattr(param, name)
        if path and not os.path.isfile(path):
            raise fail(f"ClientParam.{name}", path, "an existing file")
    try:
        ctx = ssl.create_default_context(cafile=param.ca_file or None)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if param.crl_file:
            ctx.load_verify_locations(cafile=param.crl_file)
            ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
        if param.cert_file:
            ctx.load_cert_chain(param.cert_file, param.key_file or None)
    except (ssl.SSLError, OSError) as exc:
        raise ParameterError(f"ClientParam TLS files could not be loaded: {exc}") from exc
    return ctx


class _Deadline:
    def __init__(self, seconds: float | None) -> None:
        self.end = None if seconds is None else time.monotonic() + seconds

    def remaining(self, url: str) -> float | None:
        if self.end is None:
            return None
        left = self.end - time.monotonic()
        if left <= 0:
            raise RemoteTimeoutError("the total deadline (ClientParam.deadline) ran out", url=url)
        return left


class HttpClient:
    """A pooled, thread-safe JSON-over-HTTP client configured by ``ClientParam``.

    Example:
        >>> from mx_rag.utils import ClientParam
        >>> client = HttpClient(ClientParam(use_http=True))
        >>> client.close()
    """

    def __init__(self, param: ClientParam) -> None:
        self.param = param
        self._headers = param.request_headers()
        self._client = httpx.Client(
            verify=build_ssl_context(param),
            timeout=self._timeout(None),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            trust_env=False,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def post_json(self, url: str, payload: Any) -> HttpResponse:
        """POST ``payload`` as JSON and read the whole body (at most ``response_limit_size``)."""
        deadline = _Deadline(self.param.deadline)
        with self._open(url, payload, deadline) as response:
            content = b"".join(self._capped_chunks(response, url, deadline))
            return HttpResponse(response.status_code, response.headers, content, url)

    def stream_lines(self, url: str, payload: Any) -> Iterator[str]:
        """POST ``payload`` and yield the response body line by line (each line capped in size).

        Retries happen only before the response starts. A body that ends in a broken transfer
        raises ``RemoteResponseError``.
        """
        deadline = _Deadline(self.param.deadline)
        limit = self.param.response_limit_size
        with self._open(url, payload, deadline) as response:
            buffer = b""
            for chunk in self._chunks(response, url, deadline):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in (*lines, buffer):
                    if len(line) > limit:
                        raise ResponseTooLargeError(
                            f"a streamed line exceeded response_limit_size={limit} bytes", url=url
                        )
                for line in lines:
                    yield line.rstrip(b"\r").decode("utf-8", errors="replace")
            if buffer:
                yield buffer.rstrip(b"\r").decode("utf-8", errors="replace")

    # -- internals -------------------------------------------------------------------------

    def _timeout(self, remaining: float | None) -> httpx.Timeout:
        read = self.param.timeout if remaining is None else min(self.param.timeout, remaining)
        connect = self.param.connect_timeout or self.param.timeout
        if remaining is not None:
            connect = min(connect, remaining)
        return httpx.Timeout(read, connect=connect)

    def _open(self, url: str, payload: Any, deadline: _Deadline) -> _OpenResponse:
        attempt = 0
        while True:
            timeout = self._timeout(deadline.remaining(url))
            request = self._client.build_request(
                "POST", url, json=payload, headers=self._headers, timeout=timeout
            )
            try:
                response = self._client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                if attempt >= self.param.retries:
                    raise _transport_error(exc, url) from exc
                self._sleep_before_retry(attempt, None, deadline, url, repr(exc))
            except httpx.TransportError as exc:
                raise _transport_error(exc, url) from exc
            else:
                if response.is_success:
                    return _OpenResponse(response)
                if response.status_code not in RETRY_STATUSES or attempt >= self.param.retries:
                    raise self._status_error(response, url)
                retry_after = response.headers.get("retry-after")
                response.close()
                self._sleep_before_retry(attempt, retry_after, deadline, url, str(response.status_code))
            attempt += 1

    def _sleep_before_retry(
        self, attempt: int, retry_after: str | None, deadline: _Deadline, url: str, reason: str
    ) -> None:
        delay = min(self.param.backoff * (2**attempt), MAX_BACKOFF)
        if retry_after and retry_after.strip().isdigit():
            delay = min(float(retry_after), MAX_BACKOFF)
        remaining = deadline.remaining(url)
        if remaining is not None and delay >= remaining:
            raise RemoteTimeoutError(f"the deadline ran out while retrying after {reason}", url=url)
        logger.info("retrying %s after %s in %.2f s (attempt %d)", url, reason, delay, attempt + 1)
        time.sleep(delay)

    def _status_error(self, response: httpx.Response, url: str) -> RemoteStatusError:
        body = b""
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= ERROR_BODY_BYTES:
                    break
        except httpx.HTTPError:
            pass
        finally:
            response.close()
        return RemoteStatusError(response.status_code, body.decode("utf-8", errors="replace"), url=url)

    def _chunks(self, response: httpx.Response, url: str, deadline: _Deadline) -> Iterator[bytes]:
        try:
            for chunk in response.iter_bytes():
                deadline.remaining(url)
                yield chunk
        except httpx.TimeoutException as exc:
            raise RemoteTimeoutError(f"reading the response timed out: {exc!r}", url=url) from exc
        except httpx.TransportError as exc:
            raise RemoteResponseError(f"the response was cut off: {exc!r}", url=url) from exc

    def _capped_chunks(self, response: httpx.Response, url: str, deadline: _Deadline) -> Iterator[bytes]:
        limit = self.param.response_limit_size
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ResponseTooLargeError(
                f"response of {declared} bytes exceeds response_limit_size={limit}", url=url
            )
        total = 0
        for chunk in self._chunks(response, url, deadline):
            total += len(chunk)
            if total > limit:
                raise ResponseTooLargeError(f"response exceeds response_limit_size={limit} bytes", url=url)
            yield chunk


class _OpenResponse:
    """Context manager closing a streamed ``httpx.Response``."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __enter__(self) -> httpx.Response:
        return self.response

    def __exit__(self, *exc_info: object) -> None:
        self.response.close()


def _transport_error(exc: httpx.TransportError, url: str) -> RemoteConnectionError | RemoteTimeoutError:
    if isinstance(exc, httpx.TimeoutException):
        return RemoteTimeoutError(f"timed out: {exc!r}", url=url)
    return RemoteConnectionError(f"connection failed: {exc!r}", url=url)
