# SPDX-License-Identifier: Apache-2.0
"""``Fault``: a scripted reply that breaks the connection (``ScriptedServer``'s network faults).

Importable from ``mx_rag.testing.scripted_server`` too, where it was defined before.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from mx_rag.testing.replies import Reply

__all__ = ["Fault"]


@dataclass(frozen=True)
class Fault(Reply):
    """A reply that breaks the connection, for network-fault tests; enqueue it like any ``Reply``::

        srv.enqueue(Fault.hang())                                   # read the request, never answer
        srv.enqueue(Fault.hang(Reply.chat("hi"), after=5))          # head and 5 body bytes, then stall
        srv.enqueue(Fault.reset())                                  # a TCP reset instead of a response
        srv.enqueue(Fault.reset(Reply.stream(["a", "b"]), after=2)) # head and 2 HTTP chunks, then reset
        srv.enqueue(Fault.flood(1 << 30, chunked=True))             # a 1 GiB body, made while it is sent

    ``after`` counts HTTP chunks for a chunked reply (``Reply.stream`` sends its role chunk
    first) and body bytes for one with ``Content-Length``. A hanging connection is held open
    until the server stops or ``hold`` seconds pass, then closed (``hold=0``: a body cut off by
    an orderly close, FIN rather than RST). A reset closes the socket with
    ``SO_LINGER`` 0: the client gets ``ECONNRESET`` (over TLS: no close_notify either).
    """

    then: str = ""  # "hang" or "reset" once the head and `after` units are sent
    send_head: bool = True
    after: int = 0
    hold: float = 60.0
    flood_size: int | None = None  # not None: a body of this many b"x" bytes, generated while sent

    @classmethod
    def hang(cls, reply: Reply | None = None, *, after: int = 0, hold: float = 60.0) -> Fault:
        """Send nothing (``reply`` None) or ``reply``'s head and first ``after`` units, then stall."""
        return cls._wrap(reply, "hang", after, hold)

    @classmethod
    def reset(cls, reply: Reply | None = None, *, after: int = 0) -> Fault:
        """Send nothing (``reply`` None) or ``reply``'s head and first ``after`` units, then reset."""
        return cls._wrap(reply, "reset", after, 0.0)

    @classmethod
    def flood(cls, size: int, *, chunked: bool = False, content_type: str = "application/json") -> Fault:
        """A 200 with a ``size``-byte body (``Content-Length``, or chunked without it); the bytes are
        produced as they are sent, so a huge body costs the test no memory."""
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        return cls(headers=(("Content-Type", content_type),), chunks=() if chunked else None, flood_size=size)

    @classmethod
    def _wrap(cls, reply: Reply | None, then: str, after: int, hold: float) -> Fault:
        if after < 0:
            raise ValueError(f"after must be >= 0, got {after}")
        if reply is None:
            return cls(then=then, send_head=False, hold=hold)
        if reply.close_without_reply or isinstance(reply, Fault):
            raise ValueError("Fault wraps an ordinary Reply (not drop() or another Fault)")
        values = {f.name: getattr(reply, f.name) for f in fields(Reply)}
        return cls(**values, then=then, after=after, hold=hold)
