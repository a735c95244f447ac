# SPDX-License-Identifier: Apache-2.0
"""Who a request acts for: ``Authorization: Bearer <API key>``, or the local user.

With no API key configured the server is in local single-user mode: every request acts for the
local user, and ``mxrag serve`` only listens on 127.0.0.1. Once a key exists, every route except
``/healthz``, ``/readyz`` and ``/metrics`` needs one (the check is cached for a few seconds, so a
revoked key stops working within that time on every worker).
"""

from __future__ import annotations

import threading
import time

from fastapi import Request

from mx_rag.server.errors import ApiError
from mx_rag.server.keys import KeyStore, Principal

__all__ = ["Authenticator"]

CACHE_S = 5.0


class Authenticator:
    """Resolves the principal of a request from its bearer key."""

    def __init__(self, keys: KeyStore, local: Principal) -> None:
        self._keys = keys
        self._local = local
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._keys_exist: tuple[float, bool] = (0.0, False)

    def keys_configured(self) -> bool:
        checked, exist = self._keys_exist
        if time.monotonic() - checked > CACHE_S:
            exist = self._keys.any_active()
            self._keys_exist = (time.monotonic(), exist)
        return exist

    def principal(self, request: Request) -> Principal:
        """The request's principal; ApiError 401 without a valid key when keys are configured."""
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if not self.keys_configured():
            return self._local
        if scheme.lower() != "bearer" or not key.strip():
            raise ApiError(401, "unauthorized", "this server needs an API key: send 'Authorization: Bearer <key>'")
        found = self._lookup(key.strip())
        if found is None:
            raise ApiError(401, "unauthorized", "the API key is unknown or revoked")
        return found

    def admin(self, request: Request) -> Principal:
        who = self.principal(request)
        if not who.admin:
            raise ApiError(403, "forbidden", "this needs an admin key")
        return who

    def _lookup(self, key: str) -> Principal | None:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and now - cached[0] <= CACHE_S:
                return cached[1]
        found = self._keys.authenticate(key)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now, found)
        return found
