# SPDX-License-Identifier: Apache-2.0
"""``Guard``: the plain ASGI layer in front of every route of ``mxrag serve``.

For each HTTP request, before any route code runs and before one byte of its body is read:

1. local mode only (no API key, a server on 127.0.0.1): the ``Host`` header must name this
   machine (``127.0.0.1``, ``localhost``, ``[::1]``, any port), else 421, so a page on another
   site cannot reach the server through DNS rebinding; a state-changing request (not GET, HEAD or
   OPTIONS) whose ``Origin`` is another site, or whose ``Sec-Fetch-Site`` is ``cross-site``, is
   refused with 403, so a page on another site cannot post to it;
2. who the request acts for (``Authenticator``): without a valid key where keys are needed, 401
   with ``WWW-Authenticate: Bearer``; every route needs one except ``/healthz``, ``/readyz``,
   ``/metrics``, ``/openapi.json`` and the web app's files (``/``, ``/static/...``);

then ``errors.BodyLimit`` (inside it) bounds the body as it streams.

The principal found is kept in the request's scope (``PRINCIPAL``); the routes read it there.
Plain ASGI: no task, queue or thread per request (a cached key is checked in the event loop).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from mx_rag.server.auth import PRINCIPAL, Authenticator
from mx_rag.server.errors import ApiError, error_response

__all__ = ["PUBLIC_PATHS", "Guard", "is_local_host"]

PUBLIC_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/")  # and everything under /static/
_SAFE_METHODS = (b"GET", b"HEAD", b"OPTIONS")
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_local_host(value: str) -> bool:
    """Whether a ``Host`` header (or an origin's host part) names this machine: 127.0.0.1,
    localhost or [::1], with any port."""
    try:
        host = urlsplit("//" + value).hostname
    except ValueError:
        return False
    return host in _LOCAL_HOSTS


class Guard:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app: ASGIApp, *, auth: Authenticator) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        try:
            await self._admit(scope, headers)
        except ApiError as exc:
            response = error_response(exc.status, exc.code, exc.message)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _admit(self, scope: Scope, headers: dict[bytes, bytes]) -> None:
        """The Host/Origin checks of local mode, then the principal (ApiError to refuse)."""
        path: str = scope["path"]
        local = not await self._keys_configured()
        if local:
            host = headers.get(b"host", b"").decode("latin-1")
            if not is_local_host(host):
                raise ApiError(421, "misdirected_request",
                               "this server is in local mode and answers only requests for 127.0.0.1, "
                               "localhost or [::1] (Host header)")
            if scope["method"].encode() not in _SAFE_METHODS and _cross_site(headers):
                raise ApiError(403, "cross_site_request", "this server is in local mode and refuses "
                               "state-changing requests from pages of other sites (Origin header)")
        if path in PUBLIC_PATHS or path.startswith("/static/"):
            return
        header = headers.get(b"authorization", b"").decode("latin-1")
        who = self.auth.cached(header)
        if who is None:
            who = await anyio.to_thread.run_sync(self.auth.resolve, header)
        scope[PRINCIPAL] = who

    async def _keys_configured(self) -> bool:
        known = self.auth.keys_configured_cached()
        if known is None:
            known = await anyio.to_thread.run_sync(self.auth.keys_configured)
        return known


def _cross_site(headers: dict[bytes, bytes]) -> bool:
    if headers.get(b"sec-fetch-site", b"").lower() == b"cross-site":
        return True
    origin = headers.get(b"origin")
    if origin is None:
        return False
    text = origin.decode("latin-1").strip()
    if text == "null":  # a sandboxed frame, a file: page, a redirect across sites
        return True
    parts: Any = urlsplit(text)
    return not is_local_host(parts.netloc)
