# SPDX-License-Identifier: Apache-2.0
"""``HeaderTimeoutH11``: uvicorn's h11 protocol with a deadline for request headers.

uvicorn closes idle keep-alive connections but waits forever for the headers of a request that
has begun: a client trickling one header line at a time holds a connection (and its memory)
for as long as it likes. This protocol closes a connection whose request line and headers are
not complete ``HEADER_TIMEOUT_S`` seconds after the connection opened or the previous answer
ended. Bodies have their own limits (``errors.BodyLimit``: 408 for a stalled or crawling body).
``AppServer`` and ``mxrag serve`` run uvicorn with it (``uvicorn.Config(http=HeaderTimeoutH11)``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT_S", "HeaderTimeoutH11"]

HEADER_TIMEOUT_S = 10.0


class HeaderTimeoutH11(H11Protocol):
    """See the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()  # no request came complete: nothing to answer
