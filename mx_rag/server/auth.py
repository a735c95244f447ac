# SPDX-License-Identifier: Apache-2.0
"""Who a request acts for: ``Authorization: Bearer <API key>``, or the local user.

With no API key configured a server on 127.0.0.1 is in local single-user mode: every request
acts for the local user (an admin). Once a key exists, every route except ``/healthz``,
``/readyz``, ``/metrics`` and the web app's files needs one (the check is cached for a few
seconds, so a revoked key stops working within that time on every worker). A server that
listens on another address never falls back to local mode: with every key revoked it refuses
every request (401) until a key is created again.

What a key may do: any key reads, searches and asks the knowledge bases its user has a role in;
changing anything (creating or deleting a knowledge base, uploading or deleting documents, MCP
``add_document``) needs an admin key (``mxrag keys create USER --admin``) and, in an existing
knowledge base, its user's admin role there (a ``member`` only reads).

``Guard`` resolves the principal before the body is read and keeps it in the request's scope
(``PRINCIPAL``); ``current`` and ``current_admin`` are the routes' dependencies.
"""

from __future__ import annotations

import threading
import time

import anyio.to_thread
from fastapi import Request

from mx_rag.app.keys import KeyStore, Principal
from mx_rag.server.errors import ApiError

__all__ = ["CACHE_S", "PRINCIPAL", "Authenticator"]

CACHE_S = 5.0
PRINCIPAL = "mx_rag.principal"  # the scope key Guard keeps the principal under
_NOT_ADMIN = "this needs an admin key (mxrag keys create USER --admin): this key may only read and ask"


class Authenticator:
    """Resolves the principal of a request from its bearer key.

    Args:
        keys: the key store.
        local: the principal of local mode.
        local_mode: whether the server may run in local mode when no key is active (a server on
            127.0.0.1); False: no active key means every request is refused.
    """

    def __init__(self, keys: KeyStore, local: Principal, *, local_mode: bool = True) -> None:
        self._keys = keys
        self._local = local
        self._local_mode = local_mode
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._keys_exist: tuple[float, bool] = (-CACHE_S - 1, False)

    def keys_configured_cached(self) -> bool | None:
        """Whether keys are needed, from the cache; None when the database must be asked."""
        if not self._local_mode:
            return True
        checked, exist = self._keys_exist
        return exist if time.monotonic() - checked <= CACHE_S else None

    def keys_configured(self) -> bool:
        """Whether requests need a key (asks the database at most every few seconds)."""
        known = self.keys_configured_cached()
        if known is None:
            known = self._keys.any_active()
            self._keys_exist = (time.monotonic(), known)
        return known

    def cached(self, header: str) -> Principal | None:
        """The principal of an ``Authorization`` header where the cache knows it; None when the
        database must be asked (``resolve``); ApiError 401 for a key known to be invalid."""
        configured = self.keys_configured_cached()
        if configured is None:
            return None
        if not configured:
            return self._local
        key = _bearer(header)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is None or now - hit[0] > CACHE_S:
            return None
        if hit[1] is None:
            raise ApiError(401, "unauthorized", "the API key is unknown or revoked")
        return hit[1]

    def resolve(self, header: str) -> Principal:
        """The principal of an ``Authorization`` header; ApiError 401 without a valid key when
        keys are needed."""
        if not self.keys_configured():
            return self._local
        found = self._lookup(_bearer(header))
        if found is None:
            raise ApiError(401, "unauthorized", "the API key is unknown or revoked")
        return found

    def principal(self, request: Request) -> Principal:
        """The request's principal (as ``Guard`` found it); ApiError 401 without a valid key."""
        found = request.scope.get(PRINCIPAL)
        if isinstance(found, Principal):
            return found
        return self.resolve(request.headers.get("authorization", ""))

    def admin(self, request: Request) -> Principal:
        """The request's principal if its key is an admin key; ApiError 403 otherwise."""
        who = self.principal(request)
        if not who.admin:
            raise ApiError(403, "forbidden", _NOT_ADMIN)
        return who

    async def current(self, request: Request) -> Principal:
        """``principal`` as a FastAPI dependency: a coroutine, so no worker thread is taken for
        it (``Guard`` has found the principal; the database is asked in a thread otherwise)."""
        found = request.scope.get(PRINCIPAL)
        if isinstance(found, Principal):
            return found
        return await anyio.to_thread.run_sync(self.principal, request)

    async def current_admin(self, request: Request) -> Principal:
        """``admin`` as a FastAPI dependency (see ``current``)."""
        who = await self.current(request)
        if not who.admin:
            raise ApiError(403, "forbidden", _NOT_ADMIN)
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


def _bearer(header: str) -> str:
    """The key of ``Bearer <key>``; ApiError 401 for anything else."""
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(401, "unauthorized", "this server needs an API key: send 'Authorization: Bearer <key>'")
    return key.strip()
