# SPDX-License-Identifier: Apache-2.0
"""``ClientParam``: how every HTTP client of the SDK connects (TLS, auth, timeouts, retries, caps)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mx_rag.utils.checks import (
    check_bool,
    check_int,
    check_number,
    check_optional_str,
    check_str,
    check_str_mapping,
    fail,
)
from mx_rag.utils.common import MAX_PATH_LENGTH, MB

MAX_TIMEOUT = 600
MAX_RESPONSE_LIMIT = 10 * MB
MAX_DEADLINE = 24 * 3600
MAX_RETRIES = 10
MAX_HEADERS = 100


@dataclass(frozen=True)
class ClientParam:
    """Connection settings shared by the LLM, embedding, reranker and retrieval clients.

    The first five fields are the original SDK's, with the same defaults and ranges; the rest
    are additions with backward-compatible defaults. Instances are immutable: a client reads
    them once, when it is built.

    Args:
        use_http: allow plain ``http://`` URLs (``https://`` stays allowed). Default False.
        ca_file: PEM file of the CA to trust. Empty: the system trust store. When given, only
            this CA is trusted (pinning).
        crl_file: PEM certificate revocation list checked against the server certificate.
        timeout: seconds for each connect or read, in (0, 600].
        response_limit_size: largest response body in bytes, in (0, 10 MiB]; for a stream, the
            largest single event.
        api_key: sent as ``Authorization: Bearer <api_key>``; never shown in ``repr``.
        headers: extra request headers (at most 100; no CR/LF).
        cert_file, key_file: client certificate and key (PEM) for mutual TLS.
        connect_timeout: seconds to connect; defaults to ``timeout``.
        deadline: total seconds for a whole call (retries and stream reading included); None
            for no limit.
        retries: attempts after the first on connection errors and 429, 500, 502, 503, 504
            (never on other 4xx, 501, 505, read timeouts or TLS failures), in [0, 10].
        backoff: base seconds of the exponential backoff between retries, in [0, 60].

    Example:
        >>> from mx_rag.utils import ClientParam
        >>> ClientParam(use_http=True, timeout=30, api_key="sk-local").use_http
        True
    """

    use_http: bool = False
    ca_file: str = ""
    crl_file: str = ""
    timeout: float = 60
    response_limit_size: int = MB
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict)
    cert_file: str = ""
    key_file: str = ""
    connect_timeout: float | None = None
    deadline: float | None = None
    retries: int = 3
    backoff: float = 0.5

    def __post_init__(self) -> None:
        check_bool("use_http", self.use_http)
        for name in ("ca_file", "crl_file", "cert_file", "key_file"):
            check_str(name, getattr(self, name), 0, MAX_PATH_LENGTH)
        if self.key_file and not self.cert_file:
            raise fail("cert_file", self.cert_file, "set when key_file is set")
        check_number("timeout", self.timeout, 0, MAX_TIMEOUT, low_open=True)
        check_int("response_limit_size", self.response_limit_size, 1, MAX_RESPONSE_LIMIT)
        check_optional_str("api_key", self.api_key, 1, 4096)
        headers = check_str_mapping("headers", self.headers, max_items=MAX_HEADERS, max_key=100, max_value=1000)
        object.__setattr__(self, "headers", MappingProxyType(headers))
        if self.connect_timeout is not None:
            check_number("connect_timeout", self.connect_timeout, 0, MAX_TIMEOUT, low_open=True)
        if self.deadline is not None:
            check_number("deadline", self.deadline, 0, MAX_DEADLINE, low_open=True)
        check_int("retries", self.retries, 0, MAX_RETRIES)
        check_number("backoff", self.backoff, 0, 60)

    def request_headers(self) -> dict[str, str]:
        """Headers sent with every request: JSON content type, the extras, then the API key."""
        out = {"Content-Type": "application/json", **self.headers}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    def __reduce__(self) -> Any:  # keep pickling working with the read-only headers mapping
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values["headers"] = dict(self.headers)
        return (_rebuild, (values,))


def _rebuild(values: dict[str, Any]) -> ClientParam:
    return ClientParam(**values)
