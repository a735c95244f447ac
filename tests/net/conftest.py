"""Fixtures of the network-fault tests (helpers live in net_helpers.py)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
from net_helpers import SilentListener

from mx_rag.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def silent() -> Iterator[SilentListener]:
    listener = SilentListener()
    yield listener
    listener.close()


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops new SYNs, so connecting hangs (Linux)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)
    port = sock.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect(("127.0.0.1", port))
        pytest.skip("this kernel accepts connections beyond the listen backlog; no connect timeout to test")
    except (TimeoutError, BlockingIOError):
        pass
    finally:
        probe.close()
    yield port
    for filler in fillers:
        filler.close()
    sock.close()
